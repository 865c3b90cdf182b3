//go:build integration

package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/fintech-bff/bff/internal/testing/dpoptest"
)

// The BFF with auth.oidc.profile fapi2 against the test provider in its
// FAPI 2.0 mode: PAR required, private_key_jwt only, codes bound to the
// DPoP key named at PAR (nonces asked), iss in every response.

// fapiClient is the BFF's client at the provider: its signing key (the
// BFF's client_keys_file holds it) and its id.
type fapiClient struct {
	key *ecdsa.PrivateKey
	kid string
}

// fapi2Env starts the provider in fapi2 mode and the BFF with the fapi2
// profile, step-up on (stepUpYAML, unless o.extraYAML has its own) so
// that approvals go through it too.
func fapi2Env(t *testing.T, o options) (*env, *OP, fapiClient) {
	t.Helper()
	pub := o.publicAddr
	if pub == "" {
		pub = freeAddr(t)
	}
	base := "http://" + pub
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	fc := fapiClient{key: key, kid: "bff-e2e-1"}
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key, KeyID: fc.kid}}})
	keysFile := filepath.Join(t.TempDir(), "client-keys.json")
	if err := os.WriteFile(keysFile, jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	c := bffClient(base)
	c.AuthMethod, c.JWKSURI, c.DPoPBound = "private_key_jwt", base+"/auth/jwks.json", true
	op := startOPWith(t, OPMode{Profile: "fapi2"}, c)
	o.publicAddr = pub
	o.authYAML = fmt.Sprintf(`auth:
  mode: oidc
  oidc:
    issuer: %q
    client_id: %q
    redirect_url: %q
    scopes: [openid, profile, email]
    user_id_claim: sub
    profile: fapi2
    client_keys_file: %q
  mobile_redirect_uris: [%q]`, op.Issuer, opClientID, base+"/auth/callback", keysFile, mobileRedirect)
	if !strings.Contains(o.extraYAML, "step_up:") {
		o.extraYAML += stepUpYAML
	}
	return start(t, o), op, fc
}

// pushedOnly checks that an authorization URL the BFF sent a browser to
// is the provider's authorization endpoint with client_id and request_uri
// and nothing else, and returns it.
func pushedOnly(t *testing.T, op *OP, loc string) string {
	t.Helper()
	u := mustURL(t, loc)
	q := u.Query()
	if u.Scheme+"://"+u.Host+u.Path != op.AuthorizationEndpoint || len(q) != 2 || q.Get("client_id") != opClientID ||
		!strings.HasPrefix(q.Get("request_uri"), "urn:ietf:params:oauth:request_uri:") {
		t.Fatalf("the browser was sent to %s, want %s with client_id and request_uri only", loc, op.AuthorizationEndpoint)
	}
	return loc
}

// fapiLogin starts a login at the BFF (query: "?returnTo=/" or a native
// app's), checks the browser carries only the pushed request's reference,
// and logs in at the provider as user; it returns the callback URL.
func fapiLogin(t *testing.T, op *OP, b *client, query, user string) string {
	t.Helper()
	r := b.do("GET", "/auth/login"+query, "")
	if r.status != http.StatusFound {
		t.Fatalf("GET /auth/login%s: got %d %s", query, r.status, r.body)
	}
	cb := opLogin(t, b.http, pushedOnly(t, op, r.header.Get("Location")), user)
	if got := mustURL(t, cb).Query().Get("iss"); got != op.Issuer {
		t.Fatalf("the provider's response %s carries iss %q, want %q", cb, got, op.Issuer)
	}
	return cb
}

