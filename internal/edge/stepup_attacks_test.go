//go:build integration

package edge

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/fintech-bff/bff/internal/dpop"
	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/limits"
	"github.com/fintech-bff/bff/internal/login"
	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
	"github.com/fintech-bff/bff/internal/session"
	"github.com/fintech-bff/bff/internal/testing/testclock"
)

// Attacks on the step-up endpoints and on device-bound sessions at the
// edge, found by an adversarial review; each succeeded before its fix.

// reviewHolds is a StepUps with one held payment, made by the session
// whose handle is victimHandle; it records what the edge asks of it.
type reviewHolds struct {
	mu       sync.Mutex
	declined []string
	approved []string
}

const (
	reviewRef    = "REF-of-alices-held-payment"
	victimHandle = "alices-session-handle"
	reviewIBAN   = "DE89370400440532013000"
)

func (h *reviewHolds) HeldPayment(_ context.Context, ref string) (payments.Hold, *problem.Problem) {
	if ref != reviewRef {
		return payments.Hold{}, problem.New(problem.CodeNotFound, "no such hold")
	}
	return payments.Hold{Key: "k", Route: "/v2/payments", UserID: "alice", SessionRef: victimHandle,
		Details:   json.RawMessage(`[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"5000.00"},"creditorName":"Landlord","creditorAccount":{"iban":"` + reviewIBAN + `"}}]`),
		ACRValues: []string{"urn:bff:acr:mfa"}, MaxAge: 5 * time.Minute, Expires: time.Now().Add(time.Hour)}, nil
}

func (h *reviewHolds) Approve(_ context.Context, ref, _, _ string, _ payments.Approval) (payments.Record, *problem.Problem) {
	h.mu.Lock()
	h.approved = append(h.approved, ref)
	h.mu.Unlock()
	return payments.Record{}, problem.New(problem.CodeNotFound, "review fake")
}

func (h *reviewHolds) DeclineHold(_ context.Context, ref, _, _ string) (payments.Declined, error) {
	h.mu.Lock()
	h.declined = append(h.declined, ref)
	h.mu.Unlock()
	return payments.Declined{Ending: "denied"}, nil
}

// reviewIssuer is a minimal OpenID provider: discovery (with
// payment_initiation details) and its keys. Nothing here reaches its
// token endpoint.
func reviewIssuer(t *testing.T) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": srv.URL, "authorization_endpoint": srv.URL + "/auth", "token_endpoint": srv.URL + "/token",
			"jwks_uri": srv.URL + "/jwks", "id_token_signing_alg_values_supported": []string{"RS256"},
			"authorization_details_types_supported": []string{"payment_initiation"},
		})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	return srv.URL
}

const reviewAppURI = "com.example.app:/oauth/cb"

// reviewForwarder is a forwarder to an upstream that answers {} to all.
func reviewForwarder(t *testing.T) *proxy.Forwarder {
	t.Helper()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, `{}`) }))
	t.Cleanup(upstream.Close)
	base, _ := url.Parse(upstream.URL)
	return proxy.New(proxy.Options{BaseURL: base, Routes: proxy.NewRoutes([]proxy.Route{{Prefix: "/v2/payments", Methods: []string{"GET"}}}),
		Tokens: fixedToken{}, Timeout: 5 * time.Second, MaxBodyBytes: 1 << 20, Retry: proxy.Retry{MaxAttempts: 1}})
}

