//go:build integration

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/fintech-bff/bff/internal/login"
	"github.com/fintech-bff/bff/internal/testing/redistest"
)

const (
	mobileRedirect = "com.example.app:/oauth/cb"
	opClientID     = "bff"
	opClientSecret = "bff-oidc-client-secret-Yk3"
)

// oidcEnv is the BFF in auth.mode: oidc against the real OpenID provider.
func oidcEnv(t *testing.T) (*env, *OP) {
	t.Helper()
	return oidcEnvWith(t, options{})
}

// oidcEnvWith is oidcEnv with more options; o.authYAML is set here, and
// o.publicAddr when empty.
func oidcEnvWith(t *testing.T, o options) (*env, *OP) {
	t.Helper()
	pub := o.publicAddr
	if pub == "" {
		pub = freeAddr(t)
	}
	base := "http://" + pub
	c := bffClient(base)
	c.Secret = opClientSecret
	op := startOP(t, c)
	o.publicAddr = pub
	o.authYAML = fmt.Sprintf(`auth:
  mode: oidc
  oidc:
    issuer: %q
    client_id: %q
    client_secret: %q
    redirect_url: %q
    scopes: [openid, profile, email]
    user_id_claim: sub
  mobile_redirect_uris: [%q]`, op.Issuer, opClientID, opClientSecret, base+"/auth/callback", mobileRedirect)
	return start(t, o), op
}

// bffClient is the BFF on base as the provider registers it (its
// callback, post-logout and back-channel logout URIs), with no
// authentication yet.
func bffClient(base string) OPClient {
	return OPClient{
		ID:                     opClientID,
		RedirectURIs:           []string{base + "/auth/callback"},
		PostLogoutRedirectURIs: []string{base + "/"},
		BackchannelLogoutURI:   base + "/auth/backchannel-logout",
	}
}

// beginLogin asks the BFF to start a login and returns where it sent the
// browser (the provider's authorization endpoint).
func beginLogin(t *testing.T, c *client, query string) string {
	t.Helper()
	r := c.do("GET", "/auth/login"+query, "")
	loc := r.header.Get("Location")
	if r.status != 302 || !strings.HasPrefix(loc, "http") {
		t.Fatalf("GET /auth/login%s: got %d %q %s, want a redirect to the provider", query, r.status, loc, r.body)
	}
	u := mustURL(t, loc)
	q := u.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("state") == "" || q.Get("nonce") == "" {
		t.Fatalf("authorization URL %s lacks PKCE S256, state or nonce", loc)
	}
	return loc
}

// follow GETs an absolute URL on the BFF with the client's cookies.
func (c *client) follow(t *testing.T, abs string) reply {
	t.Helper()
	u := mustURL(t, abs)
	return c.do("GET", u.RequestURI(), "")
}

func TestOIDCBrowserLogin(t *testing.T) {
	t.Parallel()
	e, op := oidcEnv(t)
	b := e.browser()
	cb := opLogin(t, b.http, beginLogin(t, b, "?returnTo=/accounts%3Ftab%3D2"), "olga")
	r := b.follow(t, cb)
	if r.status != 302 || r.header.Get("Location") != "/accounts?tab=2" {
		t.Fatalf("callback: got %d Location %q %s, want 302 to /accounts?tab=2", r.status, r.header.Get("Location"), r.body)
	}
	if v := b.do("GET", "/auth/session", "").json(t); v["userId"] != "olga" {
		t.Fatalf("got session %v, want olga", v)
	}
	if r := b.do("GET", "/api/v2/payments", ""); r.status != 200 || e.sim.Mints("olga") != 1 {
		t.Fatalf("API call after OIDC login: got %d with %d mints", r.status, e.sim.Mints("olga"))
	}
	// Replaying the callback (same state and code) is refused.
	wantProblem(t, b.follow(t, cb), 400, "LOGIN_FAILED")
	// Logging out names the provider's RP-initiated logout.
	out := b.do("POST", "/auth/logout", "", "X-CSRF", "1")
	if out.status != 204 || !strings.HasPrefix(out.header.Get("X-Logout-Url"), op.EndSessionEndpoint) {
		t.Fatalf("logout: got %d X-Logout-Url %q, want 204 and the end_session_endpoint", out.status, out.header.Get("X-Logout-Url"))
	}
}

