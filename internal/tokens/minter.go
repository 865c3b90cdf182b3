// Package tokens gets each user's upstream access token: minted at the
// upstream's POST /oauth/token with the client secret, which never leaves the
// server, and cached, encrypted, in the shared store.
//
// The package is plain Go: no HTTP framework, no proxy.
package tokens

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Token is an upstream access token and when it stops working.
type Token struct {
	Value  string
	Expiry time.Time
}

// Source hands out a user's upstream token. The Minter and the Cache both
// implement it, the way x/oauth2's reuseTokenSource wraps a TokenSource.
type Source interface {
	Token(ctx context.Context, userID string) (Token, error)
}

// Kind classifies a failed mint so the proxy can answer with the right code.
type Kind int

// Kinds of mint failure.
const (
	KindAuth        Kind = iota + 1 // 401: the client credentials were refused
	KindRejected                    // other 4xx: the request was refused (e.g. a bad userId)
	KindUpstream                    // 5xx or an unreadable reply
	KindTimeout                     // no reply in time
	KindUnreachable                 // no connection
)

func (k Kind) String() string {
	switch k {
	case KindAuth:
		return "auth"
	case KindRejected:
		return "rejected"
	case KindUpstream:
		return "upstream"
	case KindTimeout:
		return "timeout"
	case KindUnreachable:
		return "unreachable"
	}
	return "unknown"
}

// MintError is a failed mint. Its text never holds the secret or a token.
type MintError struct {
	Kind   Kind
	Status int   // the token endpoint's HTTP status, 0 without a reply
	Err    error // the cause, safe to log
}

func (e *MintError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("tokens: mint failed (%s, status %d): %v", e.Kind, e.Status, e.Err)
	}
	return fmt.Sprintf("tokens: mint failed (%s): %v", e.Kind, e.Err)
}

func (e *MintError) Unwrap() error { return e.Err }

// MinterOptions configures a Minter.
type MinterOptions struct {
	BaseURL  string // the upstream base URL; the token endpoint is BaseURL + "/oauth/token"
	ClientID string
	// Secret is the client secret (the one the Cache in front subscribes
	// to); its Current value is sent with every mint, so a rotated secret
	// (SIGHUP) takes effect at once.
	Secret *Secret
	// ExpiresInUnit is the unit of expiresIn when the token is not a JWT
	// with an exp claim: time.Second or time.Millisecond.
	ExpiresInUnit time.Duration
	Client        *http.Client
	Now           func() time.Time
}

// Minter mints tokens at the upstream's token endpoint. Safe for concurrent use.
type Minter struct {
	url      string
	clientID string
	secret   *Secret
	unit     time.Duration
	client   *http.Client
	now      func() time.Time
}

var _ Source = (*Minter)(nil)

// NewMinter returns a Minter.
func NewMinter(o MinterOptions) *Minter {
	if o.Client == nil {
		o.Client = http.DefaultClient
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ExpiresInUnit == 0 {
		o.ExpiresInUnit = time.Second
	}
	return &Minter{
		url: strings.TrimSuffix(o.BaseURL, "/") + "/oauth/token", clientID: o.ClientID,
		secret: o.Secret, unit: o.ExpiresInUnit, client: o.Client, now: o.Now,
	}
}

type mintRequest struct {
	ClientID     string `json:"clientId"`
	ClientSecret string `json:"clientSecret"`
	UserID       string `json:"userId"`
}

type mintReply struct {
	AccessToken string      `json:"accessToken"`
	TokenType   string      `json:"tokenType"`
	ExpiresIn   json.Number `json:"expiresIn"`
}

// Token mints a new token for userID.
func (m *Minter) Token(ctx context.Context, userID string) (Token, error) {
	body, err := json.Marshal(mintRequest{ClientID: m.clientID, ClientSecret: m.secret.Current(), UserID: userID})
	if err != nil {
		return Token{}, &MintError{Kind: KindUpstream, Err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.url, bytes.NewReader(body))
	if err != nil {
		return Token{}, &MintError{Kind: KindUnreachable, Err: errors.New("bad token endpoint URL")}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := m.client.Do(req)
	if err != nil {
		return Token{}, &MintError{Kind: transportKind(err), Err: scrubURL(err)}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return Token{}, &MintError{Kind: transportKind(err), Status: resp.StatusCode, Err: scrubURL(err)}
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return Token{}, &MintError{Kind: KindAuth, Status: resp.StatusCode, Err: errors.New("client credentials refused")}
	case resp.StatusCode >= 500:
		return Token{}, &MintError{Kind: KindUpstream, Status: resp.StatusCode, Err: errors.New("token endpoint failed")}
	case resp.StatusCode >= 400:
		return Token{}, &MintError{Kind: KindRejected, Status: resp.StatusCode, Err: errors.New("token request refused")}
	case resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated:
		return Token{}, &MintError{Kind: KindUpstream, Status: resp.StatusCode, Err: errors.New("unexpected token endpoint status")}
	}
	var r mintReply
	if err := json.Unmarshal(raw, &r); err != nil || r.AccessToken == "" {
		return Token{}, &MintError{Kind: KindUpstream, Status: resp.StatusCode, Err: errors.New("unreadable token reply")}
	}
	if r.TokenType != "" && !strings.EqualFold(r.TokenType, "Bearer") {
		return Token{}, &MintError{Kind: KindUpstream, Status: resp.StatusCode, Err: fmt.Errorf("token type %q is not Bearer", r.TokenType)}
	}
	return Token{Value: r.AccessToken, Expiry: m.expiry(r)}, nil
}

// expiry is the JWT exp claim when the token carries one (read without
// verifying: it is the upstream's own token, and exp wins over expiresIn:
// docs/configuration.md, upstream.expires_in_unit), else now + expiresIn in the configured unit.
func (m *Minter) expiry(r mintReply) time.Time {
	if exp, ok := jwtExpiry(r.AccessToken); ok {
		return exp
	}
	now := m.now()
	n, err := r.ExpiresIn.Float64()
	if err != nil || n <= 0 {
		return now // unknown lifetime: used once, never cached
	}
	return now.Add(time.Duration(n * float64(m.unit)))
}

func transportKind(err error) Kind {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return KindTimeout
	}
	return KindUnreachable
}

// scrubURL reduces a transport error to its operation and cause, without
// the upstream URL or address: log lines name neither.
func scrubURL(err error) error {
	var op *net.OpError
	if errors.As(err, &op) {
		return fmt.Errorf("%s: %w", op.Op, op.Err)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
