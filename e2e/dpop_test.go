//go:build integration

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/testing/dpoptest"
)

// deviceKey is a native app's key: it signs a new DPoP proof (RFC 9449)
// for every request, naming the BFF's public URL as the app sees it.
type deviceKey struct {
	dpoptest.Key
	public string // the BFF's public URL (public_url), what htu names
}

func newDeviceKey(t *testing.T, public string) *deviceKey {
	return &deviceKey{Key: dpoptest.NewKey(t), public: public}
}

// proof signs a proof for method and path (no query) with token's ath
// ("" at login: none), iat now and a new jti; edit changes the claims
// first.
func (k *deviceKey) proof(method, path, token string, edit ...func(map[string]any)) string {
	return k.Proof(method, k.public+path, token, edit...)
}

// send sends one request to an instance (its own address) with the given
// headers (name, value pairs), every answer checked against
// api/openapi.yaml.
func send(t *testing.T, instance, method, path, body string, hdr ...string) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, instance+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second, Transport: validate(t, nil)}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

// wantDPoPRefused checks r is the one answer of every refused proof.
func wantDPoPRefused(t *testing.T, r reply, what string) {
	t.Helper()
	if r.status != 401 {
		t.Fatalf("%s: got %d %s, want 401 DPOP_PROOF_INVALID", what, r.status, r.body)
	}
	v := wantProblem(t, r, 401, "DPOP_PROOF_INVALID")
	if ch := r.header.Get("WWW-Authenticate"); !strings.HasPrefix(ch, `DPoP error="invalid_dpop_proof", algs="ES256`) {
		t.Fatalf("%s: got WWW-Authenticate %q, want the DPoP challenge", what, ch)
	}
	if v["detail"] != "the request's DPoP proof is missing or not valid for this session" {
		t.Fatalf("%s: got detail %q, want the one detail of every refused proof", what, v["detail"])
	}
}