// Logins started in several tabs of one browser can each finish: each
// has its own binding cookie. A fifth one under way drops the oldest
// binding, whose callback answers LOGIN_FAILED.
func TestOIDCLoginsInSeveralTabs(t *testing.T) {
	t.Parallel()
	e, _ := oidcEnv(t)
	b := e.browser()
	first := beginLogin(t, b, "?returnTo=/first")
	second := beginLogin(t, b, "?returnTo=/second")
	cbFirst := opLogin(t, b.http, first, "tabby")
	cbSecond := opLogin(t, b.http, second, "tabby")
	for _, tt := range []struct{ cb, want string }{{cbFirst, "/first"}, {cbSecond, "/second"}} {
		r := b.follow(t, tt.cb)
		if r.status != 302 || r.header.Get("Location") != tt.want {
			t.Fatalf("callback: got %d Location %q %s, want 302 to %s", r.status, r.header.Get("Location"), r.body, tt.want)
		}
	}
	if v := b.do("GET", "/auth/session", "").json(t); v["userId"] != "tabby" {
		t.Fatalf("got session %v, want tabby", v)
	}
	if n := bindingCookies(t, e, b); n != 0 {
		t.Fatalf("%d login binding cookies left after both logins finished, want 0", n)
	}

	var started []string
	for i := 0; i < 6; i++ {
		started = append(started, beginLogin(t, b, ""))
	}
	if n := bindingCookies(t, e, b); n != 4 {
		t.Fatalf("%d login binding cookies after 6 starts, want 4", n)
	}
	// The two oldest were dropped; the four newest finish.
	for i, auth := range started {
		r := b.follow(t, opLogin(t, b.http, auth, "tabby"))
		if i < 2 {
			wantProblem(t, r, 400, "LOGIN_FAILED")
		} else if r.status != 302 {
			t.Fatalf("login %d of 6: got %d %s, want 302 (the 4 newest finish)", i+1, r.status, r.body)
		}
	}
}

// bindingCookies counts the login binding cookies in the client's jar.
func bindingCookies(t *testing.T, e *env, c *client) int {
	t.Helper()
	n := 0
	for _, ck := range c.http.Jar.Cookies(mustURL(t, e.public)) {
		if strings.HasPrefix(ck.Name, "bff_login_") {
			n++
		}
	}
	return n
}

// A new login in a browser that still has a session gets a new id, and the
// old session is over (no fixation).
func TestOIDCLoginReplacesTheOldSession(t *testing.T) {
	t.Parallel()
	e, _ := oidcEnv(t)
	b := e.browser()
	b.follow(t, opLogin(t, b.http, beginLogin(t, b, ""), "pia"))
	oldCookie := sessionCookie(t, e, b)
	b.follow(t, opLogin(t, b.http, beginLogin(t, b, ""), "pia"))
	newCookie := sessionCookie(t, e, b)
	if oldCookie == "" || oldCookie == newCookie {
		t.Fatal("the session cookie did not change at login")
	}
	stale := e.browser()
	stale.http.Jar.SetCookies(mustURL(t, e.public), []*http.Cookie{{Name: "bff_session", Value: oldCookie, Path: "/"}})
	wantProblem(t, stale.do("GET", "/auth/session", ""), 401, "SESSION_REQUIRED")
}

