//go:build integration

package edge

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/dpop"
	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/limits"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
	"github.com/fintech-bff/bff/internal/session"
	"github.com/fintech-bff/bff/internal/testing/dpoptest"
	"github.com/fintech-bff/bff/internal/testing/syncbuf"
)

// Proof hears an accepted proof as "proof <use> ok", a refused one as
// "proof <use> <reason>".
func (e *heard) Proof(use dpop.Use, refused dpop.Reason) {
	if refused == accepted {
		refused = "ok"
	}
	e.add("proof %s %s", use, refused)
}
func (e *heard) NativeSession(binding dpop.Binding) { e.add("native %s", binding) }

// publicOrigin is the BFF's public URL in these tests: proofs name it,
// never the address the test's requests are sent to.
const publicOrigin = "https://app.example.com"

// proofKey is a native app's key (dpoptest.Key), signing proofs for the
// edge under test.
type proofKey struct{ dpoptest.Key }

func newProofKey(t testing.TB) proofKey { return proofKey{dpoptest.NewKey(t)} }

// proof is a proof for method and url (the public one), with token's ath
// unless token is "", iat now; edit changes the claims before signing.
func (k proofKey) proof(method, url, token string, edit ...func(map[string]any)) string {
	return k.Proof(method, url, token, edit...)
}

// dpopEdge is an edge with the dev login, a live session store on Redis,
// the DPoP binding in mode, the per-address budgets in process (refusals
// spend authPerMinute) and an upstream that answers every GET.
type dpopEdge struct {
	e       http.Handler
	observe *heard
	logs    *syncbuf.Buffer
	cookies *session.Cookies
}

