package upstreamsim

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Settings are the start-up options a running simulator can change: every
// flag of cmd/upstream-sim but the listen address, the client credentials
// (see RotateSecret), the control switch, -v, and -seed and -now (see
// LoadFixtures). Plan, ProductionAccess and Credits are the organization's
// state (Org shows them too).
type Settings struct {
	// UnauthorizedShape is the token endpoint's 401 body on bad
	// credentials: "message" or "typed" (Options.Unauthorized401Shape).
	UnauthorizedShape string `json:"unauthorizedShape"`
	// ExpiresInUnit is "seconds" or "milliseconds".
	ExpiresInUnit string `json:"expiresInUnit"`
	// TokenTTL is the lifetime of tokens minted from now on.
	TokenTTL time.Duration `json:"-"`
	// AccountCap is the corporate-account (connection) cap; 0 refuses
	// every new connection.
	AccountCap int `json:"accountCap"`
	// BigQueryLock makes deleting a connection younger than 90 minutes 423.
	BigQueryLock bool `json:"bigQueryLock"`
	// AllowedRedirectURLs is the redirect allow-list.
	AllowedRedirectURLs []string `json:"allowedRedirectURLs"`
	// PublicURL is the base of the consent links (Options.PublicURL); ""
	// means the scheme and Host of each API request.
	PublicURL        string `json:"publicURL"`
	Plan             string `json:"plan"`
	ProductionAccess bool   `json:"productionAccess"`
	// Credits is the organization's balance (per-user balances: Org).
	Credits int `json:"credits"`
	// WebhookURL is where payment-status webhooks are posted; "" posts
	// none (Options.WebhookURL).
	WebhookURL string `json:"webhookUrl"`
	// WebhookSecret is the Fingerprint of the secret webhooks are signed
	// with, never the secret: GET /_sim/settings shows it.
	WebhookSecret string `json:"webhookSecret"`
	// ReplyProfile is "full" or "documented" (Options.ReplyProfile).
	ReplyProfile string `json:"replyProfile"`
	// ListLag is how long a new payment stays out of the payment list
	// (Options.ListLag).
	ListLag time.Duration `json:"-"`
}

// SettingsPatch changes the settings whose fields are non-nil; see
// Settings for each. A nil AllowedRedirectURLs keeps the list; an empty
// one allows no redirect url.
type SettingsPatch struct {
	UnauthorizedShape   *string        `json:"unauthorizedShape"`
	ExpiresInUnit       *string        `json:"expiresInUnit"`
	TokenTTL            *time.Duration `json:"-"`
	AccountCap          *int           `json:"accountCap"`
	BigQueryLock        *bool          `json:"bigQueryLock"`
	AllowedRedirectURLs []string       `json:"allowedRedirectURLs"`
	PublicURL           *string        `json:"publicURL"`
	Plan                *string        `json:"plan"`
	ProductionAccess    *bool          `json:"productionAccess"`
	Credits             *int           `json:"credits"`
	WebhookURL          *string        `json:"webhookUrl"`
	// WebhookSecret is the secret itself: "whsec_" and the base64 of 24
	// to 64 bytes. It applies to webhooks queued from then on.
	WebhookSecret *string        `json:"webhookSecret"`
	ReplyProfile  *string        `json:"replyProfile"`
	ListLag       *time.Duration `json:"-"`
}

// SettingError is a refused SettingsPatch: Key is the JSON name of the
// setting at fault.
type SettingError struct {
	Key, Problem string
}

func (e *SettingError) Error() string { return fmt.Sprintf("%q %s", e.Key, e.Problem) }

// validate checks every non-nil field of p, in field order.
func (p SettingsPatch) validate() error {
	switch {
	case p.UnauthorizedShape != nil && *p.UnauthorizedShape != Shape401Message && *p.UnauthorizedShape != Shape401Typed:
		return &SettingError{"unauthorizedShape", `must be "message" or "typed"`}
	case p.ExpiresInUnit != nil && *p.ExpiresInUnit != UnitSeconds && *p.ExpiresInUnit != UnitMilliseconds:
		return &SettingError{"expiresInUnit", `must be "seconds" or "milliseconds"`}
	case p.TokenTTL != nil && *p.TokenTTL < time.Second:
		return &SettingError{"tokenTTL", `must be a duration of at least 1s, such as "15m"`}
	case p.AccountCap != nil && *p.AccountCap < 0:
		return &SettingError{"accountCap", "must be 0 or more"}
	case p.Plan != nil && !validPlan(*p.Plan):
		return &SettingError{"plan", "must be one of [free, starter, pro]"}
	case p.Credits != nil && *p.Credits < 0:
		return &SettingError{"credits", "must be 0 or more"}
	case p.WebhookURL != nil && !validWebhookURL(*p.WebhookURL):
		return &SettingError{"webhookUrl", `must be "" or an absolute http(s) URL without user info or fragment, such as "http://localhost:8080/webhooks/upstream"`}
	case p.ReplyProfile != nil && !validProfile(*p.ReplyProfile):
		return &SettingError{"replyProfile", `must be "full" or "documented"`}
	case p.ListLag != nil && *p.ListLag < 0:
		return &SettingError{"listLag", `must be a duration of 0 or more, such as "300ms"`}
	}
	if p.WebhookSecret != nil {
		if _, err := decodeWebhookSecret(*p.WebhookSecret); err != nil {
			return &SettingError{"webhookSecret", err.Error()} // the message never quotes the secret
		}
	}
	if p.PublicURL != nil && validPublicURL(*p.PublicURL) != nil {
		return &SettingError{"publicURL", `must be "" or an absolute http(s) URL without query or fragment, such as "http://localhost:8081"`}
	}
	for _, u := range p.AllowedRedirectURLs {
		if !redirectURLValid(u) {
			return &SettingError{"allowedRedirectURLs", fmt.Sprintf("must hold absolute URLs without query or fragment; got %q", u)}
		}
	}
	return nil
}