func TestOIDCStateChecks(t *testing.T) {
	t.Parallel()
	e, _ := oidcEnv(t)
	t.Run("wrong state", func(t *testing.T) {
		b := e.browser()
		cb := opLogin(t, b.http, beginLogin(t, b, ""), "quinn")
		u := mustURL(t, cb)
		q := u.Query()
		q.Set("state", "forged-state")
		u.RawQuery = q.Encode()
		wantProblem(t, b.follow(t, u.String()), 400, "LOGIN_FAILED")
	})
	// RFC 9207: the response's iss must be the issuer (the mix-up
	// defence); the test provider sends it and says so in its discovery
	// document, so a response without it is refused too.
	t.Run("another issuer's response", func(t *testing.T) {
		b := e.browser()
		cb := opLogin(t, b.http, beginLogin(t, b, ""), "quinn")
		u := mustURL(t, cb)
		q := u.Query()
		if q.Get("iss") == "" {
			t.Fatalf("the provider's response %s carries no iss (RFC 9207)", cb)
		}
		q.Set("iss", "http://127.0.0.1:1/evil")
		u.RawQuery = q.Encode()
		wantProblem(t, b.follow(t, u.String()), 400, "LOGIN_FAILED")
		if sessionCookie(t, e, b) != "" {
			t.Fatal("a response of another issuer made a session")
		}
	})
	t.Run("a response without its iss", func(t *testing.T) {
		b := e.browser()
		u := mustURL(t, opLogin(t, b.http, beginLogin(t, b, ""), "quinn"))
		q := u.Query()
		q.Del("iss")
		u.RawQuery = q.Encode()
		wantProblem(t, b.follow(t, u.String()), 400, "LOGIN_FAILED")
	})
	t.Run("callback in another browser", func(t *testing.T) {
		b := e.browser()
		cb := opLogin(t, b.http, beginLogin(t, b, ""), "quinn")
		wantProblem(t, e.browser().follow(t, cb), 400, "LOGIN_FAILED")
	})
	t.Run("provider refuses", func(t *testing.T) {
		b := e.browser()
		cb := opLogin(t, b.http, beginLogin(t, b, ""), "reject")
		if !strings.Contains(cb, "error=access_denied") {
			t.Fatalf("got %s, want an access_denied callback", cb)
		}
		wantProblem(t, b.follow(t, cb), 400, "LOGIN_FAILED")
	})
	t.Run("open redirects", func(t *testing.T) {
		b := e.browser()
		for _, rt := range []string{"https://evil.example/", "//evil.example", "/%2F%2Fevil.example", "/\\evil.example", "javascript:alert(1)"} {
			wantProblem(t, b.do("GET", "/auth/login?returnTo="+url.QueryEscape(rt), ""), 400, "BAD_REQUEST")
		}
	})
	t.Run("XHR without a session is 401, not a redirect", func(t *testing.T) {
		wantProblem(t, e.browser().do("GET", "/api/v2/payments", ""), 401, "SESSION_REQUIRED")
		wantProblem(t, e.browser().do("GET", "/auth/session", ""), 401, "SESSION_REQUIRED")
	})
	t.Run("dev login is off", func(t *testing.T) {
		wantProblem(t, e.browser().do("POST", "/auth/dev/login", `{"userId":"x"}`), 404, "ROUTE_NOT_FOUND")
	})
}

// sessionCookie is the BFF session cookie in the client's jar ("" if none);
// the jar also holds the provider's cookies (same host, another port).
func sessionCookie(t *testing.T, e *env, c *client) string {
	t.Helper()
	for _, ck := range c.http.Jar.Cookies(mustURL(t, e.public)) {
		if ck.Name == "bff_session" {
			return ck.Value
		}
	}
	return ""
}

func pkcePair() (verifier, challenge string) {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	verifier = base64.RawURLEncoding.EncodeToString(b)
	return verifier, login.S256(verifier)
}

// mobileCode runs the native app flow up to the redirect to the app and
// returns the one-time code.
func mobileCode(t *testing.T, e *env, challenge, user string) string {
	t.Helper()
	b := e.browser()
	q := "?client=mobile&redirect_uri=" + url.QueryEscape(mobileRedirect) + "&code_challenge=" + challenge + "&code_challenge_method=S256&state=app-state-1"
	r := b.follow(t, opLogin(t, b.http, beginLogin(t, b, q), user))
	loc := r.header.Get("Location")
	if r.status != 302 || !strings.HasPrefix(loc, mobileRedirect+"?") {
		t.Fatalf("mobile callback: got %d %q %s, want a redirect to the app", r.status, loc, r.body)
	}
	u, _ := url.Parse(loc)
	if u.Query().Get("state") != "app-state-1" || u.Query().Get("code") == "" {
		t.Fatalf("app redirect %s lacks the code or the app's state", loc)
	}
	if sessionCookie(t, e, b) != "" {
		t.Fatal("the mobile flow set a session cookie")
	}
	return u.Query().Get("code")
}

