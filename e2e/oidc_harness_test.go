//go:build integration

package e2e

// A real OpenID provider for the end-to-end tests: panva's oidc-provider
// (OpenID Certified), run with Node.js from e2e/oidcprovider. It needs
// e2e/oidcprovider/node_modules: `npm ci --prefix e2e/oidcprovider`.
//
// startOP starts one per test; opLogin and opLogout drive a "browser"
// (an http.Client with a cookie jar that does not follow redirects) through
// the OP's login and RP-initiated logout pages.

import (
	testpoll "github.com/fintech-bff/bff/internal/testing/poll"
	"github.com/fintech-bff/bff/internal/testing/syncbuf"

	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// OPClient is a client (relying party) registered at the OP at start.
type OPClient struct {
	ID, Secret             string
	RedirectURIs           []string
	PostLogoutRedirectURIs []string
	// BackchannelLogoutURI, when set, receives logout tokens (with sid).
	BackchannelLogoutURI string
	// AuthMethod is the registered token endpoint auth method:
	// "client_secret_basic" (the default), "client_secret_post", or
	// "private_key_jwt" (then no Secret, and JWKSURI).
	// oidc-provider v9 accepts either way of sending the secret for both.
	AuthMethod string
	// JWKSURI is a private_key_jwt client's public keys (the BFF's
	// GET /auth/jwks.json).
	JWKSURI string
	// DPoPBound: the client's tokens must be DPoP-bound.
	DPoPBound bool
}

// OPMode is the provider's profile (provider.mjs's top-level keys).
type OPMode struct {
	// Profile "fapi2": PAR required, private_key_jwt, DPoP-bound codes with
	// nonces, iss in every response.
	Profile string
	// PAR "offered" or "required" without the profile; "" is off.
	PAR string
}

// OP is a running oidc-provider.
type OP struct {
	Issuer string // http://127.0.0.1:PORT, no trailing slash
	// ClientID and ClientSecret are those of the first client.
	ClientID, ClientSecret string
	Clients                []OPClient

	// From the discovery document.
	AuthorizationEndpoint string
	TokenEndpoint         string
	UserinfoEndpoint      string
	JWKSURI               string
	EndSessionEndpoint    string
	PAREndpoint           string // "" when the provider has no PAR

	out *syncbuf.Buffer
}

// Output is everything the OP process printed so far.
func (op *OP) Output() string { return op.out.String() }

// oidcProviderDir is e2e/oidcprovider; tests run in e2e/.
func oidcProviderDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("oidcprovider")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// startOP starts the OP with these clients (at least one) on a free port of
// 127.0.0.1 and returns once its discovery document answers. It installs
// nothing: it needs node on PATH and e2e/oidcprovider/node_modules (run
// `npm ci --prefix e2e/oidcprovider`; `make test` does it) and fails the test
// if either is missing. The OP is stopped when the test ends; its output is
// logged if the test failed.
// opStartTimeout bounds one attempt's wait for the provider's discovery
// document; startOP makes three.
const opStartTimeout = 25 * time.Second

// errOPNotReady: the provider did not answer within opStartTimeout.
var errOPNotReady = errors.New("oidc-provider not ready")

func startOP(t *testing.T, clients ...OPClient) *OP {
	t.Helper()
	return startOPWith(t, OPMode{}, clients...)
}

// startOPWith is startOP with the provider in mode.
func startOPWith(t *testing.T, mode OPMode, clients ...OPClient) *OP {
	t.Helper()
	if len(clients) == 0 {
		t.Fatal("startOP: at least one OPClient is needed")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("startOP: node (Node.js >= 20) is not on PATH: %v; the OIDC e2e tests run a real OpenID provider with it", err)
	}
	dir := oidcProviderDir(t)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "oidc-provider", "package.json")); err != nil {
		t.Fatalf("startOP: %s/node_modules/oidc-provider is missing: run `npm ci --prefix e2e/oidcprovider` (make test does it): %v", dir, err)
	}

	var metas []map[string]any
	for _, c := range clients {
		keyed := c.AuthMethod == "private_key_jwt"
		if c.ID == "" || (c.Secret != "") == keyed || (c.JWKSURI != "") != keyed || len(c.RedirectURIs) == 0 {
			t.Fatalf("startOP: client %+v needs ID, RedirectURIs and either a Secret or private_key_jwt with a JWKSURI", c)
		}
		m := map[string]any{
			"client_id":                  c.ID,
			"redirect_uris":              c.RedirectURIs,
			"grant_types":                []string{"authorization_code"},
			"response_types":             []string{"code"},
			"token_endpoint_auth_method": "client_secret_basic",
		}
		if c.Secret != "" {
			m["client_secret"] = c.Secret
		}
		if c.AuthMethod != "" {
			m["token_endpoint_auth_method"] = c.AuthMethod
		}
		if c.JWKSURI != "" {
			m["jwks_uri"] = c.JWKSURI
		}
		if c.DPoPBound {
			m["dpop_bound_access_tokens"] = true
		}
		if len(c.PostLogoutRedirectURIs) > 0 {
			m["post_logout_redirect_uris"] = c.PostLogoutRedirectURIs
		}
		if c.BackchannelLogoutURI != "" {
			m["backchannel_logout_uri"] = c.BackchannelLogoutURI
			m["backchannel_logout_session_required"] = true
		}
		metas = append(metas, m)
	}

	// The port is picked free and then released, so another process may take
	// it in between: retry with a new one when the OP exits early. A
	// provider that never answers on its port (seen on 2 loaded cores, with
	// no word in its output) is stopped and started again on another.
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		op, err := opLaunch(t, node, dir, mode, metas)
		if err == nil {
			op.ClientID, op.ClientSecret, op.Clients = clients[0].ID, clients[0].Secret, clients
			return op
		}
		lastErr = err
		if !strings.Contains(err.Error(), "EADDRINUSE") && !errors.Is(err, errOPNotReady) {
			break
		}
		t.Logf("startOP: attempt %d: %v; starting it again on another port", attempt+1, err)
	}
	t.Fatalf("startOP: %v", lastErr)
	return nil
}