func newDPoPEdge(t *testing.T, mode string, authPerMinute int, replay dpop.ReplayStore) dpopEdge {
	t.Helper()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"items":[]}`)
	}))
	t.Cleanup(upstream.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	store, sessions, cookies := liveSessions(ctx, t)
	if replay == nil {
		replay = store
	}
	v, err := dpop.NewVerifier(dpop.Options{Replay: replay})
	if err != nil {
		t.Fatal(err)
	}
	base, _ := url.Parse(upstream.URL)
	fwd := proxy.New(proxy.Options{
		BaseURL: base, Routes: proxy.NewRoutes([]proxy.Route{{Prefix: "/v2/payments", Methods: []string{"GET", "POST"}}}),
		Tokens: fixedToken{}, Timeout: 5 * time.Second, MaxBodyBytes: 1 << 20, Retry: proxy.Retry{MaxAttempts: 1},
	})
	observe := &heard{}
	logs := &syncbuf.Buffer{}
	e := NewPublic(Deps{
		Observability: Observability{Logger: slog.New(slog.NewJSONHandler(logs, nil)), Observe: observe},
		Sessions:      Sessions{Manager: sessions, Cookies: cookies, Tokens: noTokens{}},
		Clients:       Clients{PublicOrigin: publicOrigin, AllowedOrigins: []string{"https://spa.example.com"}},
		DPoP:          DPoP{Mode: mode, Verifier: v, Observe: observe},
		Login:         Login{Dev: true},
		Limits:        Limits{PerAddress: limits.NewLocal(nil), AuthPerMinute: authPerMinute},
		API:           API{Forwarder: fwd},
	})
	return dpopEdge{e: e, observe: observe, logs: logs, cookies: cookies}
}

// do sends a request to the edge at the test's listener address (not the
// public URL), with the headers given as name, value pairs.
func (d dpopEdge) do(t *testing.T, method, path string, body string, headers ...string) *httptest.ResponseRecorder {
	t.Helper()
	var r *http.Request
	if body != "" {
		r = httptest.NewRequest(method, "http://10.0.3.7:8080"+path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
	} else {
		r = httptest.NewRequest(method, "http://10.0.3.7:8080"+path, nil)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Add(headers[i], headers[i+1])
	}
	w := httptest.NewRecorder()
	d.e.ServeHTTP(w, r)
	return w
}

// login is a dev login with a proof of k (none when k.key is nil).
func (d dpopEdge) login(t *testing.T, user string, k *proofKey) (token, tokenType string, w *httptest.ResponseRecorder) {
	t.Helper()
	var headers []string
	if k != nil {
		headers = []string{"DPoP", k.proof("POST", publicOrigin+"/auth/dev/login", "")}
	}
	w = d.do(t, "POST", "/auth/dev/login", `{"userId":"`+user+`"}`, headers...)
	if w.Code != 200 {
		t.Fatalf("dev login: got %d %s", w.Code, w.Body)
	}
	var out struct{ SessionToken, TokenType string }
	_ = json.Unmarshal(w.Body.Bytes(), &out)
	return out.SessionToken, out.TokenType, w
}

// wantRefused checks w is the one answer of every refused proof.
func wantRefused(t *testing.T, w *httptest.ResponseRecorder) {
	t.Helper()
	var p problem.Problem
	_ = json.Unmarshal(w.Body.Bytes(), &p)
	if w.Code != 401 || p.Code != problem.CodeDPoPProofInvalid || p.Detail != dpopDetail ||
		w.Header().Get("WWW-Authenticate") != `DPoP error="invalid_dpop_proof", algs="ES256 ES384 EdDSA PS256 RS256"` {
		t.Fatalf("got %d %s, WWW-Authenticate %q; want 401 %s with the one detail and the DPoP challenge",
			w.Code, w.Body, w.Header().Get("WWW-Authenticate"), problem.CodeDPoPProofInvalid)
	}
}

func TestDPoPBoundSessionNeedsAProofOfItsKey(t *testing.T) {
	d := newDPoPEdge(t, DPoPOptional, 0, nil)
	k := newProofKey(t)
	token, typ, w := d.login(t, "alice", &k)
	if typ != "DPoP" || token == "" || w.Header().Get("Set-Cookie") != "" {
		t.Fatalf("bound login: got tokenType %q, Set-Cookie %q; want DPoP and no cookie", typ, w.Header().Get("Set-Cookie"))
	}
	if got := d.observe.take(); !slices.Contains(got, "proof login ok") {
		t.Fatalf("heard %q, want the login's proof ok", got)
	}
	sessionURL := publicOrigin + "/auth/session"
	good := k.proof("GET", sessionURL, token)
	if w := d.do(t, "GET", "/auth/session", "", "Authorization", "DPoP "+token, "DPoP", good); w.Code != 200 {
		t.Fatalf("with a proof of its key: got %d %s, want 200", w.Code, w.Body)
	}
	apiURL := publicOrigin + "/api/v2/payments"
	if w := d.do(t, "GET", "/api/v2/payments?limit=5", "", "Authorization", "DPoP "+token, "DPoP", k.proof("GET", apiURL, token)); w.Code != 200 {
		t.Fatalf("an API call with a proof (the query is not in htu): got %d %s, want 200", w.Code, w.Body)
	}
	d.observe.take()
	other := newProofKey(t)
	ck, err := d.cookies.New(token) // a cookie no login of a bound session sets, made here
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		headers []string
		reason  string
	}{
		{"the same proof again", []string{"Authorization", "DPoP " + token, "DPoP", good}, "replay"},
		{"as Bearer", []string{"Authorization", "Bearer " + token}, "scheme"},
		{"as the cookie", []string{"Cookie", ck.Name + "=" + ck.Value}, "scheme"},
		{"as the cookie with a proof", []string{"Cookie", ck.Name + "=" + ck.Value, "DPoP", k.proof("GET", sessionURL, token)}, "scheme"},
		{"as Bearer with a proof", []string{"Authorization", "Bearer " + token, "DPoP", k.proof("GET", sessionURL, token)}, "scheme"},
		{"without a proof", []string{"Authorization", "DPoP " + token}, "missing"},
		{"with two proofs", []string{"Authorization", "DPoP " + token, "DPoP", k.proof("GET", sessionURL, token), "DPoP", k.proof("GET", sessionURL, token)}, "multiple"},
		{"another key's proof", []string{"Authorization", "DPoP " + token, "DPoP", other.proof("GET", sessionURL, token)}, "key"},
		{"a proof for POST", []string{"Authorization", "DPoP " + token, "DPoP", k.proof("POST", sessionURL, token)}, "htm"},
		{"a proof for another path", []string{"Authorization", "DPoP " + token, "DPoP", k.proof("GET", publicOrigin+"/auth/sessions", token)}, "htu"},
		{"a proof for the listener's address", []string{"Authorization", "DPoP " + token, "DPoP", k.proof("GET", "http://10.0.3.7:8080/auth/session", token)}, "htu"},
		{"a proof 2 minutes old", []string{"Authorization", "DPoP " + token, "DPoP", k.proof("GET", sessionURL, token, func(c map[string]any) { c["iat"] = time.Now().Add(-2 * time.Minute).Unix() })}, "iat"},
		{"a proof for another token", []string{"Authorization", "DPoP " + token, "DPoP", k.proof("GET", sessionURL, token+"x")}, "ath"},
		{"a proof with no ath", []string{"Authorization", "DPoP " + token, "DPoP", k.proof("GET", sessionURL, "")}, "ath"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantRefused(t, d.do(t, "GET", "/auth/session", "", tc.headers...))
			if got, want := d.observe.take(), "proof request "+tc.reason; !slices.Contains(got, want) {
				t.Fatalf("heard %q, want %q", got, want)
			}
		})
	}
	// GET /auth/methods answers such a caller as signed out, never a 4xx.
	if w := d.do(t, "GET", "/auth/methods", "", "Authorization", "DPoP "+token); w.Code != 200 || !strings.Contains(w.Body.String(), `"session":null`) {
		t.Fatalf("GET /auth/methods without a proof: got %d %s, want 200 with no session", w.Code, w.Body)
	}
	if w := d.do(t, "GET", "/auth/methods", "", "Authorization", "DPoP "+token, "DPoP", k.proof("GET", publicOrigin+"/auth/methods", token)); w.Code != 200 || !strings.Contains(w.Body.String(), `"userId":"alice"`) {
		t.Fatalf("GET /auth/methods with a proof: got %d %s, want alice's session", w.Code, w.Body)
	}
	// The reasons are in the log (one line a second at most), the token never.
	if logs := d.logs.String(); !strings.Contains(logs, `"msg":"DPoP proof refused"`) || !strings.Contains(logs, `"reason":"replay"`) || strings.Contains(logs, token) {
		t.Fatalf("the log does not name the first refusal's reason, or holds the token:\n%s", logs)
	}
	// Logout with a proof ends it; a good proof then finds no session.
	if w := d.do(t, "POST", "/auth/logout", "", "Authorization", "DPoP "+token, "DPoP", k.proof("POST", publicOrigin+"/auth/logout", token)); w.Code != 204 {
		t.Fatalf("logout: got %d %s, want 204", w.Code, w.Body)
	}
	w = d.do(t, "GET", "/auth/session", "", "Authorization", "DPoP "+token, "DPoP", k.proof("GET", sessionURL, token))
	var p problem.Problem
	_ = json.Unmarshal(w.Body.Bytes(), &p)
	if w.Code != 401 || p.Code != problem.CodeSessionRequired || !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), `DPoP error="invalid_token"`) {
		t.Fatalf("after logout: got %d %s %q, want 401 SESSION_REQUIRED with DPoP error=invalid_token", w.Code, w.Body, w.Header().Get("WWW-Authenticate"))
	}
}

// An unbound session works as Bearer and as the cookie, as it always
// did, and is refused as DPoP.
func TestDPoPUnboundSessionIsBearerAsBefore(t *testing.T) {
	d := newDPoPEdge(t, DPoPRequired, 0, nil) // required concerns the mobile exchange only: the dev login may be unbound
	token, typ, w := d.login(t, "bob", nil)
	ck := w.Result().Cookies()
	if typ != "Bearer" || len(ck) != 1 {
		t.Fatalf("unbound login: got tokenType %q, cookies %v; want Bearer and the cookie", typ, ck)
	}
	if w := d.do(t, "GET", "/auth/session", "", "Authorization", "Bearer "+token); w.Code != 200 {
		t.Fatalf("as Bearer: got %d %s", w.Code, w.Body)
	}
	if w := d.do(t, "GET", "/auth/session", "", "Cookie", ck[0].Name+"="+ck[0].Value); w.Code != 200 {
		t.Fatalf("as the cookie: got %d %s", w.Code, w.Body)
	}
	k := newProofKey(t)
	wantRefused(t, d.do(t, "GET", "/auth/session", "", "Authorization", "DPoP "+token, "DPoP", k.proof("GET", publicOrigin+"/auth/session", token)))
	if w := d.do(t, "GET", "/auth/session", "", "Authorization", "Bearer "+token, "DPoP", "junk"); w.Code != 200 {
		t.Fatalf("as Bearer with a stray DPoP header: got %d %s, want 200 (ignored)", w.Code, w.Body)
	}
}

// With off, a login's proof is ignored: the session is unbound.
func TestDPoPOffIgnoresProofs(t *testing.T) {
	d := newDPoPEdge(t, DPoPOff, 0, nil)
	k := newProofKey(t)
	token, typ, _ := d.login(t, "carol", &k)
	if typ != "Bearer" {
		t.Fatalf("got tokenType %q, want Bearer", typ)
	}
	if w := d.do(t, "GET", "/auth/session", "", "Authorization", "Bearer "+token); w.Code != 200 {
		t.Fatalf("as Bearer: got %d %s", w.Code, w.Body)
	}
	if got := d.observe.take(); slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, "proof") }) {
		t.Fatalf("heard %q, want no proof checked", got)
	}
}

// A bad proof at login is refused (no session), with the same answer.
func TestDPoPLoginWithABadProofIsRefused(t *testing.T) {
	d := newDPoPEdge(t, DPoPOptional, 0, nil)
	k := newProofKey(t)
	wantRefused(t, d.do(t, "POST", "/auth/dev/login", `{"userId":"dave"}`, "DPoP", k.proof("POST", publicOrigin+"/auth/dev/login", "tok")))
	wantRefused(t, d.do(t, "POST", "/auth/dev/login", `{"userId":"dave"}`, "DPoP", k.proof("POST", "http://10.0.3.7:8080/auth/dev/login", "")))
}

// Refused proofs spend the client address's budget (limits.auth_per_minute,
// apart from the /auth one): over it they are 429 RATE_LIMITED, and a good
// proof still passes.
func TestDPoPRefusedProofsAreLimitedPerAddress(t *testing.T) {
	d := newDPoPEdge(t, DPoPOptional, 3, nil)
	k := newProofKey(t)
	token, _, _ := d.login(t, "erin", &k)
	apiURL := publicOrigin + "/api/v2/payments"
	for i := range 3 {
		wantRefused(t, d.do(t, "GET", "/api/v2/payments", "", "Authorization", "Bearer "+token))
		_ = i
	}
	w := d.do(t, "GET", "/api/v2/payments", "", "Authorization", "Bearer "+token)
	var p problem.Problem
	_ = json.Unmarshal(w.Body.Bytes(), &p)
	if w.Code != 429 || p.Code != problem.CodeRateLimited || w.Header().Get("Retry-After") == "" {
		t.Fatalf("the 4th refused proof: got %d %s, want 429 RATE_LIMITED with Retry-After", w.Code, w.Body)
	}
	if got := d.observe.take(); !slices.Contains(got, "refused dpop") {
		t.Fatalf("heard %q, want the dpop limit's refusal", got)
	}
	if w := d.do(t, "GET", "/api/v2/payments", "", "Authorization", "DPoP "+token, "DPoP", k.proof("GET", apiURL, token)); w.Code != 200 {
		t.Fatalf("a good proof after: got %d %s, want 200", w.Code, w.Body)
	}
}

type downStore struct{}

func (downStore) SetNX(context.Context, string, []byte, time.Duration) (bool, error) {
	return false, kv.ErrUnavailable
}

// A proof whose jti cannot be claimed is not accepted: 503, failing closed.
func TestDPoPReplayStoreDownFailsClosed(t *testing.T) {
	d := newDPoPEdge(t, DPoPOptional, 0, downStore{})
	k := newProofKey(t)
	w := d.do(t, "POST", "/auth/dev/login", `{"userId":"frank"}`, "DPoP", k.proof("POST", publicOrigin+"/auth/dev/login", ""))
	var p problem.Problem
	_ = json.Unmarshal(w.Body.Bytes(), &p)
	if w.Code != 503 || p.Code != problem.CodeSessionStoreUnavailable {
		t.Fatalf("got %d %s, want 503 SESSION_STORE_UNAVAILABLE", w.Code, w.Body)
	}
}

// A cross-origin app may send the DPoP header and read the challenge.
func TestDPoPPreflightAllowsTheHeader(t *testing.T) {
	d := newDPoPEdge(t, DPoPOptional, 0, nil)
	w := d.do(t, "OPTIONS", "/api/v2/payments", "", "Origin", "https://spa.example.com", "Access-Control-Request-Method", "GET",
		"Access-Control-Request-Headers", "authorization, dpop")
	if allowed := w.Header().Get("Access-Control-Allow-Headers"); !slices.Contains(strings.Split(allowed, ", "), "DPoP") {
		t.Fatalf("got Access-Control-Allow-Headers %q, want DPoP in it", allowed)
	}
	token, _, _ := d.login(t, "gina", nil)
	w = d.do(t, "GET", "/auth/session", "", "Origin", "https://spa.example.com", "Authorization", "Bearer "+token)
	if exposed := w.Header().Get("Access-Control-Expose-Headers"); !strings.Contains(exposed, "WWW-Authenticate") {
		t.Fatalf("got Access-Control-Expose-Headers %q, want WWW-Authenticate in it", exposed)
	}
}