// A browser's login, a native app's login and a held payment's approval,
// each through PAR with private_key_jwt and a DPoP-bound code; the
// approval sends the payment once; the BFF publishes its public key and
// nothing private.
func TestFAPI2LoginNativeLoginAndApproval(t *testing.T) {
	t.Parallel()
	e, op, fc := fapi2Env(t, options{})

	t.Run("client keys", func(t *testing.T) {
		r := e.browser().do("GET", "/auth/jwks.json", "")
		var set jose.JSONWebKeySet
		if r.status != 200 || json.Unmarshal(r.body, &set) != nil || len(set.Keys) != 1 {
			t.Fatalf("GET /auth/jwks.json: %d %s", r.status, r.body)
		}
		k := set.Keys[0]
		if !k.IsPublic() || k.KeyID != fc.kid || k.Algorithm != "ES256" || strings.Contains(string(r.body), `"d"`) {
			t.Fatalf("the published key %s is not the client key's public part", r.body)
		}
	})

	t.Run("browser", func(t *testing.T) {
		b := e.browser()
		if r := b.follow(t, fapiLogin(t, op, b, "?returnTo=/accounts", "fay")); r.status != http.StatusFound || r.header.Get("Location") != "/accounts" {
			t.Fatalf("callback: got %d %q %s", r.status, r.header.Get("Location"), r.body)
		}
		if v := b.do("GET", "/auth/session", "").json(t); v["userId"] != "fay" {
			t.Fatalf("session: %v", v)
		}
	})

	t.Run("native app", func(t *testing.T) {
		verifier, challenge := pkcePair()
		b := e.browser()
		q := "?client=mobile&redirect_uri=" + url.QueryEscape(mobileRedirect) + "&code_challenge=" + challenge + "&code_challenge_method=S256&state=app-1"
		r := b.follow(t, fapiLogin(t, op, b, q, "nat"))
		loc := r.header.Get("Location")
		if r.status != http.StatusFound || !strings.HasPrefix(loc, mobileRedirect+"?") {
			t.Fatalf("mobile callback: got %d %q %s", r.status, loc, r.body)
		}
		code := mustURL(t, loc).Query().Get("code")
		v := e.browser().do("POST", "/auth/mobile/token", fmt.Sprintf(`{"code":%q,"codeVerifier":%q}`, code, verifier)).json(t)
		tok, _ := v["sessionToken"].(string)
		if tok == "" {
			t.Fatalf("mobile token: %v", v)
		}
		if s := e.app(tok).do("GET", "/auth/session", "").json(t); s["userId"] != "nat" {
			t.Fatalf("session: %v", s)
		}
	})

	t.Run("approval", func(t *testing.T) {
		b := e.browser()
		b.follow(t, fapiLogin(t, op, b, "?returnTo=/", "alice"))
		stepUp := held(t, b, eurPayment("420.00", "fapi approval"), "fapi-1", "X-CSRF", "1")
		r := b.do("GET", mustURL(t, stepUp).RequestURI()+"&returnTo=/paid", "")
		authURL := pushedOnly(t, op, r.header.Get("Location"))
		for _, secret := range []string{"420", "DE89370400440532013000", "Jane"} {
			if strings.Contains(authURL, secret) {
				t.Fatalf("the approval's URL %s carries %q", authURL, secret)
			}
		}
		cb, shown := opDecide(t, b.http, authURL, "alice", "123456", "approve")
		if shown["amount"] != "420.00 EUR" || shown["iban"] != "DE89370400440532013000" {
			t.Fatalf("the provider showed %v, want the pushed payment", shown)
		}
		wantBackTo(t, "the approval", b.follow(t, cb), "/paid?payment=fapi-1&stepUp=approved")
		if n := paymentPosts(e.sim); n != 1 {
			t.Fatalf("the upstream got %d creations after the approval, want exactly 1", n)
		}
	})
}

