// Package login is OpenID Connect login for the BFF: the authorization-code
// flow with PKCE (S256), state and nonce for browsers; its RFC 8252 variant
// for native apps, which end with a one-time code bound to the app's own
// PKCE challenge; and back-channel logout tokens. Login state lives in the
// shared store, so the callback may reach any instance. With the provider's
// pushed authorization requests, client assertions and DPoP, it is a FAPI
// 2.0 client (the fapi2 profile, client.go).
//
// The package is plain Go: no HTTP framework. It uses coreos/go-oidc for
// discovery and ID token verification, and go-jose for the client's own
// signatures. The two back-channel requests (the pushed request and the
// code exchange) are a form POST each, written here: x/oauth2, which the
// package used before, has neither client assertions nor DPoP nonces, and
// a second way of making the same request would be one more to test.
package login

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/seal"
)

// Lifetimes of the login's own records.
const (
	// StateTTL bounds a login from redirect to callback.
	StateTTL = 10 * time.Minute
	// MobileCodeTTL bounds the one-time code handed to a native app.
	MobileCodeTTL = 60 * time.Second
	// replayTTL remembers the ids of back-channel logout tokens.
	replayTTL = 10 * time.Minute
)

// backchannelEvent is the event a logout token must carry.
const backchannelEvent = "http://schemas.openid.net/event/backchannel-logout"

// Errors, each safe to show. The edge maps them to problems.
var (
	// ErrBadRequest: the request's parameters are not acceptable; the
	// error is a *BadRequest, whose Reason is safe to show the client.
	ErrBadRequest = errors.New("login: bad request")
	// ErrState: unknown, expired, replayed or unbound state.
	ErrState = errors.New("login: the login state is unknown, expired or already used")
	// ErrProvider: the provider refused or failed the login.
	ErrProvider = errors.New("login: the provider did not complete the login")
	// ErrIssuer: the authorization response's iss is not the provider's
	// issuer, or is missing where the provider sends it (RFC 9207, the
	// mix-up defence): the response is not the provider's word, not even
	// a refusal. It wraps ErrProvider.
	ErrIssuer = fmt.Errorf("%w: the response's issuer (iss) is not the provider's", ErrProvider)
	// ErrInvalidGrant: the mobile code is unknown, used, expired, or the
	// verifier does not match its challenge.
	ErrInvalidGrant = errors.New("login: the code is invalid, used or expired, or the verifier does not match")
	// ErrLogoutToken: a back-channel logout token failed validation.
	ErrLogoutToken = errors.New("login: invalid logout token")
)

// Store is what login needs of the shared store.
type Store interface {
	Set(ctx context.Context, key string, value []byte, ttl time.Duration) error
	GetDel(ctx context.Context, key string) ([]byte, error)
	SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error)
}

var (
	_ Store = (*kv.Redis)(nil)
	_ Store = (*kv.Memory)(nil)
)

// BadRequest is an ErrBadRequest with its reason, written for the client.
type BadRequest struct{ Reason string }

func (e *BadRequest) Error() string { return "login: bad request: " + e.Reason }

// Is makes errors.Is(err, ErrBadRequest) hold.
func (e *BadRequest) Is(target error) bool { return target == ErrBadRequest }

func badRequest(format string, args ...any) error {
	return &BadRequest{Reason: fmt.Sprintf(format, args...)}
}