// redirectURLValid reports whether raw can be an allow-list entry: an
// absolute URL with no query or fragment (redirectAllowed compares without
// them, so such an entry would never match).
func redirectURLValid(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.Scheme != "" && u.Host != "" && u.RawQuery == "" && u.Fragment == "" && !u.ForceQuery
}

// knobs are the settings that are not organization state. A stored *knobs
// is never modified: a change stores a new one, so the request path reads
// them with one atomic load.
type knobs struct {
	unauthorizedShape   string
	expiresInUnit       string
	tokenTTL            time.Duration
	accountCap          int
	bigQueryLock        bool
	allowedRedirectURLs []string
	publicURL           string // no trailing slash
	webhookURL          string // "": no webhooks
	webhookKey          []byte
	webhookPrint        string // Fingerprint of the webhook secret
	replyProfile        string
	listLag             time.Duration
}

func validProfile(p string) bool { return p == ProfileFull || p == ProfileDocumented }

// knobsFrom takes the knobs of opts, which has its defaults applied.
func knobsFrom(opts Options) *knobs {
	key, _ := decodeWebhookSecret(opts.WebhookSecret) // checked by Options.Validate
	return &knobs{
		unauthorizedShape: opts.Unauthorized401Shape, expiresInUnit: opts.ExpiresInUnit,
		tokenTTL: opts.TokenTTL, accountCap: opts.AccountCap, bigQueryLock: *opts.BigQueryLock,
		allowedRedirectURLs: slices.Clone(opts.AllowedRedirectURLs), publicURL: opts.PublicURL,
		webhookURL: opts.WebhookURL, webhookKey: key, webhookPrint: Fingerprint(opts.WebhookSecret),
		replyProfile: opts.ReplyProfile, listLag: opts.ListLag,
	}
}

// with returns a copy of k with p's knob fields applied.
func (k knobs) with(p SettingsPatch) *knobs {
	set(&k.unauthorizedShape, p.UnauthorizedShape)
	set(&k.expiresInUnit, p.ExpiresInUnit)
	set(&k.tokenTTL, p.TokenTTL)
	set(&k.accountCap, p.AccountCap)
	set(&k.bigQueryLock, p.BigQueryLock)
	if p.AllowedRedirectURLs != nil {
		k.allowedRedirectURLs = slices.Clone(p.AllowedRedirectURLs)
	}
	if p.PublicURL != nil {
		k.publicURL = strings.TrimSuffix(*p.PublicURL, "/")
	}
	set(&k.webhookURL, p.WebhookURL)
	if p.WebhookSecret != nil {
		k.webhookKey, _ = decodeWebhookSecret(*p.WebhookSecret) // checked by validate
		k.webhookPrint = Fingerprint(*p.WebhookSecret)
	}
	set(&k.replyProfile, p.ReplyProfile)
	set(&k.listLag, p.ListLag)
	return &k
}

// set stores *v in dst when v is not nil.
func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// Settings returns the current settings.
func (s *Server) Settings() Settings {
	k, o := s.knobs.Load(), s.org.state()
	return Settings{
		UnauthorizedShape: k.unauthorizedShape, ExpiresInUnit: k.expiresInUnit, TokenTTL: k.tokenTTL,
		AccountCap: k.accountCap, BigQueryLock: k.bigQueryLock,
		AllowedRedirectURLs: slices.Clone(k.allowedRedirectURLs), PublicURL: k.publicURL,
		Plan: o.Plan, ProductionAccess: o.ProductionAccess, Credits: o.Credits,
		WebhookURL: k.webhookURL, WebhookSecret: k.webhookPrint,
		ReplyProfile: k.replyProfile, ListLag: k.listLag,
	}
}

// UpdateSettings applies p and returns the settings that result. If any
// field of p is invalid it changes nothing and returns a *SettingError
// naming it. A changed TokenTTL applies to tokens minted from then on; a
// lower AccountCap refuses new connections until enough are deleted. Reset
// restores the Options' values.
func (s *Server) UpdateSettings(p SettingsPatch) (Settings, error) {
	if err := p.validate(); err != nil {
		return s.Settings(), err
	}
	for {
		old := s.knobs.Load()
		if s.knobs.CompareAndSwap(old, old.with(p)) {
			break
		}
	}
	if p.Plan != nil {
		s.SetPlan(*p.Plan)
	}
	if p.ProductionAccess != nil {
		s.SetProductionAccess(*p.ProductionAccess)
	}
	if p.Credits != nil {
		s.SetCredits(*p.Credits)
	}
	if p.WebhookURL != nil {
		s.wakeSettler() // settlements due while webhooks were off go out now
	}
	return s.Settings(), nil
}

// SetUserCredits gives userID a credit balance of its own (n, at least 0):
// that user's on-demand refreshes are charged to it and answer 402 when it
// is under 20, while other users go on with the organization's balance.
// Reset or ClearUserCredits ends the override.
func (s *Server) SetUserCredits(userID string, n int) { s.org.setUserCredits(userID, n) }

// ClearUserCredits returns userID to the organization's balance and
// reports whether it had one of its own.
func (s *Server) ClearUserCredits(userID string) bool { return s.org.clearUserCredits(userID) }
