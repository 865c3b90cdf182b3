package login

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/fintech-bff/bff/internal/signing"
)

// The client's requests to the provider's back channel: the pushed
// authorization request (RFC 9126) and the token request, each
// authenticated with the client's secret or a signed assertion (RFC 7523),
// the token request with a DPoP proof (RFC 9449) when the login is bound
// to a key. x/oauth2's Exchange knows neither assertions nor DPoP nonces,
// so both requests are made here, as one small form POST each.

// ProfileFAPI2 is auth.oidc.profile's FAPI 2.0 Security Profile: PAR,
// private_key_jwt, the response's iss and DPoP at the token endpoint, all
// required of the provider at start.
const ProfileFAPI2 = "fapi2"

const (
	// assertionType is RFC 7523's client_assertion_type.
	assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
	// assertionTTL is a client assertion's lifetime: it is used at once.
	assertionTTL = 60 * time.Second
	// maxProviderReply bounds a PAR or token response.
	maxProviderReply = 1 << 20
)

// ClientKeys are the client's own signing keys for private_key_jwt: one
// active key signs every assertion; all of them are published (PublicJWKS)
// so that a key being rotated in or out still verifies at the provider.
type ClientKeys = signing.Keys

// ParseClientKeys reads a JWK Set of private keys (EC P-256: ES256,
// Ed25519: EdDSA, RSA of 2048 bits or more: PS256; each with a kid, and
// any use or alg it states true of it) and makes the one whose kid is
// activeKID, or the first when it is empty, the active key.
func ParseClientKeys(jwks []byte, activeKID string) (*ClientKeys, error) {
	k, err := signing.Parse(jwks, activeKID, signing.ES256, signing.EdDSA, signing.PS256)
	if err != nil {
		return nil, fmt.Errorf("login: client keys: %w", err)
	}
	return k, nil
}

// assertion is a private_key_jwt client assertion (RFC 7523 section 3):
// iss and sub the client, aud the issuer (FAPI 2.0 section 5.3.2.1), a
// fresh jti, valid for assertionTTL.
func assertion(k *ClientKeys, clientID, issuer string, now time.Time) (string, error) {
	claims, err := json.Marshal(jwt.Claims{
		Issuer: clientID, Subject: clientID, Audience: jwt.Audience{issuer}, ID: random(),
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now.Add(-5 * time.Second)),
		Expiry: jwt.NewNumericDate(now.Add(assertionTTL)),
	})
	if err != nil {
		return "", err
	}
	return k.Sign(claims, "JWT")
}

// proofKey is a login's DPoP key (RFC 9449): made when the login starts,
// its thumbprint sent to the provider as dpop_jkt, kept (sealed) in the
// login's state, so the instance that takes the callback proves the same
// key at the token endpoint.
type proofKey struct{ priv *ecdsa.PrivateKey }

func newProofKey() (proofKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	return proofKey{k}, err
}

// marshal is the key's PKCS #8 form, base64url, for the login's state.
func (k proofKey) marshal() string {
	b, _ := x509.MarshalPKCS8PrivateKey(k.priv)
	return base64.RawURLEncoding.EncodeToString(b)
}

func parseProofKey(s string) (proofKey, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return proofKey{}, err
	}
	k, err := x509.ParsePKCS8PrivateKey(b)
	if err != nil {
		return proofKey{}, err
	}
	ec, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return proofKey{}, errors.New("not an EC key")
	}
	return proofKey{ec}, nil
}

// thumbprint is the key's JWK SHA-256 thumbprint (RFC 7638), base64url:
// the dpop_jkt of the authorization request.
func (k proofKey) thumbprint() string {
	t, _ := (&jose.JSONWebKey{Key: &k.priv.PublicKey}).Thumbprint(crypto.SHA256)
	return base64.RawURLEncoding.EncodeToString(t)
}

// proof is a DPoP proof for a POST to target, with the provider's nonce
// when it asked for one. Its htu is target without query and fragment
// (RFC 9449 section 4.2).
func (k proofKey) proof(target, nonce string, now time.Time) (string, error) {
	htu, err := url.Parse(target)
	if err != nil {
		return "", err
	}
	htu.RawQuery, htu.ForceQuery, htu.Fragment, htu.RawFragment = "", false, "", ""
	opts := (&jose.SignerOptions{EmbedJWK: true}).WithType("dpop+jwt")
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k.priv}, opts)
	if err != nil {
		return "", err
	}
	claims := map[string]any{"jti": random(), "htm": http.MethodPost, "htu": htu.String(), "iat": now.Unix()}
	if nonce != "" {
		claims["nonce"] = nonce
	}
	b, _ := json.Marshal(claims)
	jws, err := signer.Sign(b)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}

// clientAuth is how the client authenticates at the back channel.
type clientAuth int

const (
	authNone          clientAuth = iota // a public client: client_id only
	authSecretBasic                     // client_secret_basic (RFC 6749 2.3.1)
	authSecretPost                      // client_secret_post
	authPrivateKeyJWT                   // private_key_jwt (RFC 7523)
)

// tokenReply is what the BFF reads of a token response.
type tokenReply struct {
	IDToken   string `json:"id_token"`
	TokenType string `json:"token_type"`
	// Details is RFC 9396's authorization_details, as the provider sent it.
	Details json.RawMessage `json:"authorization_details"`
}

