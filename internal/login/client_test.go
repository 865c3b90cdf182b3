package login

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/fintech-bff/bff/internal/kv"
)

// privateJWKS is a JWK Set of the given private keys, kids k1, k2, ...
func privateJWKS(t *testing.T, keys ...any) []byte {
	t.Helper()
	var set jose.JSONWebKeySet
	for i, k := range keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k, KeyID: "k" + string(rune('1'+i))})
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ecKey(t *testing.T, c elliptic.Curve) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(c, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Client keys: several keys, one active (the named one, else the first);
// every public part published, no private part; what FAPI 2.0 does not
// allow is refused at start, naming the key.
func TestParseClientKeys(t *testing.T) {
	p256a, p256b := ecKey(t, elliptic.P256()), ecKey(t, elliptic.P256())
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	rsaSmall, _ := rsa.GenerateKey(rand.Reader, 1024)

	k, err := ParseClientKeys(privateJWKS(t, p256a, p256b, ed), "")
	if err != nil {
		t.Fatal(err)
	}
	if k.ActiveKeyID() != "k1" {
		t.Fatalf("active kid %q, want the first, k1", k.ActiveKeyID())
	}
	if k, err = ParseClientKeys(privateJWKS(t, p256a, p256b, ed), "k3"); err != nil || k.ActiveKeyID() != "k3" || k.Algorithm() != jose.EdDSA {
		t.Fatalf("named active key: %v %v", k, err)
	}
	var pub struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(k.PublicJWKS(), &pub); err != nil || len(pub.Keys) != 3 {
		t.Fatalf("public JWKS %s: %v", k.PublicJWKS(), err)
	}
	for _, m := range pub.Keys {
		if _, ok := m["d"]; ok {
			t.Fatalf("the public JWKS holds a private part: %s", k.PublicJWKS())
		}
		if m["use"] != "sig" || m["alg"] == nil || m["kid"] == nil {
			t.Fatalf("a public key lacks use, alg or kid: %v", m)
		}
	}

	noKid, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: p256a}}})
	public, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &p256a.PublicKey, KeyID: "pub"}}})
	for name, tc := range map[string]struct {
		jwks   []byte
		active string
		want   string
	}{
		"not JSON":       {[]byte("{"), "", "not a JWK Set"},
		"empty":          {[]byte(`{"keys":[]}`), "", "no key"},
		"no kid":         {noKid, "", "no kid"},
		"twice the kid":  {[]byte(`{"keys":[` + jwkOf(t, p256a, "a") + `,` + jwkOf(t, p256b, "a") + `]}`), "", "used twice"},
		"public only":    {public, "", "no private part"},
		"P-384":          {privateJWKS(t, ecKey(t, elliptic.P384())), "", "P-256"},
		"RSA 1024":       {privateJWKS(t, rsaSmall), "", "2048"},
		"unknown active": {privateJWKS(t, p256a), "k9", `active kid "k9"`},
	} {
		if _, err := ParseClientKeys(tc.jwks, tc.active); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", name, err, tc.want)
		}
	}
}