// Options configures a Provider.
type Options struct {
	Issuer       string
	ClientID     string
	ClientSecret string
	RedirectURL  string // the BFF's /auth/callback
	Scopes       []string
	UserIDClaim  string
	// PostLogoutRedirectURL is where the provider sends the browser after
	// RP-initiated logout.
	PostLogoutRedirectURL string
	// MobileRedirectURIs is the exact-match allowlist for native apps.
	MobileRedirectURIs []string
	Store              Store
	// EncryptionKey (32 bytes) seals pending logins in the store: they hold
	// the PKCE verifier and the nonce. Logins sealed under one of
	// DecryptionKeys still open, so none breaks across a key rotation.
	EncryptionKey  []byte
	DecryptionKeys [][]byte
	HTTPClient     *http.Client
	Now            func() time.Time
	// Observe, when set, is told of each fetch of the provider's signing
	// keys (metrics).
	Observe Observer
	// Profile is "" or ProfileFAPI2, whose needs New checks against the
	// provider's discovery document.
	Profile string
	// ClientKeys, when set, authenticate the client with private_key_jwt
	// (RFC 7523) instead of ClientSecret; the fapi2 profile needs them.
	ClientKeys *ClientKeys
}

// Observer receives a Provider's events. Implementations must be cheap and
// safe for concurrent use.
type Observer interface {
	// KeysFetched reports a fetch of the provider's signing keys (its
	// jwks_uri) that ended, whether or not it succeeded.
	KeysFetched()
}

type nopObserver struct{}

func (nopObserver) KeysFetched() {}

// Provider runs logins against one OpenID provider. Safe for concurrent use.
type Provider struct {
	scopes     []string
	clientID   string
	secret     string
	auth       clientAuth
	keys       *ClientKeys // private_key_jwt; nil: none
	redirect   string
	authURL    string
	tokenURL   string
	par        string   // pushed_authorization_request_endpoint; "": front channel
	dpop       bool     // DPoP at the token endpoint, dpop_jkt with the request
	nonces     sync.Map // target URL → the provider's last DPoP-Nonce (string)
	fapi2      bool
	verifier   *oidc.IDTokenVerifier
	endSession string
	claim      string
	postLogout string
	mobile     []string
	store      Store
	box        *seal.Box
	client     *http.Client
	now        func() time.Time
	details    []string // authorization_details_types_supported
	issuer     string
	// issParam: the provider puts iss in its authorization responses
	// (authorization_response_iss_parameter_supported), so one without
	// it is refused.
	issParam bool
	// backChannel is client without redirects, for the pushed request and
	// the code exchange (client.go's post).
	backChannel *http.Client
}