// A native app's session bound to its key at the mobile token exchange,
// through the real binary and the real OpenID provider, on two instances
// sharing Redis and one public URL (as behind a load balancer): with a
// proof per request it reads, lists, pays with an Idempotency-Key and
// follows the payment's event on the other instance; the same token without
// the key, with another key, with a proof replayed on the same or the
// other instance, for another URL (the instance's own address included) or
// method, or stale, is refused with 401 and the DPoP challenge; its logout
// ends it on both. With required, the exchange without a proof is refused
// and leaves the code for one with a proof.
func TestDPoPBoundMobileSessionOnTwoInstances(t *testing.T) {
	t.Parallel()
	required := map[string]string{"BFF_SESSION_MOBILE_DPOP": "required"}
	a, _ := oidcEnvWith(t, options{env: required})
	b := a.another(options{authYAML: a.opts.authYAML, env: map[string]string{"BFF_SESSION_MOBILE_DPOP": "required", "BFF_PUBLIC_URL": a.public}})
	app := newDeviceKey(t, a.public)

	verifier, challenge := pkcePair()
	code := mobileCode(t, a, challenge, "uma")
	exchange := fmt.Sprintf(`{"code":%q,"codeVerifier":%q}`, code, verifier)
	r := send(t, a.public, "POST", "/auth/mobile/token", exchange)
	v := wantProblem(t, r, 401, "DPOP_PROOF_INVALID")
	if ch := r.header.Get("WWW-Authenticate"); ch != `DPoP algs="ES256 ES384 EdDSA PS256 RS256"` || !strings.Contains(v["detail"].(string), "DPoP proof") {
		t.Fatalf("an exchange without a proof: got WWW-Authenticate %q, detail %v; want the challenge and a detail that names the proof", ch, v["detail"])
	}
	r = send(t, a.public, "POST", "/auth/mobile/token", exchange, "DPoP", app.proof("POST", "/auth/mobile/token", ""))
	v = r.json(t)
	token, _ := v["sessionToken"].(string)
	if r.status != 200 || v["tokenType"] != "DPoP" || token == "" || v["expiresIn"].(float64) <= 0 {
		t.Fatalf("the exchange with a proof (the same code): got %d %s, want 200 tokenType DPoP", r.status, r.body)
	}
	as := func(instance, method, path, body string, hdr ...string) reply {
		t.Helper()
		return send(t, instance, method, path, body, append([]string{"Authorization", "DPoP " + token, "DPoP", app.proof(method, path, token)}, hdr...)...)
	}

	// The stream on b, opened with a proof, before the payment.
	req, _ := http.NewRequest("GET", b.public+"/bff/events", nil)
	req.Header.Set("Authorization", "DPoP "+token)
	req.Header.Set("DPoP", app.proof("GET", "/bff/events", token))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	events := readStream(t, resp)

	if r := as(a.public, "GET", "/auth/session", ""); r.status != 200 || r.json(t)["userId"] != "uma" {
		t.Fatalf("GET /auth/session with a proof: got %d %s", r.status, r.body)
	}
	if r := as(b.public, "GET", "/api/v2/data/accounts", ""); r.status != 200 {
		t.Fatalf("an API call on b with a proof: got %d %s", r.status, r.body)
	}
	key := "dpop-" + opRandom(8)
	payment := fmt.Sprintf(validPayment, "Order "+key)
	r = as(a.public, "POST", "/api/v2/payments", payment, "Idempotency-Key", key)
	paymentID, _ := r.json(t)["id"].(string)
	if r.status != 201 || paymentID == "" {
		t.Fatalf("a payment with a proof: got %d %s, want 201", r.status, r.body)
	}
	// Its repeat (the answer was lost, say) carries a new proof and the same key.
	if r := as(b.public, "POST", "/api/v2/payments", payment, "Idempotency-Key", key); r.status != 201 || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the payment's repeat on b: got %d %s, want the stored 201", r.status, r.body)
	}
	if ev := events.next(t, 30*time.Second); ev.Data.Key != key || ev.Data.PaymentID != paymentID {
		t.Fatalf("the stream on b: got %+v, want the payment %s", ev.Data, key)
	}
	if r := as(b.public, "GET", "/bff/payments/"+key, ""); r.status != 200 || r.json(t)["paymentId"] != paymentID {
		t.Fatalf("GET /bff/payments/{key} on b: got %d %s", r.status, r.body)
	}
	if r := as(a.public, "GET", "/bff/payments", ""); r.status != 200 || !strings.Contains(string(r.body), paymentID) {
		t.Fatalf("GET /bff/payments on a: got %d %s", r.status, r.body)
	}

	auth := "DPoP " + token
	p := app.proof("GET", "/auth/session", token)
	if r := send(t, a.public, "GET", "/auth/session", "", "Authorization", auth, "DPoP", p); r.status != 200 {
		t.Fatalf("a fresh proof: got %d %s", r.status, r.body)
	}
	wantDPoPRefused(t, send(t, a.public, "GET", "/auth/session", "", "Authorization", auth, "DPoP", p), "the proof again on the same instance")
	q := app.proof("GET", "/auth/session", token)
	if r := send(t, b.public, "GET", "/auth/session", "", "Authorization", auth, "DPoP", q); r.status != 200 {
		t.Fatalf("a fresh proof on b: got %d %s", r.status, r.body)
	}
	wantDPoPRefused(t, send(t, a.public, "GET", "/auth/session", "", "Authorization", auth, "DPoP", q), "b's proof again on a")
	other := newDeviceKey(t, a.public)
	stale := func(c map[string]any) { c["iat"] = time.Now().Add(-2 * time.Minute).Unix() }
	ownAddress := func(c map[string]any) { c["htu"] = b.public + "/api/v2/payments" }
	for name, r := range map[string]reply{
		"the token as Bearer":                    send(t, b.public, "GET", "/api/v2/payments", "", "Authorization", "Bearer "+token),
		"the token as DPoP without a proof":      send(t, b.public, "GET", "/api/v2/payments", "", "Authorization", auth),
		"another key's proof":                    send(t, b.public, "GET", "/api/v2/payments", "", "Authorization", auth, "DPoP", other.proof("GET", "/api/v2/payments", token)),
		"a proof for another URL":                send(t, b.public, "GET", "/api/v2/payments", "", "Authorization", auth, "DPoP", app.proof("GET", "/bff/payments", token)),
		"a proof for b's own address":            send(t, b.public, "GET", "/api/v2/payments", "", "Authorization", auth, "DPoP", app.proof("GET", "/api/v2/payments", token, ownAddress)),
		"a proof for another method":             send(t, b.public, "GET", "/api/v2/payments", "", "Authorization", auth, "DPoP", app.proof("DELETE", "/api/v2/payments", token)),
		"a proof two minutes old":                send(t, b.public, "GET", "/api/v2/payments", "", "Authorization", auth, "DPoP", app.proof("GET", "/api/v2/payments", token, stale)),
		"a payment as Bearer":                    send(t, a.public, "POST", "/api/v2/payments", payment, "Authorization", "Bearer "+token, "Idempotency-Key", "dpop-"+opRandom(8)),
		"the stream as Bearer":                   send(t, a.public, "GET", "/bff/events", "", "Authorization", "Bearer "+token),
		"the stream with a proof for /bff/other": send(t, a.public, "GET", "/bff/events", "", "Authorization", auth, "DPoP", app.proof("GET", "/bff/other", token)),
	} {
		wantDPoPRefused(t, r, name)
	}

	// Logout (with a proof) ends it on both instances and closes its stream.
	if r := as(b.public, "POST", "/auth/logout", ""); r.status != 204 {
		t.Fatalf("logout: got %d %s", r.status, r.body)
	}
	events.ended(t, 10*time.Second, "after logout")
	for _, e := range []*env{a, b} {
		r := as(e.public, "GET", "/auth/session", "")
		wantProblem(t, r, 401, "SESSION_REQUIRED")
		if ch := r.header.Get("WWW-Authenticate"); !strings.HasPrefix(ch, `DPoP error="invalid_token"`) {
			t.Fatalf("after logout: got WWW-Authenticate %q, want DPoP invalid_token", ch)
		}
	}
	// Each instance logged why it refused a proof, and neither wrote the
	// token or a proof (stopped first: the log is written in batches).
	for _, e := range []*env{a, b} {
		e.stop()
		if logs := e.logs.String(); strings.Contains(logs, token) || strings.Contains(logs, p) || !strings.Contains(logs, `"msg":"DPoP proof refused"`) {
			t.Fatalf("the log holds the token or a proof, or names no refused proof:\n%s", logs)
		}
	}
}