func TestOIDCMobileLogin(t *testing.T) {
	t.Parallel()
	e, _ := oidcEnv(t)
	verifier, challenge := pkcePair()
	code := mobileCode(t, e, challenge, "rita")
	anon := e.browser()
	body := fmt.Sprintf(`{"code":%q,"codeVerifier":%q}`, code, verifier)
	r := anon.do("POST", "/auth/mobile/token", body)
	v := r.json(t)
	tok, _ := v["sessionToken"].(string)
	if r.status != 200 || tok == "" || v["expiresIn"].(float64) <= 0 {
		t.Fatalf("token exchange: got %d %s", r.status, r.body)
	}
	app := e.app(tok)
	if v := app.do("GET", "/auth/session", "").json(t); v["userId"] != "rita" {
		t.Fatalf("got %v, want rita", v)
	}
	if r := app.do("POST", "/api/v2/payments", `{}`); r.status == 403 {
		t.Fatal("a token-authenticated POST was CSRF-checked")
	}
	t.Run("replayed code", func(t *testing.T) {
		wantProblem(t, anon.do("POST", "/auth/mobile/token", body), 400, "INVALID_GRANT")
	})
	t.Run("wrong verifier burns the code", func(t *testing.T) {
		v2, c2 := pkcePair()
		code := mobileCode(t, e, c2, "rita")
		other, _ := pkcePair()
		wantProblem(t, anon.do("POST", "/auth/mobile/token", fmt.Sprintf(`{"code":%q,"codeVerifier":%q}`, code, other)), 400, "INVALID_GRANT")
		wantProblem(t, anon.do("POST", "/auth/mobile/token", fmt.Sprintf(`{"code":%q,"codeVerifier":%q}`, code, v2)), 400, "INVALID_GRANT")
	})
	t.Run("unregistered redirect_uri and plain PKCE are refused", func(t *testing.T) {
		_, c := pkcePair()
		for _, q := range []string{
			"?client=mobile&redirect_uri=" + url.QueryEscape("com.evil.app:/cb") + "&code_challenge=" + c,
			"?client=mobile&redirect_uri=" + url.QueryEscape(mobileRedirect+"/x") + "&code_challenge=" + c,
			"?client=mobile&redirect_uri=" + url.QueryEscape(mobileRedirect) + "&code_challenge=" + c + "&code_challenge_method=plain",
			"?client=mobile&redirect_uri=" + url.QueryEscape(mobileRedirect),
		} {
			wantProblem(t, anon.do("GET", "/auth/login"+q, ""), 400, "BAD_REQUEST")
		}
	})
}