func opLaunch(t *testing.T, node, dir string, mode OPMode, clients []map[string]any) (*OP, error) {
	t.Helper()
	_, p, _ := net.SplitHostPort(freeAddr(t))
	port, _ := strconv.Atoi(p)
	issuer := "http://127.0.0.1:" + p

	conf := map[string]any{"port": port, "issuer": issuer, "clients": clients}
	if mode.Profile != "" {
		conf["profile"] = mode.Profile
	}
	if mode.PAR != "" {
		conf["par"] = mode.PAR
	}
	cfg, _ := json.MarshalIndent(conf, "", "  ")
	cfgPath := filepath.Join(t.TempDir(), "op-config.json")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}

	out := &syncbuf.Buffer{}
	cmd := exec.Command(node, "provider.mjs", cfgPath)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), "NODE_ENV=test")
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s provider.mjs: %v", node, err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()

	op := &OP{Issuer: issuer, out: out}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("oidc-provider %s output:\n%s", issuer, out.String())
		}
	})

	// Node's start is usually under a second, a few under load; the bound
	// is generous, and an exit ends the wait at once.
	start := time.Now()
	hc := &http.Client{Timeout: 2 * time.Second}
	var (
		disc *opDiscoveryDoc
		gone bool
	)
	ready := testpoll.Within(opStartTimeout, func() bool {
		select {
		case <-exited:
			gone = true
			return true
		default:
		}
		d, err := opDiscovery(hc, issuer)
		if err != nil {
			return false
		}
		disc = d
		return true
	})
	switch {
	case gone:
		stopped = true
		return nil, fmt.Errorf("oidc-provider exited before it was ready (%v); output:\n%s", waitErr, out.String())
	case !ready:
		stop()
		return nil, fmt.Errorf("%w: it did not answer %s/.well-known/openid-configuration within %s; output:\n%s", errOPNotReady, issuer, opStartTimeout, out.String())
	}
	op.AuthorizationEndpoint = disc.AuthorizationEndpoint
	op.TokenEndpoint = disc.TokenEndpoint
	op.UserinfoEndpoint = disc.UserinfoEndpoint
	op.JWKSURI = disc.JWKSURI
	op.EndSessionEndpoint = disc.EndSessionEndpoint
	op.PAREndpoint = disc.PAREndpoint
	if disc.Issuer != issuer {
		stop()
		t.Fatalf("startOP: discovery issuer %q, want %q", disc.Issuer, issuer)
	}
	t.Logf("oidc-provider ready at %s in %v", issuer, time.Since(start).Round(time.Millisecond))
	return op, nil
}

