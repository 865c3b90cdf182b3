package edge

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/fintech-bff/bff/internal/dpop"
	"github.com/fintech-bff/bff/internal/limits"
	"github.com/fintech-bff/bff/internal/problem"
)

// Device-bound native sessions (DPoP, RFC 9449; docs/operations.md,
// "Device-bound sessions (DPoP)"): a token login that sends a proof of a
// key is bound to that key, and the session is then accepted only as
// "Authorization: DPoP <sessionToken>" with a fresh proof of it on every
// request.

// The values of session.mobile_dpop.
const (
	// DPoPOff ignores proofs at login: every native session is unbound.
	// Sessions bound before still need their proofs.
	DPoPOff = "off"
	// DPoPOptional binds a token login that sends a proof, and lets one
	// without a proof have an unbound (Bearer) session.
	DPoPOptional = "optional"
	// DPoPRequired refuses a mobile token exchange without a proof.
	DPoPRequired = "required"
)

// DPoP is how the edge binds native sessions to a device key.
type DPoP struct {
	// Mode is session.mobile_dpop: DPoPOff, DPoPOptional or DPoPRequired.
	// It decides only what a login does; a bound session needs its proofs
	// whatever the mode.
	Mode string
	// Verifier checks the proofs. Without one every login is unbound (as
	// with DPoPOff) and the DPoP scheme is refused.
	Verifier *dpop.Verifier
	// Observe, when set, is told of each proof checked and each native
	// session created (metrics).
	Observe DPoPObserver
}

// DPoPObserver receives the device binding's events. Implementations must
// be cheap and safe for concurrent use. No label carries a token, a key or
// its thumbprint.
type DPoPObserver interface {
	// Proof reports a DPoP check at use (a login or a request): refused is
	// why the proof was refused (missing, scheme, htu, replay, ...), ""
	// when it was accepted.
	Proof(use dpop.Use, refused dpop.Reason)
	// NativeSession reports a session made by POST /auth/mobile/token,
	// by binding: dpop (bound to the proof's key) or bearer (unbound).
	NativeSession(binding dpop.Binding)
}

type nopDPoPObserver struct{}

func (nopDPoPObserver) Proof(dpop.Use, dpop.Reason) {}
func (nopDPoPObserver) NativeSession(dpop.Binding)  {}

// accepted is the Reason DPoPObserver.Proof is told of an accepted proof:
// none.
const accepted dpop.Reason = ""

// dpopDetail is the one detail of every refused proof: what was wrong
// with it goes to the log and the metric, never to the client.
const dpopDetail = "the request's DPoP proof is missing or not valid for this session"

// binder checks proofs for the edge: at login (bind) and on every request
// of a bound session (check). Nil-safe: a nil binder binds nothing and
// refuses the DPoP scheme.
type binder struct {
	mode     string
	verifier *dpop.Verifier
	origin   string // public_url's origin: a proof's htu names it, never the listener's address
	limits   *addressLimits
	observe  DPoPObserver
	refused  *sparseLog
}

func newBinder(d DPoP, origin string, limits *addressLimits, log *slog.Logger) *binder {
	if d.Observe == nil {
		d.Observe = nopDPoPObserver{}
	}
	mode := d.Mode
	if d.Verifier == nil {
		mode = DPoPOff
	}
	return &binder{mode: mode, verifier: d.Verifier, origin: origin, limits: limits, observe: d.Observe,
		refused: newSparseLog(log, slog.LevelInfo, "DPoP proof refused", time.Second)}
}

// algs is the algs parameter of the DPoP challenge.
func (b *binder) algs() string {
	if b == nil || b.verifier == nil {
		return strings.Join(dpop.DefaultAlgorithms, " ")
	}
	return b.verifier.Algorithms()
}

// challenge is the WWW-Authenticate value of a DPoP refusal; errCode is
// RFC 9449's error (invalid_dpop_proof, invalid_token), "" for none.
func (b *binder) challenge(errCode string) string {
	if errCode == "" {
		return `DPoP algs="` + b.algs() + `"`
	}
	return `DPoP error="` + errCode + `", algs="` + b.algs() + `"`
}