// New discovers the provider (/.well-known/openid-configuration) and
// returns a Provider.
func New(ctx context.Context, o Options) (*Provider, error) {
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Observe == nil {
		o.Observe = nopObserver{}
	}
	box, err := seal.Derive(o.EncryptionKey, "bff login records", o.DecryptionKeys...)
	if err != nil {
		return nil, fmt.Errorf("login: encryption key: %w", err)
	}
	ctx = oidc.ClientContext(ctx, o.HTTPClient)
	p, err := oidc.NewProvider(ctx, o.Issuer)
	if err != nil {
		return nil, fmt.Errorf("login: discovering the OpenID provider: %w", err)
	}
	var meta struct {
		EndSession  string   `json:"end_session_endpoint"`
		Methods     []string `json:"code_challenge_methods_supported"`
		JWKS        string   `json:"jwks_uri"`
		Algs        []string `json:"id_token_signing_alg_values_supported"`
		Details     []string `json:"authorization_details_types_supported"`
		IssParam    bool     `json:"authorization_response_iss_parameter_supported"`
		PAR         string   `json:"pushed_authorization_request_endpoint"`
		AuthMethods []string `json:"token_endpoint_auth_methods_supported"`
		DPoPAlgs    []string `json:"dpop_signing_alg_values_supported"`
	}
	_ = p.Claims(&meta)
	if meta.JWKS == "" {
		return nil, errors.New("login: the OpenID provider's discovery document names no jwks_uri")
	}
	fapi2 := o.Profile == ProfileFAPI2
	switch o.Profile {
	case "", ProfileFAPI2:
	default:
		return nil, fmt.Errorf("login: profile %q is not one of \"\", %q", o.Profile, ProfileFAPI2)
	}
	idAlgs := supportedAlgs(meta.Algs)
	if fapi2 {
		// FAPI 2.0 section 5.4.1: PS256, ES256 or EdDSA, never RS256.
		idAlgs = slices.DeleteFunc(idAlgs, func(a string) bool { return !slices.Contains(fapi2Algs, jose.SignatureAlgorithm(a)) })
		missing := fapi2Missing(o, meta.PAR, meta.AuthMethods, meta.IssParam, meta.DPoPAlgs, meta.Methods)
		if len(idAlgs) == 0 {
			missing = append(missing, "PS256, ES256 or EdDSA in id_token_signing_alg_values_supported (FAPI 2.0 section 5.4.1)")
		}
		if len(missing) > 0 {
			return nil, fmt.Errorf("login: the fapi2 profile needs what the OpenID provider's discovery document does not offer: %s", strings.Join(missing, "; "))
		}
	}
	auth := authNone
	switch {
	case o.ClientKeys != nil:
		auth = authPrivateKeyJWT
	case o.ClientSecret != "" && len(meta.AuthMethods) > 0 && !slices.Contains(meta.AuthMethods, "client_secret_basic") && slices.Contains(meta.AuthMethods, "client_secret_post"):
		auth = authSecretPost
	case o.ClientSecret != "":
		auth = authSecretBasic
	}
	// The back-channel POSTs follow no redirect: a 307 or 308 would send
	// the form (the client's assertion or secret, the code and its
	// verifier) and the DPoP proof on to wherever it points; a 302 or 303
	// would read another URL's answer as the provider's.
	backChannel := *o.HTTPClient
	backChannel.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	scopes := o.Scopes
	if !slices.Contains(scopes, oidc.ScopeOpenID) {
		scopes = append([]string{oidc.ScopeOpenID}, scopes...)
	}
	return &Provider{
		clientID: o.ClientID, secret: o.ClientSecret, auth: auth, keys: o.ClientKeys, redirect: o.RedirectURL,
		authURL: p.Endpoint().AuthURL, tokenURL: p.Endpoint().TokenURL, par: meta.PAR,
		dpop: fapi2 || slices.Contains(meta.DPoPAlgs, string(jose.ES256)), fapi2: fapi2,
		scopes: scopes,
		verifier: oidc.NewVerifier(o.Issuer, &keySet{url: meta.JWKS, client: o.HTTPClient, now: o.Now, observe: o.Observe},
			&oidc.Config{ClientID: o.ClientID, Now: o.Now, SupportedSigningAlgs: idAlgs}),
		endSession: meta.EndSession,
		claim:      o.UserIDClaim,
		postLogout: o.PostLogoutRedirectURL,
		mobile:     o.MobileRedirectURIs,
		store:      o.Store,
		box:        box,
		client:     o.HTTPClient,
		now:        o.Now,
		details:    meta.Details,
		issuer:     o.Issuer,
		issParam:   meta.IssParam || fapi2,

		backChannel: &backChannel,
	}, nil
}

// fapi2Algs are the JWS algorithms FAPI 2.0 allows (section 5.4.1).
var fapi2Algs = []jose.SignatureAlgorithm{jose.PS256, jose.ES256, jose.EdDSA}

// fapi2Missing names what the fapi2 profile needs and the provider or the
// configuration lacks.
func fapi2Missing(o Options, par string, authMethods []string, issParam bool, dpopAlgs, pkce []string) []string {
	var missing []string
	if par == "" {
		missing = append(missing, "pushed_authorization_request_endpoint (PAR, RFC 9126)")
	}
	if !slices.Contains(authMethods, "private_key_jwt") {
		missing = append(missing, "private_key_jwt in token_endpoint_auth_methods_supported (RFC 7523)")
	}
	if !issParam {
		missing = append(missing, "authorization_response_iss_parameter_supported: true (RFC 9207)")
	}
	if !slices.Contains(dpopAlgs, string(jose.ES256)) {
		missing = append(missing, "ES256 in dpop_signing_alg_values_supported (DPoP, RFC 9449)")
	}
	if !slices.Contains(pkce, "S256") {
		missing = append(missing, "S256 in code_challenge_methods_supported (PKCE)")
	}
	if o.ClientKeys == nil {
		missing = append(missing, "the client's signing keys (auth.oidc.client_keys_file) for private_key_jwt")
	}
	return missing
}