// A BFF configured with the fapi2 profile does not start against a
// provider without PAR (or any other piece of the profile): the error
// names what is missing. And the provider in fapi2 mode refuses an
// authorization request that was not pushed.
func TestFAPI2RefusesNoPAR(t *testing.T) {
	t.Parallel()
	// The provider without the profile: no PAR, no DPoP.
	pub := freeAddr(t)
	plain := startOP(t, OPClient{ID: opClientID, Secret: opClientSecret, RedirectURIs: []string{"http://" + pub + "/auth/callback"}})
	keys, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: mustECKey(t), KeyID: "k1"}}})
	keysFile := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(keysFile, keys, 0o600); err != nil {
		t.Fatal(err)
	}
	err := startErr(t, options{publicAddr: pub, authYAML: fmt.Sprintf(`auth:
  mode: oidc
  oidc:
    issuer: %q
    client_id: %q
    redirect_url: %q
    user_id_claim: sub
    profile: fapi2
    client_keys_file: %q`, plain.Issuer, opClientID, "http://"+pub+"/auth/callback", keysFile)})
	if err == nil || !strings.Contains(err.Error(), "pushed_authorization_request_endpoint (PAR, RFC 9126)") ||
		!strings.Contains(err.Error(), "dpop_signing_alg_values_supported") {
		t.Fatalf("the BFF with fapi2 against a provider without PAR or DPoP: got %v, want a refusal naming both", err)
	}

	// The provider in fapi2 mode: a request in the front channel.
	_, op, _ := fapi2Env(t, options{})
	_, challenge := pkcePair()
	front := op.AuthorizationEndpoint + "?" + url.Values{"client_id": {opClientID}, "response_type": {"code"}, "scope": {"openid"},
		"redirect_uri": {e2eRedirectOf(op)}, "state": {"s1"}, "nonce": {"n1"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"}}.Encode()
	p := opDo(t, opBrowser(), http.MethodGet, front, nil)
	loc, _ := url.Parse(p.loc)
	if loc == nil || loc.Query().Get("error") != "invalid_request" || !strings.Contains(loc.Query().Get("error_description"), "Pushed Authorization Request") {
		t.Fatalf("a front-channel request to the fapi2 provider: got %d %q, want invalid_request (PAR must be used)", p.status, p.loc)
	}
}

// e2eRedirectOf is the redirect URI the provider's client has.
func e2eRedirectOf(op *OP) string { return op.Clients[0].RedirectURIs[0] }

func mustECKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// A client that authenticates with a secret instead of an assertion is
// refused: a BFF without the profile but with a client_secret, against
// the fapi2 provider, cannot start a login (its pushed request is
// refused), and answers LOGIN_FAILED, not a redirect.
func TestFAPI2RefusesASecret(t *testing.T) {
	t.Parallel()
	pub := freeAddr(t)
	base := "http://" + pub
	op := startOPWith(t, OPMode{Profile: "fapi2"}, OPClient{ID: opClientID, AuthMethod: "private_key_jwt", JWKSURI: base + "/auth/jwks.json",
		DPoPBound: true, RedirectURIs: []string{base + "/auth/callback"}})
	e := secretClientBFF(t, pub, op)
	wantProblem(t, e.browser().do("GET", "/auth/login?returnTo=/", ""), http.StatusBadRequest, "LOGIN_FAILED")
	if !strings.Contains(op.Output(), "invalid_client") {
		t.Fatalf("the provider did not refuse the client's authentication; its log:\n%s", op.Output())
	}
}

// An authorization response whose iss is not the provider's (a mix-up) or
// that has none is refused: no session, the code never redeemed.
func TestFAPI2RefusesAWrongIssuer(t *testing.T) {
	t.Parallel()
	e, op, _ := fapi2Env(t, options{})
	for name, edit := range map[string]func(url.Values){
		"another issuer": func(q url.Values) { q.Set("iss", "http://127.0.0.1:1/evil") },
		"no issuer":      func(q url.Values) { q.Del("iss") },
	} {
		t.Run(name, func(t *testing.T) {
			b := e.browser()
			u := mustURL(t, fapiLogin(t, op, b, "?returnTo=/", "ivy"))
			q := u.Query()
			edit(q)
			u.RawQuery = q.Encode()
			wantProblem(t, b.follow(t, u.String()), http.StatusBadRequest, "LOGIN_FAILED")
			if r := b.do("GET", "/auth/session", ""); r.status != http.StatusUnauthorized {
				t.Fatalf("a session after a response of the wrong issuer: %d %s", r.status, r.body)
			}
		})
	}
}

// A code is bound to the DPoP key named at PAR: redeemed without a proof,
// or with a proof of another key, it is refused, even with the client's
// own assertion and the right PKCE verifier; with the bound key (after the
// provider's nonce) it is honoured. The test is the client here, as the
// BFF is, to hold every other part of the request right.
func TestFAPI2RefusesACodeWithoutTheBoundKey(t *testing.T) {
	t.Parallel()
	_, op, fc := fapi2Env(t, options{})
	bound, other := dpoptest.NewKey(t), dpoptest.NewKey(t)
	for _, tc := range []struct {
		name string
		key  *dpoptest.Key
		ok   bool
	}{{"no proof", nil, false}, {"another key", &other, false}, {"the bound key", &bound, true}} {
		t.Run(tc.name, func(t *testing.T) {
			verifier, challenge := pkcePair()
			reqURI := fc.push(t, op, url.Values{"response_type": {"code"}, "redirect_uri": {e2eRedirectOf(op)}, "scope": {"openid"},
				"state": {"s-" + tc.name}, "nonce": {"n1"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"},
				"dpop_jkt": {bound.Thumbprint()}})
			cb := opLogin(t, opBrowser(), op.AuthorizationEndpoint+"?"+url.Values{"client_id": {opClientID}, "request_uri": {reqURI}}.Encode(), "kim")
			code := mustURL(t, cb).Query().Get("code")
			if code == "" {
				t.Fatalf("no code in %s", cb)
			}
			status, body := fc.redeem(t, op, code, verifier, tc.key)
			if tc.ok && (status != 200 || body["token_type"] != "DPoP" || body["id_token"] == nil) {
				t.Fatalf("the bound key: got %d %v, want a DPoP-bound token", status, body)
			}
			if !tc.ok && (status != 400 || body["error"] != "invalid_grant") {
				t.Fatalf("%s: got %d %v, want 400 invalid_grant", tc.name, status, body)
			}
		})
	}
}

// assertion is a client assertion of the BFF's client (RFC 7523).
func (fc fapiClient) assertion(t *testing.T, issuer string) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: fc.key, KeyID: fc.kid}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	a, err := jwt.Signed(s).Claims(jwt.Claims{Issuer: opClientID, Subject: opClientID, Audience: jwt.Audience{issuer}, ID: opRandom(16),
		IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Minute))}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// postForm posts form to the provider with the client's assertion and,