// oauthError is an OAuth error response (RFC 6749 5.2).
type oauthError struct {
	Status      int    `json:"-"` // the response's, never the body's
	Code        string `json:"error"`
	Description string `json:"error_description"`
}

func (e *oauthError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("status %d", e.Status)
	}
	return fmt.Sprintf("status %d, %s", e.Status, sanitize(e.Code))
}

// post sends a form to one of the provider's back-channel endpoints,
// authenticated as the client, with a DPoP proof of key when key is set
// (retried once with the provider's DPoP-Nonce when it asks for one,
// RFC 9449 section 8), and decodes a JSON answer of status want into out.
func (p *Provider) post(ctx context.Context, target string, form url.Values, key *proofKey, want int, out any) error {
	if err := p.authenticate(form); err != nil {
		return err
	}
	// The provider's last nonce for this endpoint, if any: providers
	// accept one for a while (RFC 9449 section 8), which spares a round
	// trip per login; a stale one is answered use_dpop_nonce like none.
	nonce := p.lastNonce(target)
	for try := 0; ; try++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, strings.NewReader(form.Encode()))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Accept", "application/json")
		if p.auth == authSecretBasic {
			// RFC 6749 2.3.1: both form-encoded before Basic's own encoding.
			req.SetBasicAuth(url.QueryEscape(p.clientID), url.QueryEscape(p.secret))
		}
		if key != nil {
			proof, err := key.proof(target, nonce, p.now())
			if err != nil {
				return err
			}
			req.Header.Set("DPoP", proof)
		}
		resp, err := p.backChannel.Do(req)
		if err != nil {
			return err
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxProviderReply))
		resp.Body.Close()
		if err != nil {
			return err
		}
		// A nonce comes with a refusal (use_dpop_nonce) or, the next one,
		// with a success (RFC 9449 section 8.2): either is the one to use.
		if n := resp.Header.Get("DPoP-Nonce"); key != nil && n != "" {
			p.nonces.Store(target, n)
		}
		if resp.StatusCode == want {
			if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
				return fmt.Errorf("the answer is %q, not JSON", mt)
			}
			return json.Unmarshal(body, out)
		}
		oe := &oauthError{Status: resp.StatusCode}
		_ = json.Unmarshal(body, oe)
		if n := resp.Header.Get("DPoP-Nonce"); key != nil && try == 0 && oe.Code == "use_dpop_nonce" && n != "" {
			nonce = n
			// A client assertion is single use (its jti): a new one.
			if err := p.authenticate(form); err != nil {
				return err
			}
			continue
		}
		return oe
	}
}

// lastNonce is the DPoP-Nonce the provider last sent from target.
func (p *Provider) lastNonce(target string) string {
	n, _ := p.nonces.Load(target)
	s, _ := n.(string)
	return s
}

// authenticate adds the client's authentication to a back-channel form
// (client_secret_basic goes in the request's header, in post).
func (p *Provider) authenticate(form url.Values) error {
	if p.auth != authSecretBasic {
		form.Set("client_id", p.clientID)
	}
	switch p.auth {
	case authSecretPost:
		form.Set("client_secret", p.secret)
	case authPrivateKeyJWT:
		a, err := assertion(p.keys, p.clientID, p.issuer, p.now())
		if err != nil {
			return err
		}
		form.Set("client_assertion_type", assertionType)
		form.Set("client_assertion", a)
	}
	return nil
}

// push sends an authorization request's parameters to the provider's
// pushed authorization request endpoint (RFC 9126) and returns what the
// browser carries instead: the authorization endpoint with client_id and
// request_uri only.
func (p *Provider) push(ctx context.Context, params url.Values) (string, error) {
	var reply struct {
		RequestURI string `json:"request_uri"`
		ExpiresIn  int    `json:"expires_in"`
	}
	if err := p.post(ctx, p.par, params, nil, http.StatusCreated, &reply); err != nil {
		return "", fmt.Errorf("%w: the pushed authorization request failed: %v", ErrProvider, err)
	}
	if reply.RequestURI == "" {
		return "", fmt.Errorf("%w: the pushed authorization request's answer has no request_uri", ErrProvider)
	}
	u, err := url.Parse(p.authURL)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("client_id", p.clientID)
	q.Set("request_uri", reply.RequestURI)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// exchange redeems an authorization code at the token endpoint, with the
// PKCE verifier and, for a DPoP-bound login, a proof of its key.
func (p *Provider) exchange(ctx context.Context, code, verifier string, key *proofKey) (tokenReply, error) {
	form := url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {code},
		"redirect_uri":  {p.redirect},
		"code_verifier": {verifier},
	}
	var reply tokenReply
	if err := p.post(ctx, p.tokenURL, form, key, http.StatusOK, &reply); err != nil {
		return tokenReply{}, err
	}
	// The profile's tokens are sender-constrained; elsewhere a provider
	// that offers DPoP may still answer Bearer (the BFF uses only the ID
	// token and the granted details).
	if p.fapi2 && !strings.EqualFold(reply.TokenType, "DPoP") {
		return tokenReply{}, fmt.Errorf("the token is %q, not DPoP-bound", sanitize(reply.TokenType))
	}
	return reply, nil
}