// refuse is the answer to a refused proof: the reason goes to a log line
// (at most one a second) and the metric; the client gets 401
// DPOP_PROOF_INVALID with the same detail whatever it was, or 429 once its
// address has sent more refused proofs than limits.auth_per_minute (as a
// client guessing at the /auth endpoints would be).
func (b *binder) refuse(c echo.Context, use dpop.Use, reason dpop.Reason) error {
	b.observe.Proof(use, reason)
	b.refused.write(c.Request().Context(), slog.String("requestId", requestID(c)), slog.String("use", string(use)), slog.String("reason", string(reason)))
	if b.limits != nil {
		if over := b.limits.allow(c, limits.KindDPoP, b.limits.auth, time.Minute,
			"too many refused DPoP proofs from this address; retry in %d s"); over != nil {
			return over
		}
	}
	p := problem.New(problem.CodeDPoPProofInvalid, dpopDetail)
	p.WWWAuthenticate = b.challenge("invalid_dpop_proof")
	return p
}

// proofHeader is the request's one DPoP header: "" and ReasonMissing
// without one, ReasonMultiple with several (RFC 9449 section 4.3).
func proofHeader(r *http.Request) (string, dpop.Reason) {
	v := r.Header.Values("DPoP")
	switch {
	case len(v) == 0 || len(v) == 1 && v[0] == "":
		return "", dpop.ReasonMissing
	case len(v) > 1:
		return "", dpop.ReasonMultiple
	}
	return v[0], ""
}

// bind is a token login's binding: the thumbprint of the key the login's
// proof shows ("" for an unbound session), or the login's refusal. A
// proof is checked when the mode is not off; none is refused only where
// required holds (the mobile token exchange).
func (b *binder) bind(c echo.Context, required bool) (string, error) {
	if b == nil || b.mode == DPoPOff {
		return "", nil
	}
	r := c.Request()
	proof, reason := proofHeader(r)
	switch {
	case reason == dpop.ReasonMissing && !(required && b.mode == DPoPRequired):
		return "", nil
	case reason == dpop.ReasonMissing:
		b.observe.Proof(dpop.UseLogin, reason)
		p := problem.New(problem.CodeDPoPProofInvalid, "this BFF binds native sessions to a device key: send a DPoP proof (RFC 9449) of the app's key with this request (docs/endpoints.md)")
		p.WWWAuthenticate = b.challenge("")
		return "", p
	case reason != "":
		return "", b.refuse(c, dpop.UseLogin, reason)
	}
	got, err := b.verifier.Verify(r.Context(), proof, dpop.Check{Method: r.Method, URL: b.origin + r.URL.EscapedPath()})
	if err != nil {
		return "", b.failed(c, dpop.UseLogin, err)
	}
	b.observe.Proof(dpop.UseLogin, accepted)
	return got.JKT, nil
}

// check is a request's proof for a bound session (jkt) sent with token.
func (b *binder) check(c echo.Context, token, jkt string) error {
	if b == nil || b.verifier == nil {
		return errors.New("edge: no DPoP verifier") // never: a bound session needs a verifier to exist
	}
	r := c.Request()
	proof, reason := proofHeader(r)
	if reason != "" {
		return b.refuse(c, dpop.UseRequest, reason)
	}
	if _, err := b.verifier.Verify(r.Context(), proof, dpop.Check{Method: r.Method, URL: b.origin + r.URL.EscapedPath(), Token: token, JKT: jkt}); err != nil {
		return b.failed(c, dpop.UseRequest, err)
	}
	b.observe.Proof(dpop.UseRequest, accepted)
	return nil
}

// failed answers a Verify error: a refused proof, or the replay store
// failing (503, failing closed: a proof that cannot be checked for replay
// is not accepted).
func (b *binder) failed(c echo.Context, use dpop.Use, err error) error {
	if reason := dpop.ReasonOf(err); reason != "" {
		return b.refuse(c, use, reason)
	}
	if errors.Is(err, context.Canceled) {
		return problem.Wrap(problem.CodeClientClosedRequest, "the client went away", err)
	}
	return problem.Wrap(problem.CodeSessionStoreUnavailable, "sessions cannot be checked right now", err)
}

// tokenType names a token login's session in its answer, by its binding
// (dpop.BindingOf(jkt)): DPoP when bound to the proof's key, else Bearer.
func tokenType(jkt string) string {
	if dpop.BindingOf(jkt) == dpop.BindingDPoP {
		return "DPoP"
	}
	return "Bearer"
}