type opDiscoveryDoc struct {
	Issuer                string `json:"issuer"`
	AuthorizationEndpoint string `json:"authorization_endpoint"`
	TokenEndpoint         string `json:"token_endpoint"`
	UserinfoEndpoint      string `json:"userinfo_endpoint"`
	JWKSURI               string `json:"jwks_uri"`
	EndSessionEndpoint    string `json:"end_session_endpoint"`
	PAREndpoint           string `json:"pushed_authorization_request_endpoint"`
}

func opDiscovery(hc *http.Client, issuer string) (*opDiscoveryDoc, error) {
	resp, err := hc.Get(issuer + "/.well-known/openid-configuration")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("discovery: %s", resp.Status)
	}
	var d opDiscoveryDoc
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		return nil, err
	}
	if d.AuthorizationEndpoint == "" || d.TokenEndpoint == "" {
		return nil, errors.New("discovery document lacks endpoints")
	}
	return &d, nil
}

// opBrowser is a user agent for opLogin/opLogout: a cookie jar and no
// automatic redirects.
func opBrowser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

type opPage struct {
	status int
	loc    string // Location resolved against the request URL
	body   string
}

func opDo(t *testing.T, c *http.Client, method, rawURL string, form url.Values) opPage {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(context.Background(), method, rawURL, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, rawURL, err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, rawURL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	p := opPage{status: resp.StatusCode, body: string(b)}
	if l := resp.Header.Get("Location"); l != "" {
		u, err := req.URL.Parse(l)
		if err != nil {
			t.Fatalf("%s %s: bad Location %q: %v", method, rawURL, l, err)
		}
		p.loc = u.String()
	}
	return p
}

var (
	opFormRE      = regexp.MustCompile(`(?s)<form[^>]*\baction="([^"]*)"[^>]*>(.*?)</form>`)
	opLoginFormRE = regexp.MustCompile(`<input[^>]*\bname="login"`)
	opXsrfRE      = regexp.MustCompile(`<input[^>]*\bname="xsrf"[^>]*\bvalue="([^"]*)"`)
)

func opSameOrigin(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	return err1 == nil && err2 == nil && ua.Scheme == ub.Scheme && ua.Host == ub.Host
}

// opLogin drives user agent c (a cookie jar; CheckRedirect returns
// http.ErrUseLastResponse) through the OP from authURL — the OP's
// authorization endpoint with all parameters, as the RP redirected to it:
// it follows the OP's redirects, submits the login form as username
// (the OP then grants the requested scopes without a consent page) and
// returns the first redirect that leaves the OP: the RP's redirect_uri with
// code, state and iss (or error=access_denied for username "reject"). It does
// not follow that redirect. When c already has a session at the OP for this
// user, no form is shown. An OP error page fails the test.
func opLogin(t *testing.T, c *http.Client, authURL, username string) (callbackURL string) {
	t.Helper()
	next, method := authURL, http.MethodGet
	var form url.Values
	submitted := false
	for hop := 0; hop < 10; hop++ {
		p := opDo(t, c, method, next, form)
		method, form = http.MethodGet, nil
		switch {
		case p.status >= 300 && p.status < 400 && p.loc != "":
			if !opSameOrigin(p.loc, authURL) {
				return p.loc
			}
			next = p.loc
		case p.status == http.StatusOK && opLoginFormRE.MatchString(p.body):
			if submitted {
				t.Fatalf("opLogin: the OP asked for a login again after the form was submitted as %q:\n%s", username, p.body)
			}
			m := opFormRE.FindStringSubmatch(p.body)
			if m == nil {
				t.Fatalf("opLogin: no form in the OP's login page %s:\n%s", next, p.body)
			}
			action, err := url.Parse(next)
			if err == nil {
				action, err = action.Parse(html.UnescapeString(m[1]))
			}
			if err != nil {
				t.Fatalf("opLogin: bad form action %q: %v", m[1], err)
			}
			next, method, form, submitted = action.String(), http.MethodPost, url.Values{"login": {username}}, true
		default:
			t.Fatalf("opLogin: %s answered %d, want a redirect or the login form:\n%s", next, p.status, p.body)
		}
	}
	t.Fatalf("opLogin: more than 10 hops at the OP starting from %s", authURL)
	return ""
}

// opConfirmLogout completes an RP-initiated logout that user agent c was sent
// to (endSessionURL: the OP's end_session_endpoint with its parameters, as an
// RP redirected to it): it loads the OP's confirm page, answers "yes, sign me
// out" (logout=yes, so every client of the OP session is logged out) and
// returns the OP's final redirect (the post_logout_redirect_uri with state, or
// the OP's own "signed out" page) without following it. The OP has sent all
// back-channel logout tokens (and had answers) before it answers the confirm
// form.
func opConfirmLogout(t *testing.T, c *http.Client, endSessionURL string) (location string) {
	t.Helper()
	p := opDo(t, c, http.MethodGet, endSessionURL, nil)
	if p.status != http.StatusOK {
		t.Fatalf("opConfirmLogout: GET %s answered %d, want 200 and the confirm form:\n%s", endSessionURL, p.status, p.body)
	}
	m := opFormRE.FindStringSubmatch(p.body)
	x := opXsrfRE.FindStringSubmatch(p.body)
	if m == nil || x == nil {
		t.Fatalf("opConfirmLogout: no logout form with xsrf in the OP's page:\n%s", p.body)
	}
	action, err := url.Parse(endSessionURL)
	if err == nil {
		action, err = action.Parse(html.UnescapeString(m[1]))
	}
	if err != nil {
		t.Fatalf("opConfirmLogout: bad form action %q: %v", m[1], err)
	}
	r := opDo(t, c, http.MethodPost, action.String(), url.Values{"xsrf": {html.UnescapeString(x[1])}, "logout": {"yes"}})
	if r.status != http.StatusSeeOther || r.loc == "" {
		t.Fatalf("opConfirmLogout: POST %s answered %d, want 303:\n%s", action, r.status, r.body)
	}
	return r.loc
}

// opLogout performs RP-initiated logout at op for user agent c: GET the
// end_session_endpoint with client_id and postLogoutRedirectURI (one of the
// client's PostLogoutRedirectURIs; "" for none), then the confirm form. The
// OP ends its session and sends a back-channel logout token to every client
// of that session with a BackchannelLogoutURI; it returns once the OP answered
// the confirm POST (after those calls), checking that it redirects to
// postLogoutRedirectURI.
func opLogout(t *testing.T, c *http.Client, op *OP, clientID, postLogoutRedirectURI string) {
	t.Helper()
	q := url.Values{"client_id": {clientID}}
	if postLogoutRedirectURI != "" {
		q.Set("post_logout_redirect_uri", postLogoutRedirectURI)
	}
	loc := opConfirmLogout(t, c, op.EndSessionEndpoint+"?"+q.Encode())
	if postLogoutRedirectURI != "" && strings.SplitN(loc, "?", 2)[0] != postLogoutRedirectURI {
		t.Fatalf("opLogout: the OP redirected to %s, want %s", loc, postLogoutRedirectURI)
	}
}

// opJWTPayload decodes a JWT's payload WITHOUT verifying anything.
func opJWTPayload(jwt string) (map[string]any, error) {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("not a JWS compact serialization: %q", jwt)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, fmt.Errorf("JWT payload: %v", err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("JWT payload: %v: %s", err, b)
	}
	return v, nil
}

func opMustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func opRandom(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// oidcTestRP is a minimal relying party for TestOPHarness, standard library
// only.
type oidcTestRP struct {
	srv    *httptest.Server
	op     *OP
	client OPClient

	mu       sync.Mutex
	pending  map[string][2]string // state -> nonce, code_verifier
	idTokens []map[string]any     // payloads of the ID tokens received
	logouts  []map[string]any     // payloads of the logout tokens received
	errs     []string
}

func (rp *oidcTestRP) fail(format string, a ...any) {
	rp.mu.Lock()
	rp.errs = append(rp.errs, fmt.Sprintf(format, a...))
	rp.mu.Unlock()
}

func (rp *oidcTestRP) authURL() string {
	state, nonce, verifier := opRandom(16), opRandom(16), opRandom(32)
	rp.mu.Lock()
	rp.pending[state] = [2]string{nonce, verifier}
	rp.mu.Unlock()
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{
		"response_type":         {"code"},
		"client_id":             {rp.client.ID},
		"redirect_uri":          {rp.client.RedirectURIs[0]},
		"scope":                 {"openid profile email"},
		"state":                 {state},
		"nonce":                 {nonce},
		"code_challenge":        {base64.RawURLEncoding.EncodeToString(sum[:])},
		"code_challenge_method": {"S256"},
	}
	return rp.op.AuthorizationEndpoint + "?" + q.Encode()
}

// token exchanges a code; it returns the status and the JSON answer.
func (rp *oidcTestRP) token(code, verifier string) (int, map[string]any) {
	form := url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {code},
		"redirect_uri":  {rp.client.RedirectURIs[0]},
		"code_verifier": {verifier},
	}
	req, _ := http.NewRequest(http.MethodPost, rp.op.TokenEndpoint, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(rp.client.ID), url.QueryEscape(rp.client.Secret))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, map[string]any{"transport_error": err.Error()}
	}
	defer resp.Body.Close()
	var v map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&v)
	return resp.StatusCode, v
}