// Pushes reports whether authorization requests go to the provider over
// the back channel (PAR): the browser then carries only client_id and
// request_uri.
func (p *Provider) Pushes() bool { return p.par != "" }

// ClientJWKS is the JWK Set of the client's public keys, or nil when the
// client authenticates without them.
func (p *Provider) ClientJWKS() []byte {
	if p.keys == nil {
		return nil
	}
	return p.keys.PublicJWKS()
}

// SupportsDetails reports whether the provider's discovery document lists
// the authorization_details type (RFC 9396, section 10).
func (p *Provider) SupportsDetails(typ string) bool { return slices.Contains(p.details, typ) }

// supportedAlgs is the provider's ID token algorithms that go-oidc
// verifies; none: go-oidc's default (RS256).
func supportedAlgs(offered []string) []string {
	var out []string
	for _, a := range offered {
		if slices.Contains(signingAlgs, jose.SignatureAlgorithm(a)) {
			out = append(out, a)
		}
	}
	return out
}

// Mobile is a native app's part of a login (RFC 8252).
type Mobile struct {
	RedirectURI   string `json:"r"`
	CodeChallenge string `json:"c"`
	AppState      string `json:"s,omitempty"` // echoed back to the app
}

// state is a pending login, stored under a hash of its state value.
type state struct {
	Verifier string  `json:"v"`
	Nonce    string  `json:"n"`
	ReturnTo string  `json:"t"`
	Mobile   *Mobile `json:"m,omitempty"`
	StepUp   *StepUp `json:"su,omitempty"`
	// ProofKey is the login's DPoP key (proofKey.marshal) when the
	// provider takes DPoP at its token endpoint.
	ProofKey string `json:"k,omitempty"`
}

// StepUp is a step-up authorization (RFC 9470): a fresh login at the
// provider, of a stronger class, that approves one held payment described
// by its authorization_details (RFC 9396).
type StepUp struct {
	// Ref names the held payment (payments' reference); SessionRef the
	// session that started the approval, which the callback checks.
	Ref        string `json:"r"`
	SessionRef string `json:"s"`
	// LoginHint is the user's subject at the provider, so the login page
	// starts from the right account.
	LoginHint string          `json:"h,omitempty"`
	ACRValues []string        `json:"a"`
	MaxAge    time.Duration   `json:"x"`
	Details   json.RawMessage `json:"d"`
}

// Approved is what a completed step-up proved: the authentication's class
// and time, and the authorization_details the provider granted.
type Approved struct {
	Ref        string          `json:"r"`
	SessionRef string          `json:"s"`
	ACR        string          `json:"a"`
	Details    json.RawMessage `json:"d"`
	// Refused: the provider answered with an error (the user cancelled).
	// A native app's code then carries the refusal, not an approval.
	Refused bool `json:"x,omitempty"`
}

// Begin starts a login: it stores the pending state and returns the
// provider's authorization URL and the state value, which the caller binds
// to the browser (a short-lived cookie) before redirecting.
//
// Anyone may start a login, so what it stores is bounded here whatever
// the caller checked: returnTo must pass CheckReturnTo and a native app's
// state CheckAppState, else ErrBadRequest and nothing is stored.
func (p *Provider) Begin(ctx context.Context, returnTo string, mobile *Mobile) (authURL, stateValue string, err error) {
	if _, err := CheckReturnTo(returnTo); err != nil {
		return "", "", err
	}
	if mobile != nil {
		if err := CheckAppState(mobile.AppState); err != nil {
			return "", "", err
		}
	}
	return p.begin(ctx, state{Verifier: random(), Nonce: random(), ReturnTo: returnTo, Mobile: mobile})
}