// With session.mobile_dpop off, a login's proof is ignored: the session is
// a Bearer one, and the DPoP scheme is refused for it.
func TestDPoPOffIgnoresProofs(t *testing.T) {
	t.Parallel()
	e := start(t, options{env: map[string]string{"BFF_SESSION_MOBILE_DPOP": "off"}})
	app := newDeviceKey(t, e.public)
	r := send(t, e.public, "POST", "/auth/dev/login", `{"userId":"vera"}`, "DPoP", app.proof("POST", "/auth/dev/login", ""))
	v := r.json(t)
	token, _ := v["sessionToken"].(string)
	if r.status != 200 || v["tokenType"] != "Bearer" || token == "" {
		t.Fatalf("dev login with a proof, off: got %d %s, want a Bearer session", r.status, r.body)
	}
	if r := e.app(token).do("GET", "/auth/session", ""); r.status != 200 {
		t.Fatalf("as Bearer: got %d %s", r.status, r.body)
	}
	wantDPoPRefused(t, send(t, e.public, "GET", "/auth/session", "", "Authorization", "DPoP "+token, "DPoP", app.proof("GET", "/auth/session", token)), "an unbound session as DPoP")
}

// In development (optional by default) the dev login with a proof is
// bound, sets no cookie and answers tokenType DPoP; without one it is the
// browser's session as before.
func TestDPoPDevLoginBindsWhenAsked(t *testing.T) {
	t.Parallel()
	e := start(t, options{})
	app := newDeviceKey(t, e.public)
	r := send(t, e.public, "POST", "/auth/dev/login", `{"userId":"wes"}`, "DPoP", app.proof("POST", "/auth/dev/login", ""))
	v := r.json(t)
	token, _ := v["sessionToken"].(string)
	if r.status != 200 || v["tokenType"] != "DPoP" || r.header.Get("Set-Cookie") != "" {
		t.Fatalf("dev login with a proof: got %d %s, Set-Cookie %q; want DPoP and no cookie", r.status, r.body, r.header.Get("Set-Cookie"))
	}
	wantDPoPRefused(t, e.app(token).do("GET", "/auth/session", ""), "the bound dev session as Bearer")
	if r := send(t, e.public, "GET", "/auth/session", "", "Authorization", "DPoP "+token, "DPoP", app.proof("GET", "/auth/session", token)); r.status != 200 {
		t.Fatalf("with a proof: got %d %s", r.status, r.body)
	}
	b := e.browser()
	r = b.do("POST", "/auth/dev/login", `{"userId":"wes"}`)
	if v := r.json(t); r.status != 200 || v["tokenType"] != "Bearer" || r.header.Get("Set-Cookie") == "" {
		t.Fatalf("dev login without a proof: got %d %s, want a Bearer session with its cookie", r.status, r.body)
	}
	if r := b.do("GET", "/auth/session", ""); r.status != 200 {
		t.Fatalf("the browser's cookie: got %d %s", r.status, r.body)
	}
}