func (rp *oidcTestRP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/cb":
		q := r.URL.Query()
		rp.mu.Lock()
		p, ok := rp.pending[q.Get("state")]
		delete(rp.pending, q.Get("state"))
		rp.mu.Unlock()
		if !ok {
			rp.fail("callback with unknown state: %s", r.URL)
			http.Error(w, "unknown state", http.StatusBadRequest)
			return
		}
		if q.Get("iss") != rp.op.Issuer {
			rp.fail("callback iss %q, want %q", q.Get("iss"), rp.op.Issuer)
		}
		if e := q.Get("error"); e != "" {
			http.Error(w, "login failed: "+e, http.StatusForbidden)
			return
		}
		status, tok := rp.token(q.Get("code"), p[1])
		idt, _ := tok["id_token"].(string)
		if status != http.StatusOK || idt == "" || tok["access_token"] == nil {
			rp.fail("token exchange: %d %v", status, tok)
			http.Error(w, "token exchange failed", http.StatusBadGateway)
			return
		}
		claims, err := opJWTPayload(idt)
		if err != nil {
			rp.fail("id_token: %v", err)
			http.Error(w, "bad id_token", http.StatusBadGateway)
			return
		}
		if claims["nonce"] != p[0] {
			rp.fail("id_token nonce %v, want %s", claims["nonce"], p[0])
		}
		rp.mu.Lock()
		rp.idTokens = append(rp.idTokens, claims)
		rp.mu.Unlock()
		fmt.Fprintf(w, "hello %v\n", claims["sub"])
	case "/backchannel":
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		lt := r.PostFormValue("logout_token")
		if lt == "" {
			rp.fail("back-channel logout without logout_token")
			http.Error(w, "no logout_token", http.StatusBadRequest)
			return
		}
		claims, err := opJWTPayload(lt)
		if err != nil {
			rp.fail("logout_token: %v", err)
			http.Error(w, "bad logout_token", http.StatusBadRequest)
			return
		}
		rp.mu.Lock()
		rp.logouts = append(rp.logouts, claims)
		rp.mu.Unlock()
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
	case "/loggedout":
		fmt.Fprintln(w, "signed out")
	default:
		http.NotFound(w, r)
	}
}