func jwkOf(t *testing.T, k any, kid string) string {
	b, err := json.Marshal(jose.JSONWebKey{Key: k, KeyID: kid})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fapiOP is a provider's back channel as FAPI 2.0 has it, in Go: PAR with
// private_key_jwt, DPoP-bound codes with a nonce, iss in the response.
// What the browser does between PAR and the callback is left out: the
// test takes the code the PAR's request would have got.
type fapiOP struct {
	srv  *httptest.Server
	mux  *http.ServeMux // more endpoints, for a test's own
	idk  *rsa.PrivateKey
	jwks *jose.JSONWebKeySet // the client's public keys
	meta map[string]any

	mu       sync.Mutex
	pushed   []url.Values   // every PAR form
	tokens   []url.Values   // every token form
	proofs   []string       // the token requests' DPoP headers
	jtis     map[string]int // client assertion ids seen
	nonceFor int            // token requests answered use_dpop_nonce
	nonce    string         // the nonce the token endpoint wants now
	// rotate, when set, is the nonce the next successful token response
	// announces (DPoP-Nonce, RFC 9449 section 8.2) and then wants.
	rotate string
	// idAlg signs ID tokens: PS256 (FAPI 2.0 section 5.4.1) unless a test
	// says otherwise.
	idAlg jose.SignatureAlgorithm
}

func newFAPIOP(t *testing.T, clientJWKS []byte) *fapiOP {
	t.Helper()
	idk, _ := rsa.GenerateKey(rand.Reader, 2048)
	op := &fapiOP{idk: idk, jwks: &jose.JSONWebKeySet{}, jtis: map[string]int{}, nonce: "nonce-1", idAlg: jose.PS256}
	if err := json.Unmarshal(clientJWKS, op.jwks); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	op.srv, op.mux = httptest.NewServer(mux), mux
	t.Cleanup(op.srv.Close)
	u := op.srv.URL
	op.meta = map[string]any{
		"issuer": u, "authorization_endpoint": u + "/auth", "token_endpoint": u + "/token", "jwks_uri": u + "/jwks",
		"id_token_signing_alg_values_supported":          []string{"PS256"},
		"pushed_authorization_request_endpoint":          u + "/par",
		"token_endpoint_auth_methods_supported":          []string{"private_key_jwt"},
		"authorization_response_iss_parameter_supported": true,
		"dpop_signing_alg_values_supported":              []string{"ES256"},
		"code_challenge_methods_supported":               []string{"S256"},
	}
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(op.meta)
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &idk.PublicKey, KeyID: "op", Use: "sig"}}})
	})
	mux.HandleFunc("/par", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		op.mu.Lock()
		op.pushed = append(op.pushed, r.PostForm)
		op.mu.Unlock()
		if err := op.checkAssertion(r.PostForm); err != nil {
			oauthFail(w, "invalid_client", err.Error(), "")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"request_uri":"urn:ietf:params:oauth:request_uri:abc","expires_in":60}`))
	})
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		op.mu.Lock()
		op.tokens = append(op.tokens, r.PostForm)
		op.proofs = append(op.proofs, r.Header.Get("DPoP"))
		op.mu.Unlock()
		if err := op.checkAssertion(r.PostForm); err != nil {
			oauthFail(w, "invalid_client", err.Error(), "")
			return
		}
		claims, err := proofClaims(r.Header.Get("DPoP"), u+"/token")
		if err != nil {
			oauthFail(w, "invalid_dpop_proof", err.Error(), "")
			return
		}
		op.mu.Lock()
		want := op.nonce
		op.mu.Unlock()
		if claims["nonce"] != want {
			op.mu.Lock()
			op.nonceFor++
			op.mu.Unlock()
			oauthFail(w, "use_dpop_nonce", "a nonce is needed", want)
			return
		}
		op.mu.Lock()
		first := op.pushed[len(op.pushed)-1]
		op.mu.Unlock()
		if claims["jkt"] != first.Get("dpop_jkt") {
			oauthFail(w, "invalid_grant", "the code is bound to another key", "")
			return
		}
		op.mu.Lock()
		alg := op.idAlg
		if op.rotate != "" {
			w.Header().Set("DPoP-Nonce", op.rotate)
			op.nonce, op.rotate = op.rotate, ""
		}
		op.mu.Unlock()
		idt := signAlg(t, alg, idk, "op", map[string]any{"iss": u, "aud": "bff", "sub": "alice", "nonce": first.Get("nonce"),
			"iat": time.Now().Unix(), "exp": time.Now().Add(time.Minute).Unix(), "auth_time": time.Now().Unix(), "acr": "urn:bff:acr:mfa"})
		w.Header().Set("Content-Type", "application/json")
		reply := map[string]any{"access_token": "at", "token_type": "DPoP", "id_token": idt}
		if d := first.Get("authorization_details"); d != "" {
			reply["authorization_details"] = json.RawMessage(d)
		}
		_ = json.NewEncoder(w).Encode(reply)
	})
	return op
}

func oauthFail(w http.ResponseWriter, code, desc, nonce string) {
	if nonce != "" {
		w.Header().Set("DPoP-Nonce", nonce)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": desc})
}

// checkAssertion is RFC 7523's check of a client assertion, as FAPI 2.0
// has it: signed by a key of the client, iss and sub the client, aud the
// issuer, unexpired, a jti never seen.
func (op *fapiOP) checkAssertion(form url.Values) error {
	if form.Get("client_secret") != "" {
		return errors.New("a secret instead of an assertion")
	}
	if form.Get("client_assertion_type") != assertionType {
		return errors.New("no client assertion")
	}
	tok, err := jwt.ParseSigned(form.Get("client_assertion"), []jose.SignatureAlgorithm{jose.ES256, jose.EdDSA, jose.PS256})
	if err != nil {
		return err
	}
	keys := op.jwks.Key(tok.Headers[0].KeyID)
	if len(keys) != 1 {
		return errors.New("unknown kid")
	}
	var c jwt.Claims
	if err := tok.Claims(keys[0].Key, &c); err != nil {
		return err
	}
	if err := c.Validate(jwt.Expected{Issuer: "bff", Subject: "bff", AnyAudience: jwt.Audience{op.srv.URL}}); err != nil {
		return err
	}
	if c.Expiry.Time().Sub(c.IssuedAt.Time()) > time.Minute || c.ID == "" {
		return errors.New("long-lived or no jti")
	}
	op.mu.Lock()
	defer op.mu.Unlock()
	op.jtis[c.ID]++
	if op.jtis[c.ID] > 1 {
		return errors.New("replayed assertion")
	}
	return nil
}

// proofClaims checks a DPoP proof's form (typ, embedded key, htm, htu) and
// returns its claims with the key's thumbprint as "jkt".
func proofClaims(proof, htu string) (map[string]any, error) {
	if proof == "" {
		return nil, errors.New("no DPoP proof")
	}
	jws, err := jose.ParseSigned(proof, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return nil, err
	}
	h := jws.Signatures[0].Protected
	if h.ExtraHeaders["typ"] != "dpop+jwt" || h.JSONWebKey == nil || !h.JSONWebKey.IsPublic() {
		return nil, errors.New("not a DPoP proof")
	}
	payload, err := jws.Verify(h.JSONWebKey)
	if err != nil {
		return nil, err
	}
	var c map[string]any
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, err
	}
	if c["htm"] != "POST" || c["htu"] != htu || c["jti"] == nil || c["iat"] == nil {
		return nil, errors.New("wrong htm, htu, or no jti or iat")
	}
	tp, _ := h.JSONWebKey.Thumbprint(crypto.SHA256)
	c["jkt"] = base64.RawURLEncoding.EncodeToString(tp)
	return c, nil
}

// The fapi2 profile end to end against a provider's back channel: the
// browser's URL carries client_id and request_uri only; the pushed request
// carries the rest, the payment's details included, authenticated by a
// fresh assertion; the code is redeemed with a DPoP proof of the key the
// request named (dpop_jkt), after the provider's nonce, each try with a
// new assertion; the granted details come back.
func TestFAPI2LoginThroughPAR(t *testing.T) {
	jwks := privateJWKS(t, ecKey(t, elliptic.P256()), ecKey(t, elliptic.P256()))
	keys, err := ParseClientKeys(jwks, "k2")
	if err != nil {
		t.Fatal(err)
	}
	op := newFAPIOP(t, keys.PublicJWKS())
	p, err := New(context.Background(), Options{Issuer: op.srv.URL, ClientID: "bff", RedirectURL: "https://bff.example/auth/callback",
		UserIDClaim: "sub", Store: kv.NewMemory(nil), EncryptionKey: make([]byte, 32), Profile: ProfileFAPI2, ClientKeys: keys})
	if err != nil {
		t.Fatal(err)
	}
	details := `[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"1000.00"},"creditorAccount":{"iban":"DE89370400440532013000"}}]`
	authURL, state, err := p.BeginStepUp(context.Background(), StepUp{Ref: "ref", SessionRef: "s", ACRValues: []string{"urn:bff:acr:mfa"},
		MaxAge: time.Minute, Details: []byte(details)}, "/pay", nil)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(authURL)
	if got := u.Query(); len(got) != 2 || got.Get("client_id") != "bff" || got.Get("request_uri") == "" || u.Path != "/auth" {
		t.Fatalf("the browser's URL %s carries more than client_id and request_uri", authURL)
	}
	if strings.Contains(authURL, "1000") || strings.Contains(authURL, "DE89") {
		t.Fatalf("the payment is in the browser's URL: %s", authURL)
	}
	pushed := op.pushed[0]
	for k, want := range map[string]string{"response_type": "code", "client_id": "bff", "redirect_uri": "https://bff.example/auth/callback",
		"state": state, "code_challenge_method": "S256", "authorization_details": details, "prompt": "login", "acr_values": "urn:bff:acr:mfa"} {
		if got := pushed.Get(k); got != want {
			t.Errorf("pushed %s: got %q, want %q", k, got, want)
		}
	}
	if pushed.Get("dpop_jkt") == "" || pushed.Get("nonce") == "" || pushed.Get("code_challenge") == "" {
		t.Fatalf("the pushed request lacks dpop_jkt, nonce or PKCE: %v", pushed)
	}

	res, err := p.Callback(context.Background(), state, "the-code", op.srv.URL, "")
	if err != nil {
		t.Fatalf("Callback: %v", err)
	}
	if res.UserID != "alice" || res.StepUp == nil || res.StepUp.ACR != "urn:bff:acr:mfa" || string(res.StepUp.Details) != details {
		t.Fatalf("result %+v %+v", res, res.StepUp)
	}
	if op.nonceFor != 1 || len(op.tokens) != 2 {
		t.Fatalf("token requests: %d, nonce asked %d times; want the nonce retry once", len(op.tokens), op.nonceFor)
	}
	for _, f := range op.tokens {
		if f.Get("code_verifier") == "" || f.Get("code") != "the-code" || f.Get("client_secret") != "" {
			t.Fatalf("token request %v", f)
		}
	}
	if len(op.jtis) != 3 {
		t.Fatalf("%d distinct assertion ids for 3 requests: %v", len(op.jtis), op.jtis)
	}

	// The next login uses the nonce the provider gave: no second try.
	login := func() {
		t.Helper()
		_, state, err := p.Begin(context.Background(), "/", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Callback(context.Background(), state, "the-code", op.srv.URL, ""); err != nil {
			t.Fatalf("Callback: %v", err)
		}
	}
	login()
	if op.nonceFor != 1 || len(op.tokens) != 3 {
		t.Fatalf("a second login: %d token requests in all, nonce asked %d times; want the remembered nonce used", len(op.tokens), op.nonceFor)
	}
	// The provider moved to a new nonce: one more try, with it.
	op.mu.Lock()
	op.nonce = "nonce-2"
	op.mu.Unlock()
	login()
	if op.nonceFor != 2 || len(op.tokens) != 5 {
		t.Fatalf("after the provider's new nonce: %d token requests in all, nonce asked %d times; want one retry", len(op.tokens), op.nonceFor)
	}
}

// The fapi2 profile requires the response's iss even where the provider
// forgot to advertise it: a callback without it is no login.
func TestFAPI2NeedsTheResponsesIssuer(t *testing.T) {
	keys, _ := ParseClientKeys(privateJWKS(t, ecKey(t, elliptic.P256())), "")
	op := newFAPIOP(t, keys.PublicJWKS())
	p, err := New(context.Background(), Options{Issuer: op.srv.URL, ClientID: "bff", RedirectURL: "https://bff.example/auth/callback",
		UserIDClaim: "sub", Store: kv.NewMemory(nil), EncryptionKey: make([]byte, 32), Profile: ProfileFAPI2, ClientKeys: keys})
	if err != nil {
		t.Fatal(err)
	}
	_, state, err := p.Begin(context.Background(), "/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Callback(context.Background(), state, "the-code", "", ""); !errors.Is(err, ErrIssuer) {
		t.Fatalf("a callback without iss: got %v, want ErrIssuer", err)
	}
	if len(op.tokens) != 0 {
		t.Fatal("the code was redeemed after a response without iss")
	}
}

// Start-up with the fapi2 profile refuses a provider that lacks any of
// what the profile needs, naming each thing missing.
func TestFAPI2RefusesAProviderWithoutTheProfile(t *testing.T) {
	keys, _ := ParseClientKeys(privateJWKS(t, ecKey(t, elliptic.P256())), "")
	for _, tc := range []struct {
		drop string // discovery member removed
		want string
	}{
		{"pushed_authorization_request_endpoint", "PAR"},
		{"token_endpoint_auth_methods_supported", "private_key_jwt"},
		{"authorization_response_iss_parameter_supported", "RFC 9207"},
		{"dpop_signing_alg_values_supported", "DPoP"},
		{"code_challenge_methods_supported", "PKCE"},
	} {
		op := newFAPIOP(t, keys.PublicJWKS())
		delete(op.meta, tc.drop)
		_, err := New(context.Background(), Options{Issuer: op.srv.URL, ClientID: "bff", RedirectURL: "https://x/cb", UserIDClaim: "sub",
			Store: kv.NewMemory(nil), EncryptionKey: make([]byte, 32), Profile: ProfileFAPI2, ClientKeys: keys})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("without %s: got %v, want a refusal naming %s", tc.drop, err, tc.want)
		}
	}
	op := newFAPIOP(t, keys.PublicJWKS())
	if _, err := New(context.Background(), Options{Issuer: op.srv.URL, ClientID: "bff", RedirectURL: "https://x/cb", UserIDClaim: "sub",
		Store: kv.NewMemory(nil), EncryptionKey: make([]byte, 32), Profile: ProfileFAPI2, ClientSecret: "s"}); err == nil || !strings.Contains(err.Error(), "client_keys_file") {
		t.Errorf("fapi2 without client keys: got %v", err)
	}
}

// Without the profile, PAR is used whenever the provider offers it, and a
// secret still authenticates the client (client_secret_basic).
func TestPARWhenOfferedWithASecret(t *testing.T) {
	var pushed url.Values
	var basic string
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": srv.URL, "authorization_endpoint": srv.URL + "/auth",
			"token_endpoint": srv.URL + "/token", "jwks_uri": srv.URL + "/jwks", "pushed_authorization_request_endpoint": srv.URL + "/par"})
	})
	mux.HandleFunc("/par", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		pushed = r.PostForm
		basic = r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"request_uri":"urn:x","expires_in":60}`))
	})
	p, err := New(context.Background(), Options{Issuer: srv.URL, ClientID: "bff", ClientSecret: "s3cret", RedirectURL: "https://x/cb",
		UserIDClaim: "sub", Store: kv.NewMemory(nil), EncryptionKey: make([]byte, 32)})
	if err != nil {
		t.Fatal(err)
	}
	authURL, _, err := p.Begin(context.Background(), "/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if u, _ := url.Parse(authURL); u.Query().Get("request_uri") != "urn:x" || len(u.Query()) != 2 {
		t.Fatalf("auth URL %s", authURL)
	}
	if basic != "Basic "+base64.StdEncoding.EncodeToString([]byte("bff:s3cret")) || pushed.Get("client_secret") != "" || pushed.Get("dpop_jkt") != "" {
		t.Fatalf("PAR authenticated with %q, form %v", basic, pushed)
	}
}