// Logging out at the provider ends the BFF session through back-channel
// logout; a forged or replayed logout token is refused.
func TestOIDCBackchannelLogout(t *testing.T) {
	t.Parallel()
	e, op := oidcEnv(t)
	b := e.browser()
	b.follow(t, opLogin(t, b.http, beginLogin(t, b, ""), "sara"))
	if r := b.do("GET", "/auth/session", ""); r.status != 200 {
		t.Fatalf("before: got %d", r.status)
	}
	opLogout(t, b.http, op, opClientID, e.public+"/")
	wantProblem(t, b.do("GET", "/auth/session", ""), 401, "SESSION_REQUIRED")
	waitLog(t, e, `"route":"/auth/backchannel-logout","status":200`)

	forged := e.browser()
	forged.http.CheckRedirect = nil
	for _, tok := range []string{"", "not-a-jwt", "eyJhbGciOiJub25lIn0.eyJzdWIiOiJzYXJhIn0."} {
		req, _ := http.NewRequest("POST", e.public+"/auth/backchannel-logout", strings.NewReader(url.Values{"logout_token": {tok}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := forged.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("logout token %q: got %d %s, want a 400 problem", tok, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
}

// POST /auth/backchannel-logout is unauthenticated: it reads a small
// url-encoded form only. A multipart body (which the form parser would
// spill to /tmp) is refused, and so is a large one, without reading it
// whole.
func TestOIDCBackchannelLogoutBoundsItsInput(t *testing.T) {
	t.Parallel()
	e, _ := oidcEnv(t)
	post := func(contentType string, body io.Reader) reply {
		req, _ := http.NewRequest("POST", e.public+"/auth/backchannel-logout", body)
		req.Header.Set("Content-Type", contentType)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return reply{status: resp.StatusCode, header: resp.Header, body: b}
	}
	wantProblem(t, post("multipart/form-data; boundary=x", strings.NewReader("--x\r\nContent-Disposition: form-data; name=\"logout_token\"\r\n\r\nabc\r\n--x--\r\n")), 400, "BAD_REQUEST")
	wantProblem(t, post("application/x-www-form-urlencoded", io.LimitReader(repeatReader('a'), 40<<20)), 413, "BODY_TOO_LARGE")
}

type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// A full OpenID scenario leaves no secret in any log line or Redis value:
// the client secrets, the provider's code, the PKCE verifier, the mobile
// code, session tokens, cookies and upstream tokens.
func TestOIDCNoSecretsInLogsOrRedis(t *testing.T) {
	t.Parallel()
	e, _ := oidcEnv(t)
	b := e.browser()
	authURL := beginLogin(t, b, "")
	var bindingCookie string
	for _, ck := range b.http.Jar.Cookies(mustURL(t, e.public)) {
		if strings.HasPrefix(ck.Name, "bff_login_") {
			bindingCookie = ck.Value
		}
	}
	authQ := mustURL(t, authURL).Query()
	nonce := authQ.Get("nonce")
	cb := opLogin(t, b.http, authURL, "tess")
	providerCode := mustURL(t, cb).Query().Get("code")
	b.follow(t, cb)
	cookie := sessionCookie(t, e, b)
	b.do("GET", "/api/v2/payments", "")
	verifier, challenge := pkcePair()
	code := mobileCode(t, e, challenge, "tess")
	v := e.browser().do("POST", "/auth/mobile/token", fmt.Sprintf(`{"code":%q,"codeVerifier":%q}`, code, verifier)).json(t)
	token, _ := v["sessionToken"].(string)
	e.app(token).do("GET", "/api/v2/data/accounts", "")
	b.do("POST", "/auth/logout", "", "X-CSRF", "1")

	secrets := map[string]string{
		"upstream client secret": clientSecret, "OIDC client secret": opClientSecret, "provider code": providerCode,
		"PKCE verifier": verifier, "mobile code": code, "session token": token, "session cookie": cookie,
		"login cookie": bindingCookie, "login nonce": nonce,
	}
	for i, tok := range e.bearers.seen() {
		secrets[fmt.Sprintf("upstream token %d", i)] = tok
	}
	// Read Redis while a login is pending: its state (PKCE verifier, nonce)
	// is there now.
	pending := e.browser()
	secrets["pending login nonce"] = mustURL(t, beginLogin(t, pending, "")).Query().Get("nonce")
	wantNoSecrets(t, e, secrets)
}

// wantNoSecrets stops the instance and fails for each secret that appears
// in its logs or, in plain text, in what its Redis namespace holds now.
func wantNoSecrets(t *testing.T, e *env, secrets map[string]string) {
	t.Helper()
	for name, s := range secrets {
		if s == "" {
			t.Fatalf("the scenario did not produce a %s: the scan would check nothing", name)
		}
	}
	rc, _ := redistest.Client(t)
	ctx := context.Background()
	var stored strings.Builder
	for _, k := range redistest.Keys(ctx, rc, e.prefix) {
		stored.WriteString(k + "\n" + rc.Get(ctx, k).Val() + "\n" + strings.Join(rc.SMembers(ctx, k).Val(), ",") + "\n")
	}
	e.stop()
	logs := e.logs.String()
	for name, s := range secrets {
		if strings.Contains(logs, s) {
			t.Errorf("the %s appears in the logs", name)
		}
		if strings.Contains(stored.String(), s) {
			t.Errorf("the %s appears in Redis in plain text", name)
		}
	}
}