// BeginStepUp starts a step-up authorization for a held payment, as Begin
// starts a login: a fresh login (prompt=login, and max_age when set) of
// one of su.ACRValues, carrying su.Details as authorization_details, so
// the provider shows the user what they approve.
func (p *Provider) BeginStepUp(ctx context.Context, su StepUp, returnTo string, mobile *Mobile) (authURL, stateValue string, err error) {
	if _, err := CheckReturnTo(returnTo); err != nil {
		return "", "", err
	}
	if mobile != nil {
		if err := CheckAppState(mobile.AppState); err != nil {
			return "", "", err
		}
	}
	return p.begin(ctx, state{Verifier: random(), Nonce: random(), ReturnTo: returnTo, Mobile: mobile, StepUp: &su})
}

func (p *Provider) begin(ctx context.Context, st state) (authURL, stateValue string, err error) {
	var key proofKey
	if p.dpop {
		if key, err = newProofKey(); err != nil {
			return "", "", err
		}
		st.ProofKey = key.marshal()
	}
	stateValue = random()
	b, _ := json.Marshal(st)
	if err := p.store.Set(ctx, stateKey(stateValue), p.seal(stateKey(stateValue), b), StateTTL); err != nil {
		return "", "", err
	}
	params := url.Values{
		"response_type":         {"code"},
		"client_id":             {p.clientID},
		"redirect_uri":          {p.redirect},
		"scope":                 {strings.Join(p.scopes, " ")},
		"state":                 {stateValue},
		"nonce":                 {st.Nonce},
		"code_challenge":        {S256(st.Verifier)},
		"code_challenge_method": {"S256"},
	}
	if su := st.StepUp; su != nil {
		params.Set("prompt", "login")
		params.Set("acr_values", strings.Join(su.ACRValues, " "))
		params.Set("authorization_details", string(su.Details))
		if su.MaxAge > 0 {
			params.Set("max_age", strconv.FormatInt(int64(su.MaxAge/time.Second), 10))
		}
		if su.LoginHint != "" {
			params.Set("login_hint", su.LoginHint)
		}
	}
	if p.par == "" {
		u, err := url.Parse(p.authURL)
		if err != nil {
			return "", "", err
		}
		q := u.Query()
		for k, v := range params {
			q[k] = v
		}
		u.RawQuery = q.Encode()
		return u.String(), stateValue, nil
	}
	if p.dpop {
		params.Set("dpop_jkt", key.thumbprint())
	}
	authURL, err = p.push(ctx, params)
	return authURL, stateValue, err
}

// Result is a completed login.
type Result struct {
	UserID   string    `json:"u"`
	Sub      string    `json:"s"`
	SID      string    `json:"i,omitempty"`
	AuthTime time.Time `json:"a"`
	ReturnTo string    `json:"-"`
	Mobile   *Mobile   `json:"-"`
	// StepUp is set when the login was a step-up (BeginStepUp): what it
	// proved, for the caller to check against the held payment.
	StepUp *Approved `json:"su,omitempty"`
}