// when key is set, a DPoP proof (retried once with the provider's nonce).
func (fc fapiClient) postForm(t *testing.T, op *OP, target string, form url.Values, key *dpoptest.Key) (int, map[string]any) {
	t.Helper()
	nonce := ""
	for try := 0; ; try++ {
		form.Set("client_id", opClientID)
		form.Set("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
		form.Set("client_assertion", fc.assertion(t, op.Issuer))
		req, _ := http.NewRequest(http.MethodPost, target, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if key != nil {
			req.Header.Set("DPoP", key.Proof(http.MethodPost, target, "", func(c map[string]any) {
				if nonce != "" {
					c["nonce"] = nonce
				}
			}))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if n := resp.Header.Get("DPoP-Nonce"); try == 0 && key != nil && body["error"] == "use_dpop_nonce" && n != "" {
			nonce = n
			continue
		}
		return resp.StatusCode, body
	}
}

// push makes a pushed authorization request and returns its request_uri.
func (fc fapiClient) push(t *testing.T, op *OP, params url.Values) string {
	t.Helper()
	status, body := fc.postForm(t, op, op.PAREndpoint, params, nil)
	uri, _ := body["request_uri"].(string)
	if status != http.StatusCreated || uri == "" {
		t.Fatalf("PAR: got %d %v", status, body)
	}
	return uri
}

// redeem redeems a code at the token endpoint.
func (fc fapiClient) redeem(t *testing.T, op *OP, code, verifier string, key *dpoptest.Key) (int, map[string]any) {
	t.Helper()
	return fc.postForm(t, op, op.TokenEndpoint, url.Values{"grant_type": {"authorization_code"}, "code": {code},
		"redirect_uri": {e2eRedirectOf(op)}, "code_verifier": {verifier}}, key)
}

// No secret of the fapi2 client appears in the BFF's logs or in Redis in
// plain text: the client's private key, the provider's code, the session
// and login cookies; after logins that succeeded and one that failed.
func TestFAPI2NoSecretsInLogsOrRedis(t *testing.T) {
	t.Parallel()
	e, op, fc := fapi2Env(t, options{})
	b := e.browser()
	cb := fapiLogin(t, op, b, "?returnTo=/", "tess")
	var bindingCookie string
	for _, ck := range b.http.Jar.Cookies(mustURL(t, e.public)) {
		if strings.HasPrefix(ck.Name, "bff_login_") {
			bindingCookie = ck.Value
		}
	}
	b.follow(t, cb)
	cookie := sessionCookie(t, e, b)
	// A failed one: the code redeemed, the response's iss wrong.
	bad := e.browser()
	u := mustURL(t, fapiLogin(t, op, bad, "?returnTo=/", "tess"))
	badCode := u.Query().Get("code")
	q := u.Query()
	q.Set("iss", "http://127.0.0.1:1/evil")
	u.RawQuery = q.Encode()
	bad.follow(t, u.String())
	// A pending one, its state in Redis now.
	e.browser().do("GET", "/auth/login?returnTo=/", "")

	jwk, _ := json.Marshal(jose.JSONWebKey{Key: fc.key})
	var priv struct {
		D string `json:"d"`
	}
	_ = json.Unmarshal(jwk, &priv)
	secrets := map[string]string{"client private key": priv.D, "provider code": mustURL(t, cb).Query().Get("code"),
		"refused response's code": badCode, "session cookie": cookie, "login cookie": bindingCookie}
	wantNoSecrets(t, e, secrets)
}