func newStepUpReviewEdge(t *testing.T) (http.Handler, *reviewHolds) {
	t.Helper()
	ctx := context.Background()
	store := kv.NewMemory(nil)
	prov, err := login.New(ctx, login.Options{Issuer: reviewIssuer(t), ClientID: "bff", RedirectURL: publicOrigin + "/auth/callback",
		UserIDClaim: "sub", Store: store, EncryptionKey: make([]byte, 32), MobileRedirectURIs: []string{reviewAppURI}})
	if err != nil {
		t.Fatal(err)
	}
	binding, err := session.NewCookies(session.CookieOptions{Name: "bff_login", Keys: [][]byte{make([]byte, 32)}, MaxAge: login.StateTTL})
	if err != nil {
		t.Fatal(err)
	}
	cookies, err := session.NewCookies(session.CookieOptions{Name: "bff_session", Keys: [][]byte{make([]byte, 32)}, MaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	sessions := session.NewManager(kv.NewMemory(nil), session.Options{IdleTimeout: time.Hour, AbsoluteTimeout: 2 * time.Hour})
	fwd := reviewForwarder(t)
	holds := &reviewHolds{}
	e := NewPublic(Deps{
		Observability: Observability{Logger: slog.New(slog.DiscardHandler), Observe: &heard{}},
		Sessions:      Sessions{Manager: sessions, Cookies: cookies, Tokens: noTokens{}},
		Clients:       Clients{PublicOrigin: publicOrigin},
		Login:         Login{OIDC: prov, Cookies: binding, MobileRedirectURIs: []string{reviewAppURI}},
		Limits:        Limits{PerAddress: limits.NewLocal(nil)},
		API:           API{Forwarder: fwd},
		Payments:      PaymentRoutes{StepUps: holds},
	})
	return e, holds
}

// The native step-up start (client=mobile) needs no session: the system
// browser has none, and the payment's reference is what the user's
// sessions were given. Whoever has the reference may start the approval
// (the provider then shows the payment, as the reference's holder may
// see it), but cannot end it: coming back to the callback with
// error=access_denied declines nothing. The refusal goes to the app in
// its one-time code, and only the session that made the payment declines
// it by redeeming that code.
func TestStepUpAttackMobileStartCannotDeclineWithoutTheSession(t *testing.T) {
	e, holds := newStepUpReviewEdge(t)
	q := url.Values{"payment": {reviewRef}, "client": {"mobile"}, "redirect_uri": {reviewAppURI},
		"code_challenge": {login.S256(strings.Repeat("v", 43))}, "state": {"s"}}
	r := httptest.NewRequest(http.MethodGet, "http://10.0.3.7:8080/auth/step-up?"+q.Encode(), nil) // no session
	w := httptest.NewRecorder()
	e.ServeHTTP(w, r)
	if w.Code != http.StatusFound {
		t.Fatalf("the native start: got %d %s, want 302 to the provider", w.Code, w.Body)
	}
	loc, _ := url.Parse(w.Header().Get("Location"))
	state := loc.Query().Get("state")
	cb := httptest.NewRequest(http.MethodGet, "http://10.0.3.7:8080/auth/callback?"+url.Values{"state": {state}, "error": {"access_denied"}}.Encode(), nil)
	for _, ck := range w.Result().Cookies() {
		cb.AddCookie(ck)
	}
	w2 := httptest.NewRecorder()
	e.ServeHTTP(w2, cb)
	holds.mu.Lock()
	declined := append([]string(nil), holds.declined...)
	holds.mu.Unlock()
	if len(declined) > 0 {
		t.Fatalf("with no session the callback (%d %s) declined holds %q; want no decline", w2.Code, w2.Header().Get("Location"), declined)
	}
	app, _ := url.Parse(w2.Header().Get("Location"))
	if w2.Code != http.StatusFound || !strings.HasPrefix(app.String(), reviewAppURI) || app.Query().Get("error") != "access_denied" ||
		app.Query().Get("code") == "" || app.Query().Get("state") != "s" {
		t.Fatalf("the callback: got %d %q, want the app's redirect with error=access_denied, a code and its state", w2.Code, app)
	}
}

// A request of a device-bound session refused for its proof does not
// slide the session's idle timeout (the proof is checked before Lookup
// writes LastSeen back): a thief who holds the token but not the key
// cannot keep the victim's session from idling out.
func TestDPoPAttackRefusedProofDoesNotSlideTheIdleTimeout(t *testing.T) {
	for _, thief := range []bool{false, true} {
		name := map[bool]string{false: "control: no request in between", true: "a thief's refused requests in between"}[thief]
		t.Run(name, func(t *testing.T) {
			clock := testclock.New(time.Now())
			replay := kv.NewMemory(clock.Now)
			v, err := dpop.NewVerifier(dpop.Options{Replay: replay, Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			cookies, err := session.NewCookies(session.CookieOptions{Name: "bff_session", Keys: [][]byte{make([]byte, 32)}, MaxAge: time.Hour, Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			sessions := session.NewManager(kv.NewMemory(clock.Now), session.Options{IdleTimeout: 10 * time.Minute, AbsoluteTimeout: 12 * time.Hour, Now: clock.Now})
			e := NewPublic(Deps{
				Observability: Observability{Logger: slog.New(slog.DiscardHandler), Observe: &heard{}},
				Sessions:      Sessions{Manager: sessions, Cookies: cookies, Tokens: noTokens{}},
				Clients:       Clients{PublicOrigin: publicOrigin},
				DPoP:          DPoP{Mode: DPoPOptional, Verifier: v},
				Login:         Login{Dev: true},
				API:           API{Forwarder: reviewForwarder(t)},
			})
			d := dpopEdge{e: e}
			k := newProofKey(t)
			at := func(c map[string]any) { c["iat"] = clock.Now().Unix() }
			w := d.do(t, "POST", "/auth/dev/login", `{"userId":"alice"}`, "DPoP", k.proof("POST", publicOrigin+"/auth/dev/login", "", at))
			var out struct{ SessionToken, TokenType string }
			_ = json.Unmarshal(w.Body.Bytes(), &out)
			if w.Code != 200 || out.TokenType != "DPoP" {
				t.Fatalf("bound login: got %d %s", w.Code, w.Body)
			}
			for range 3 {
				clock.Advance(4 * time.Minute)
				if thief {
					// Refused for its proof, or, once the session idled out,
					// as an ended session: 401 either way.
					if w := d.do(t, "GET", "/auth/session", "", "Authorization", "DPoP "+out.SessionToken); w.Code != http.StatusUnauthorized {
						t.Fatalf("the thief's request without a proof: got %d %s, want 401", w.Code, w.Body)
					}
				}
			}
			// 12 minutes since the owner's last request: past the 10-minute idle timeout.
			w = d.do(t, "GET", "/auth/session", "", "Authorization", "DPoP "+out.SessionToken,
				"DPoP", k.proof("GET", publicOrigin+"/auth/session", out.SessionToken, at))
			var p problem.Problem
			_ = json.Unmarshal(w.Body.Bytes(), &p)
			if w.Code != http.StatusUnauthorized || p.Code != problem.CodeSessionRequired {
				t.Fatalf("the owner's request 12 minutes after their last one: got %d %s; want 401 SESSION_REQUIRED (idled out): refused requests without the key kept it alive",
					w.Code, w.Body)
			}
		})
	}
}

// A device-bound session's STEP_UP_REQUIRED names its own scheme in the
// challenge; a Bearer or cookie session's keeps Bearer.
func TestStepUpChallengeNamesTheSessionsScheme(t *testing.T) {
	held := func() error {
		p := problem.New(problem.CodeStepUpRequired, "held")
		p.WWWAuthenticate = `Bearer error="insufficient_user_authentication", acr_values="mfa"`
		return p
	}
	err := held()
	stepUpScheme(err, session.Record{JKT: "thumbprint"})
	if got := err.(*problem.Problem).WWWAuthenticate; got != `DPoP error="insufficient_user_authentication", acr_values="mfa"` {
		t.Errorf("a bound session's challenge: got %q", got)
	}
	err = held()
	stepUpScheme(err, session.Record{})
	if got := err.(*problem.Problem).WWWAuthenticate; !strings.HasPrefix(got, "Bearer ") {
		t.Errorf("an unbound session's challenge: got %q", got)
	}
}