// Callback completes a login: the state is used once, the code exchanged
// with the PKCE verifier, the ID token verified (signature, issuer,
// audience, expiry, nonce) and the user id read from the configured claim.
// iss is the response's iss parameter (RFC 9207): when present it must be
// the issuer, and it must be present when the provider says it sends it.
// providerError is the callback's error parameter, if any.
func (p *Provider) Callback(ctx context.Context, stateValue, code, iss, providerError string) (Result, error) {
	if stateValue == "" {
		return Result{}, ErrState
	}
	b, err := p.store.GetDel(ctx, stateKey(stateValue))
	if errors.Is(err, kv.ErrNotFound) {
		return Result{}, ErrState
	}
	if err != nil {
		return Result{}, err
	}
	var st state
	if plain, err := p.open(stateKey(stateValue), b); err != nil || json.Unmarshal(plain, &st) != nil {
		return Result{}, ErrState
	}
	res := Result{ReturnTo: st.ReturnTo, Mobile: st.Mobile}
	if su := st.StepUp; su != nil {
		// Which hold this was, also when it failed (the caller declines
		// the payment the user cancelled); what it proved, below, only
		// when it succeeded.
		res.StepUp = &Approved{Ref: su.Ref, SessionRef: su.SessionRef}
	}
	if (iss != "" || p.issParam) && subtle.ConstantTimeCompare([]byte(iss), []byte(p.issuer)) != 1 {
		return res, ErrIssuer
	}
	if providerError != "" {
		return res, fmt.Errorf("%w: %s", ErrProvider, sanitize(providerError))
	}
	if code == "" {
		return res, fmt.Errorf("%w: no code", ErrProvider)
	}
	var key *proofKey
	if st.ProofKey != "" {
		k, err := parseProofKey(st.ProofKey)
		if err != nil {
			return res, ErrState
		}
		key = &k
	}
	tok, err := p.exchange(ctx, code, st.Verifier, key)
	if err != nil {
		return res, fmt.Errorf("%w: the code exchange failed: %v", ErrProvider, err)
	}
	octx := oidc.ClientContext(ctx, p.client)
	raw := tok.IDToken
	if raw == "" {
		return res, fmt.Errorf("%w: no id_token", ErrProvider)
	}
	idt, err := p.verifier.Verify(octx, raw)
	if err != nil {
		return res, fmt.Errorf("%w: the ID token did not verify", ErrProvider)
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(st.Nonce)) != 1 {
		return res, fmt.Errorf("%w: nonce mismatch", ErrProvider)
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return res, fmt.Errorf("%w: unreadable claims", ErrProvider)
	}
	uid, _ := claims[p.claim].(string)
	if uid == "" {
		return res, fmt.Errorf("%w: the ID token has no %q claim", ErrProvider, p.claim)
	}
	res.UserID, res.Sub = uid, idt.Subject
	res.SID, _ = claims["sid"].(string)
	res.AuthTime = p.now()
	if at, ok := claims["auth_time"].(float64); ok && at > 0 {
		res.AuthTime = time.Unix(int64(at), 0)
	}
	if su := st.StepUp; su != nil {
		// An approval proves nothing without the provider's own auth_time.
		if _, ok := claims["auth_time"].(float64); !ok {
			res.AuthTime = time.Time{}
		}
		a := res.StepUp
		a.ACR, _ = claims["acr"].(string)
		// RFC 9396, section 7: the details granted, in the token response.
		a.Details = json.RawMessage("null")
		if len(tok.Details) > 0 {
			a.Details = tok.Details
		}
	}
	return res, nil
}