func TestOPHarness(t *testing.T) {
	t.Parallel()
	rp := &oidcTestRP{pending: map[string][2]string{}}
	rp.srv = httptest.NewServer(rp)
	t.Cleanup(rp.srv.Close)
	rp.client = OPClient{
		ID:                     "e2e-rp",
		Secret:                 "e2e-rp-secret-" + opRandom(8),
		RedirectURIs:           []string{rp.srv.URL + "/cb"},
		PostLogoutRedirectURIs: []string{rp.srv.URL + "/loggedout"},
		BackchannelLogoutURI:   rp.srv.URL + "/backchannel",
	}
	rp.op = startOP(t, rp.client)
	op := rp.op
	t.Cleanup(func() {
		rp.mu.Lock()
		defer rp.mu.Unlock()
		for _, e := range rp.errs {
			t.Errorf("RP: %s", e)
		}
	})
	if op.ClientID != "e2e-rp" || op.EndSessionEndpoint == "" || !strings.HasPrefix(op.TokenEndpoint, op.Issuer) {
		t.Fatalf("OP fields: %+v", op)
	}

	getCallback := func(c *http.Client, cb string) (int, string) {
		t.Helper()
		p := opDo(t, c, http.MethodGet, cb, nil)
		return p.status, p.body
	}

	// Login: code flow with state, nonce and PKCE; the ID token has sub and sid.
	alice := opBrowser()
	cb := opLogin(t, alice, rp.authURL(), "alice")
	if !strings.HasPrefix(cb, rp.srv.URL+"/cb?") || opMustURL(t, cb).Query().Get("code") == "" {
		t.Fatalf("callback %s: want %s/cb with a code", cb, rp.srv.URL)
	}
	if st, body := getCallback(alice, cb); st != http.StatusOK || body != "hello alice\n" {
		t.Fatalf("RP callback: %d %q", st, body)
	}
	rp.mu.Lock()
	if len(rp.idTokens) != 1 {
		rp.mu.Unlock()
		t.Fatalf("RP got %d ID tokens, want 1", len(rp.idTokens))
	}
	idt := rp.idTokens[0]
	rp.mu.Unlock()
	sid, _ := idt["sid"].(string)
	if idt["sub"] != "alice" || sid == "" || idt["iss"] != op.Issuer || idt["aud"] != "e2e-rp" ||
		idt["email"] != "alice@example.test" || idt["name"] != "alice" {
		t.Fatalf("ID token payload %v: want sub alice, a sid, iss, aud, email and name", idt)
	}

	// A second login in the same browser reuses the OP session: no form.
	cb2 := opLogin(t, alice, rp.authURL(), "ignored")
	if st, body := getCallback(alice, cb2); st != http.StatusOK || body != "hello alice\n" {
		t.Fatalf("second login: RP callback: %d %q", st, body)
	}

	// The user "reject" refuses.
	rej := opBrowser()
	authURL := rp.authURL()
	cb = opLogin(t, rej, authURL, "reject")
	q := opMustURL(t, cb).Query()
	if !strings.HasPrefix(cb, rp.srv.URL+"/cb?") || q.Get("error") != "access_denied" || q.Get("code") != "" ||
		q.Get("state") != opMustURL(t, authURL).Query().Get("state") {
		t.Fatalf("reject: callback %s, want error=access_denied with the state", cb)
	}
	if st, _ := getCallback(rej, cb); st != http.StatusForbidden {
		t.Fatalf("reject: RP callback answered %d", st)
	}

	// A wrong code_verifier is refused; the right one still works after it.
	bob := opBrowser()
	authURL = rp.authURL()
	cb = opLogin(t, bob, authURL, "bob")
	code := opMustURL(t, cb).Query().Get("code")
	st, v := rp.token(code, opRandom(32))
	if st != http.StatusBadRequest || v["error"] != "invalid_grant" {
		t.Fatalf("token with a wrong code_verifier: %d %v, want 400 invalid_grant", st, v)
	}
	if st, body := getCallback(bob, cb); st != http.StatusOK || body != "hello bob\n" {
		t.Fatalf("bob: RP callback: %d %q", st, body)
	}

	// RP-initiated logout: the OP calls the back-channel logout URI with a
	// logout token for alice's session, before answering the confirm form.
	opLogout(t, alice, op, "e2e-rp", rp.srv.URL+"/loggedout")
	rp.mu.Lock()
	logouts := append([]map[string]any(nil), rp.logouts...)
	rp.mu.Unlock()
	if len(logouts) != 1 {
		t.Fatalf("RP got %d logout tokens, want 1: %v", len(logouts), logouts)
	}
	lt := logouts[0]
	ev, _ := lt["events"].(map[string]any)
	if _, ok := ev["http://schemas.openid.net/event/backchannel-logout"]; !ok {
		t.Fatalf("logout token events %v lack the back-channel logout event", lt["events"])
	}
	if lt["sid"] != sid || lt["sub"] != "alice" || lt["iss"] != op.Issuer || lt["aud"] != "e2e-rp" || lt["nonce"] != nil {
		t.Fatalf("logout token %v: want sid %s, sub alice, iss, aud and no nonce", lt, sid)
	}

	// Alice's OP session is gone: the next authorization asks for a login.
	p := opDo(t, alice, http.MethodGet, rp.authURL(), nil)
	if p.status != http.StatusSeeOther || !strings.Contains(p.loc, "/interaction/") {
		t.Fatalf("after logout: authorization answered %d %s, want a redirect to the login interaction", p.status, p.loc)
	}
}
