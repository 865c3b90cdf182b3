package edge

import (
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/session"
)

// Readiness is the state /readyz reports: ready from start-up until the
// shutdown drain. It does not follow Redis or PostgreSQL: every instance
// shares them, so failing readiness with them would take every instance
// out of the load balancer at once and replace the BFF's own clear 503
// (SESSION_STORE_UNAVAILABLE, LEDGER_UNAVAILABLE) with the balancer's
// error page. Their health is in bff_store_up and bff_ledger_up. Safe for
// concurrent use.
type Readiness struct {
	draining atomic.Bool
}

// NewReadiness returns a Readiness that is ready.
func NewReadiness() *Readiness { return &Readiness{} }

// Drain makes /readyz answer 503 from now on (shutdown has begun).
func (r *Readiness) Drain() { r.draining.Store(true) }

// AdminDeps is what the admin listener is built from.
type AdminDeps struct {
	Ready    *Readiness
	Gatherer prometheus.Gatherer
	Sessions *session.Manager
	Tokens   TokenInvalidator
	// Observe, when set, is told of the sessions an operator revokes.
	Observe Observer
	Logger  *slog.Logger
	// Pprof serves the runtime profiles under /debug/pprof/.
	Pprof bool
	// ReloadSecret re-reads the client secret (what SIGHUP does); it
	// reports whether the secret changed.
	ReloadSecret func() (changed bool, err error)
	// Token is the bearer token of the mutating endpoints (POST
	// /reload-secret, DELETE /users/{userId}/sessions), from
	// admin_token_file. Empty: those endpoints do not exist (404), so a
	// page that reaches the admin listener (DNS rebinding) can change
	// nothing.
	Token string
}

// NewAdmin returns the admin handler: /healthz, /readyz, /metrics and the
// operator's DELETE /users/{userId}/sessions. It is served on admin_listen
// only, never on the public listener; that listener must be reachable by
// operators only.
func NewAdmin(d AdminDeps) http.Handler {
	ready := d.Ready
	if d.Observe == nil {
		d.Observe = nopObserver{}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if ready.draining.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("draining\n"))
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(d.Gatherer, promhttp.HandlerOpts{}))
	if d.Pprof {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	if d.Token == "" {
		return mux
	}
	mux.HandleFunc("POST /reload-secret", bearer(d.Token, func(w http.ResponseWriter, r *http.Request) {
		changed, err := d.ReloadSecret()
		if err != nil {
			adminFail(w, problem.Wrap(problem.CodeInternal, "the client secret could not be re-read; the current one stays", err))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(struct {
			Changed bool `json:"changed"`
		}{changed})
	}))
	mux.HandleFunc("DELETE /users/{userId}/sessions", bearer(d.Token, func(w http.ResponseWriter, r *http.Request) {
		user := r.PathValue("userId")
		ended, err := d.Sessions.RevokeUser(r.Context(), user)
		if err != nil {
			adminFail(w, problem.Wrap(problem.CodeSessionStoreUnavailable, "sessions cannot be ended right now", err))
			return
		}
		if err := d.Tokens.Invalidate(r.Context(), user); err != nil {
			d.Logger.Warn("the user's upstream token could not be dropped", slog.String("error", err.Error()))
		}
		d.Observe.Revoked(session.ReasonAdmin, len(ended))
		d.Logger.Info("operator revoked a user's sessions", slog.String("user", userHash(user)), slog.Int("sessions", len(ended)))
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(struct {
			Revoked int `json:"revoked"`
		}{len(ended)})
	}))
	return mux
}

// bearer lets a request through only with Authorization: Bearer <token>,
// compared in constant time; anything else is 401.
func bearer(token string, next http.HandlerFunc) http.HandlerFunc {
	want := []byte("Bearer " + token)
	return func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="bff-admin"`)
			adminFail(w, problem.New(problem.CodeAdminTokenRequired, "send the admin token from admin_token_file as Authorization: Bearer"))
			return
		}
		next(w, r)
	}
}

// adminFail renders the admin listener's errors (it has no Echo, no access
// log and no request id of its own: each answer gets a fresh one).
func adminFail(w http.ResponseWriter, p *problem.Problem) {
	problem.Write(w, p, newRequestID())
}