// IssueMobileCode stores a completed mobile login under a fresh one-time
// code (single use, MobileCodeTTL) bound to the app's PKCE challenge, and
// returns the URL to send the app's browser to.
func (p *Provider) IssueMobileCode(ctx context.Context, res Result) (string, error) {
	if res.Mobile == nil {
		return "", badRequest("not a native-app login")
	}
	rec := struct {
		Result
		Challenge string `json:"c"`
	}{res, res.Mobile.CodeChallenge}
	b, _ := json.Marshal(rec)
	code := random()
	if err := p.store.Set(ctx, mobileKey(code), p.seal(mobileKey(code), b), MobileCodeTTL); err != nil {
		return "", err
	}
	u, err := url.Parse(res.Mobile.RedirectURI)
	if err != nil {
		return "", badRequest("redirect_uri is not a URL")
	}
	q := u.Query()
	q.Set("code", code)
	if res.Mobile.AppState != "" {
		q.Set("state", res.Mobile.AppState)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// RedeemMobileCode uses a mobile code once: it is gone afterwards whether
// or not the verifier matches its challenge (S256).
func (p *Provider) RedeemMobileCode(ctx context.Context, code, verifier string) (Result, error) {
	if code == "" || !validVerifier(verifier) {
		return Result{}, ErrInvalidGrant
	}
	b, err := p.store.GetDel(ctx, mobileKey(code))
	if errors.Is(err, kv.ErrNotFound) {
		return Result{}, ErrInvalidGrant
	}
	if err != nil {
		return Result{}, err
	}
	var rec struct {
		Result
		Challenge string `json:"c"`
	}
	if plain, err := p.open(mobileKey(code), b); err != nil || json.Unmarshal(plain, &rec) != nil {
		return Result{}, ErrInvalidGrant
	}
	if subtle.ConstantTimeCompare([]byte(S256(verifier)), []byte(rec.Challenge)) != 1 {
		return Result{}, ErrInvalidGrant
	}
	return rec.Result, nil
}

// S256 is the PKCE S256 challenge of a verifier (RFC 7636).
func S256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// LogoutURL is the provider's RP-initiated logout URL, or "" when the
// provider has no end_session_endpoint.
func (p *Provider) LogoutURL() string {
	if p.endSession == "" {
		return ""
	}
	u, err := url.Parse(p.endSession)
	if err != nil {
		return ""
	}
	q := u.Query()
	q.Set("client_id", p.clientID)
	if p.postLogout != "" {
		q.Set("post_logout_redirect_uri", p.postLogout)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// VerifyLogoutToken validates a back-channel logout token (OpenID Connect
// Back-Channel Logout 1.0, section 2.6): signature, issuer, audience and
// expiry; the back-channel event; sub or sid; no nonce; and a jti not seen
// before. It returns the sub and sid whose sessions end.
func (p *Provider) VerifyLogoutToken(ctx context.Context, raw string) (sub, sid string, err error) {
	idt, err := p.verifier.Verify(oidc.ClientContext(ctx, p.client), raw)
	if err != nil {
		return "", "", fmt.Errorf("%w: it did not verify", ErrLogoutToken)
	}
	var c struct {
		Events map[string]json.RawMessage `json:"events"`
		SID    string                     `json:"sid"`
		Nonce  *string                    `json:"nonce"`
		JTI    string                     `json:"jti"`
	}
	if err := idt.Claims(&c); err != nil {
		return "", "", fmt.Errorf("%w: unreadable claims", ErrLogoutToken)
	}
	if _, ok := c.Events[backchannelEvent]; !ok {
		return "", "", fmt.Errorf("%w: no back-channel logout event", ErrLogoutToken)
	}
	if c.Nonce != nil {
		return "", "", fmt.Errorf("%w: a logout token must not carry a nonce", ErrLogoutToken)
	}
	if idt.Subject == "" && c.SID == "" {
		return "", "", fmt.Errorf("%w: neither sub nor sid", ErrLogoutToken)
	}
	if c.JTI == "" {
		return "", "", fmt.Errorf("%w: no jti", ErrLogoutToken)
	}
	// The value is unique to this call: SetNX recognises its own re-sent
	// write, and a real replay of the jti must not look like one.
	fresh, err := p.store.SetNX(ctx, "bcl:"+hash(idt.Issuer+"\x00"+c.JTI), []byte(rand.Text()), replayTTL)
	if err != nil {
		return "", "", err
	}
	if !fresh {
		return "", "", fmt.Errorf("%w: replayed", ErrLogoutToken)
	}
	return idt.Subject, c.SID, nil
}

// seal encrypts a record with its store key as associated data.
func (p *Provider) seal(key string, plain []byte) []byte {
	return p.box.Seal(nil, plain, []byte(key))
}

func (p *Provider) open(key string, b []byte) ([]byte, error) {
	return p.box.Open(nil, b, []byte(key))
}

func stateKey(v string) string  { return "login:" + hash(v) }
func mobileKey(v string) string { return "mcode:" + hash(v) }

func hash(v string) string {
	sum := sha256.Sum256([]byte(v))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// random is 256 bits, URL-safe.
func random() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// sanitize keeps a provider's error code printable and short.
func sanitize(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	if len(s) > 64 {
		s = s[:64]
	}
	return s
}
