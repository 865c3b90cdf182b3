// Package config loads and validates the BFF's configuration: a YAML file
// with every key overridable by a BFF_* environment variable (the keys are
// documented in config.example.yaml and docs/configuration.md).
package config

import (
	"log/slog"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// Environments the BFF knows.
const (
	EnvProduction  = "production"
	EnvDevelopment = "development"
)

// Auth modes.
const (
	AuthModeOIDC = "oidc"
	AuthModeDev  = "dev"
)

// Units of the token endpoint's expiresIn.
const (
	UnitSeconds      = "seconds"
	UnitMilliseconds = "milliseconds"
)

// Secret is a configuration value that must never be printed. Its String,
// LogValue, MarshalYAML and MarshalJSON all return "REDACTED"; Reveal returns
// the value for the one place that needs it.
type Secret string

// Redacted is what a Secret prints as.
const Redacted = "REDACTED"

// Reveal returns the secret's value.
func (s Secret) Reveal() string { return string(s) }

// String implements fmt.Stringer.
func (s Secret) String() string { return Redacted }

// GoString implements fmt.GoStringer, so %#v does not leak either.
func (s Secret) GoString() string { return Redacted }

// LogValue implements slog.LogValuer.
func (s Secret) LogValue() slog.Value { return slog.StringValue(Redacted) }

// MarshalYAML implements yaml.Marshaler.
func (s Secret) MarshalYAML() (any, error) { return Redacted, nil }

// MarshalJSON implements json.Marshaler.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + Redacted + `"`), nil }

// Config is the whole configuration. Field tags are the key names of
// docs/configuration.md.
type Config struct {
	Env            string   `yaml:"env"`
	Listen         string   `yaml:"listen"`
	AdminListen    string   `yaml:"admin_listen"`
	PublicURL      string   `yaml:"public_url"`
	TrustedProxies []string `yaml:"trusted_proxies"`
	// TraceparentFrom are the peers (CIDRs or addresses) whose W3C
	// traceparent, tracestate and baggage the BFF continues. Separate from
	// TrustedProxies on purpose: a proxy believed for X-Forwarded-For
	// usually passes the client's trace headers through, so trusting it
	// for those too would let any client choose the trace. Empty: none.
	TraceparentFrom []string `yaml:"traceparent_from"`
	// TrustClientTraceparent continues a W3C traceparent from any client
	// (your own apps, when the public cannot reach the BFF).
	TrustClientTraceparent bool          `yaml:"trust_client_traceparent"`
	ShutdownTimeout        time.Duration `yaml:"shutdown_timeout"` // drain bound after SIGTERM
	ShutdownDelay          time.Duration `yaml:"shutdown_delay"`   // /readyz is 503 this long before the listeners stop
	LogLevel               string        `yaml:"log_level"`        // debug | info | warn | error
	Pprof                  bool          `yaml:"pprof"`            // serve /debug/pprof/ on the admin listener
	// AdminTokenFile is the path of the file holding the bearer token of
	// the admin listener's mutating endpoints (POST /reload-secret, DELETE
	// /users/{userId}/sessions). Empty: those endpoints answer 404. Read it
	// with LoadAdminToken; the file is re-read on every call.
	AdminTokenFile string `yaml:"admin_token_file"`
	// AdminMutationsDisabled says that running without admin_token_file
	// (so without the operator's revocation endpoint) is meant; production
	// refuses an empty admin_token_file without it.
	AdminMutationsDisabled bool `yaml:"admin_mutations_disabled"`
	// StaticDir is a built web app (with index.html) served at / from the
	// BFF's own origin; empty: none.
	StaticDir string   `yaml:"static_dir"`
	Upstream  Upstream `yaml:"upstream"`
	Redis     Redis    `yaml:"redis"`
	Session   Session  `yaml:"session"`
	Auth      Auth     `yaml:"auth"`
	CORS      CORS     `yaml:"cors"`
	Ledger    Ledger   `yaml:"ledger"`
	Payments  Payments `yaml:"payments"`
	Limits    Limits   `yaml:"limits"`
}

// Limits bounds what one client can make the BFF do; 0 switches one off.
type Limits struct {
	// RequestsPerSecond and Burst are each session's budget of /api
	// requests, one token bucket across every instance (approximate: see
	// limits.Budget for the overshoot).
	RequestsPerSecond int `yaml:"requests_per_second"`
	Burst             int `yaml:"burst"`
	// AuthPerMinute is the budget of /auth/* requests per client address
	// (believed through trusted_proxies), shared by every instance.
	AuthPerMinute int `yaml:"auth_per_minute"`
	// RefreshInterval allows at most one on-demand refresh (the route that
	// costs the organization 20 credits) per user per interval.
	RefreshInterval time.Duration `yaml:"refresh_interval"`
	// SessionsPerUser caps a user's live sessions: a login beyond it ends
	// that user's oldest sessions (by creation), as a revocation does on
	// every instance. Approximate when logins race on several instances;
	// the next login converges it.
	SessionsPerUser int `yaml:"sessions_per_user"`
	// StreamsPerUser caps a user's open event streams (GET /bff/events) on
	// one instance: each holds a connection. 0: no cap.
	StreamsPerUser int `yaml:"streams_per_user"`
	// StreamsPerAddress caps the open event streams of one client address
	// (believed through trusted_proxies; an IPv6 one by IPv6Prefix) on one
	// instance, whatever their users: a host with many accounts must not
	// hold the instance's descriptors. 0: no cap.
	StreamsPerAddress int `yaml:"streams_per_address"`
	// StreamsPerInstance caps the open event streams of one instance (one
	// more is 503). 0: half the process's limit on open descriptors
	// (events.InstanceBound).
	StreamsPerInstance int `yaml:"streams_per_instance"`
	// BackchannelPerMinute is the budget of POST /auth/backchannel-logout
	// per client address (the provider's), apart from AuthPerMinute so
	// users' traffic never throttles the provider and forged logout tokens
	// cannot make the BFF work without bound.
	BackchannelPerMinute int `yaml:"backchannel_per_minute"`
	// PendingLoginsPerAddress bounds the logins a client address may have
	// started and not finished (each GET /auth/login stores one record for
	// the state's lifetime, 10 minutes): at most this many a 10 minutes.
	PendingLoginsPerAddress int `yaml:"pending_logins_per_address"`
	// IPv6Prefix is how much of an IPv6 client address names the client in
	// every per-address limit: a client owns at least a /64, so each of its
	// addresses must not get a budget of its own. IPv4 addresses count
	// whole.
	IPv6Prefix int `yaml:"ipv6_prefix"`
}

// Payments configures how payments are followed after their answer, and
// the upstream's status webhooks.
type Payments struct {
	// WatchInterval is the wait before a followed payment is polled again
	// after its status changed (it doubles while the status stays, up to
	// WatchMaxInterval). 0: payments are not followed.
	WatchInterval time.Duration `yaml:"watch_interval"`
	// WatchMaxInterval is the longest wait between two polls of a payment.
	WatchMaxInterval time.Duration `yaml:"watch_max_interval"`
	// WatchFor is how long after it was made a payment is followed.
	WatchFor time.Duration `yaml:"watch_for"`
	// WatchBatch is how many payments an instance takes at a time.
	WatchBatch int `yaml:"watch_batch"`
	// WebhookPath is where the BFF receives the upstream's signed payment
	// status webhooks (Standard Webhooks); "" receives none.
	WebhookPath string `yaml:"webhook_path"`
	// WebhookSecrets verify the webhooks (whsec_…): one signed with any of
	// them is accepted, so a secret is rotated by adding the new one first.
	WebhookSecrets []Secret `yaml:"webhook_secrets"`
	// StepUp holds payments for the user's approval (docs/payments.md,
	// "Payments the user approves").
	StepUp StepUp `yaml:"step_up"`
	// Receipts signs the receipts of payments.
	Receipts Receipts `yaml:"receipts"`
	// ListLag is how long the upstream's payment list may take to show a
	// payment it made: "not made" is concluded only from a list read at
	// least that long after the request stopped acting (0: the list is
	// current).
	ListLag time.Duration `yaml:"list_lag"`
}

// Receipts configures the signing keys of payment receipts.
type Receipts struct {
	// KeysFile is a JWK Set of private keys (ES256 or EdDSA); "": an
	// Ed25519 key derived from redis.encryption_key.
	KeysFile string `yaml:"keys_file"`
	// KeyID names the key that signs (default: the first).
	KeyID string `yaml:"key_id"`
}

// StepUp is the policy of payments the user approves: a fresh, stronger
// authentication at the OpenID provider, bound to the payment (RFC 9470,
// RFC 9396).
type StepUp struct {
	// Enabled turns it on; off, no payment is held.
	Enabled bool `yaml:"enabled"`
	// Routes are the money routes (upstream.money_routes) whose payments
	// may be held; empty: every money route.
	Routes []string `yaml:"routes"`
	// Always holds every payment on Routes, whatever its amount.
	Always bool `yaml:"always"`
	// Thresholds hold a payment whose amount is at or over its currency's,
	// each "CUR amount" (ISO 4217 code, a space, a decimal: "EUR 100.00");
	// a currency not listed is always held.
	Thresholds []string `yaml:"thresholds"`
	// ACRValues are the authentication classes an approval may carry.
	ACRValues []string `yaml:"acr_values"`
	// MaxAge bounds the age of the approval's authentication (auth_time).
	MaxAge time.Duration `yaml:"max_age"`
	// HoldFor is how long a held payment waits for its approval.
	HoldFor time.Duration `yaml:"hold_for"`
}

// Threshold reads one of StepUp.Thresholds: its currency and amount.
func Threshold(s string) (currency, amount string, ok bool) {
	currency, amount, ok = strings.Cut(strings.TrimSpace(s), " ")
	amount = strings.TrimSpace(amount)
	return currency, amount, ok && amount != ""
}

// Ledger configures the durable record of money-moving requests.
type Ledger struct {
	// PostgresURL is the PostgreSQL database of the ledger (it may carry a
	// password). Empty: an in-process ledger, refused in production.
	PostgresURL Secret `yaml:"postgres_url"`
	// MaxConns bounds each instance's connections to it; 0: pgx's default
	// (the larger of 4 and the CPU count).
	MaxConns int `yaml:"max_conns"`
	// RequireSynchronousReplication makes a production start refuse,
	// rather than warn, when the database does not show a synchronous
	// standby that its commits wait for (docs/ledger-database.md).
	RequireSynchronousReplication bool `yaml:"require_synchronous_replication"`
}

// Upstream configures the API the BFF fronts.
type Upstream struct {
	BaseURL          string        `yaml:"base_url"`
	ClientID         string        `yaml:"client_id"`
	ClientSecret     Secret        `yaml:"client_secret"`
	ClientSecretFile string        `yaml:"client_secret_file"`
	Timeout          time.Duration `yaml:"timeout"`
	MaxBodyBytes     int64         `yaml:"max_body_bytes"`
	ExpiresInUnit    string        `yaml:"expires_in_unit"`
	RefreshBefore    time.Duration `yaml:"refresh_before"`
	MaxTokenTTL      time.Duration `yaml:"max_token_ttl"`
	// TokenCacheBytes bounds the memory of each instance's in-process
	// token cache in front of Redis; 0 turns the in-process layer off.
	TokenCacheBytes int64   `yaml:"token_cache_bytes"`
	Retry           Retry   `yaml:"retry"`
	Routes          []Route `yaml:"routes"`
	// MoneyRoutes are the path prefixes under which a POST moves money: it
	// needs an Idempotency-Key and runs at most once, recorded in the ledger.
	MoneyRoutes []string `yaml:"money_routes"`
}

// Retry bounds the retries of idempotent upstream calls.
type Retry struct {
	MaxAttempts int           `yaml:"max_attempts"`
	BaseDelay   time.Duration `yaml:"base_delay"`
	MaxDelay    time.Duration `yaml:"max_delay"`
}

// Route is one allowlisted upstream path prefix and its methods.
type Route struct {
	Prefix  string   `yaml:"prefix"`
	Methods []string `yaml:"methods"`
}

// Redis configures the shared store. An empty URL with no Sentinel or
// Cluster settings selects the in-process store.
type Redis struct {
	URL          Secret   `yaml:"url"` // may carry a password
	Sentinel     Sentinel `yaml:"sentinel"`
	ClusterAddrs []string `yaml:"cluster_addrs"`
	// Username, Password and TLS reach the Redis nodes behind Sentinel or
	// Cluster; with url they go in the URL (redis://user:pass@…, rediss://).
	Username      string `yaml:"username"`
	Password      Secret `yaml:"password"`
	TLS           bool   `yaml:"tls"`
	KeyPrefix     string `yaml:"key_prefix"`
	EncryptionKey Secret `yaml:"encryption_key"`
	// DecryptionKeys open records sealed under earlier (or, during a
	// rollout, upcoming) encryption keys; nothing is sealed under them.
	DecryptionKeys []Secret      `yaml:"decryption_keys"`
	DialTimeout    time.Duration `yaml:"dial_timeout"`
	ReadTimeout    time.Duration `yaml:"read_timeout"`
	WriteTimeout   time.Duration `yaml:"write_timeout"`
	PoolSize       int           `yaml:"pool_size"`
}

// Sentinel configures Redis Sentinel.
type Sentinel struct {
	Master   string   `yaml:"master"`
	Addrs    []string `yaml:"addrs"`
	Password Secret   `yaml:"password"`
}

// Session configures the BFF's own sessions.
type Session struct {
	CookieName      string        `yaml:"cookie_name"`
	SecureCookie    bool          `yaml:"secure_cookie"`
	IdleTimeout     time.Duration `yaml:"idle_timeout"`
	AbsoluteTimeout time.Duration `yaml:"absolute_timeout"`
	Keys            []Secret      `yaml:"keys"`
	// CacheBytes bounds the memory of each instance's in-process copy of
	// live sessions in front of Redis; 0 turns it off.
	CacheBytes int64 `yaml:"cache_bytes"`
	// MobileDPoP is how native sessions are bound to a key of the device
	// (DPoP, RFC 9449): MobileDPoPOff, MobileDPoPOptional or
	// MobileDPoPRequired. Empty: required when env is production,
	// optional in development (Load fills it in).
	MobileDPoP string `yaml:"mobile_dpop"`
}

// The values of session.mobile_dpop.
const (
	MobileDPoPOff      = "off"
	MobileDPoPOptional = "optional"
	MobileDPoPRequired = "required"
)

// Auth configures how users log in.
type Auth struct {
	Mode               string   `yaml:"mode"`
	OIDC               OIDC     `yaml:"oidc"`
	MobileRedirectURIs []string `yaml:"mobile_redirect_uris"`
}

// OIDC configures the OpenID provider for browser and mobile login.
type OIDC struct {
	Issuer       string   `yaml:"issuer"`
	ClientID     string   `yaml:"client_id"`
	ClientSecret Secret   `yaml:"client_secret"`
	RedirectURL  string   `yaml:"redirect_url"`
	Scopes       []string `yaml:"scopes"`
	UserIDClaim  string   `yaml:"user_id_claim"`
	// Profile is "" (OpenID Connect with PKCE; PAR and DPoP when the
	// provider offers them) or OIDCProfileFAPI2.
	Profile string `yaml:"profile"`
	// ClientKeysFile is a JWK Set of the client's private keys for
	// private_key_jwt (RFC 7523); ClientKeyID names the one that signs
	// (default: the first).
	ClientKeysFile string `yaml:"client_keys_file"`
	ClientKeyID    string `yaml:"client_key_id"`
}

// OIDCProfileFAPI2 is auth.oidc.profile's FAPI 2.0 Security Profile.
const OIDCProfileFAPI2 = "fapi2"

// CORS configures cross-origin web frontends.
type CORS struct {
	AllowedOrigins []string `yaml:"allowed_origins"`
}

// Typed views of validated values, so that callers do not parse them again.
// They are meant for a Config that passed Validate (Load validates); on
// anything else they return the zero value.

// TrustedProxyPrefixes returns trusted_proxies as prefixes (an address is
// a prefix of its full length).
func (c *Config) TrustedProxyPrefixes() []netip.Prefix { return prefixes(c.TrustedProxies) }

// TraceparentPrefixes returns traceparent_from parsed (invalid entries are
// refused by Validate).
func (c *Config) TraceparentPrefixes() []netip.Prefix { return prefixes(c.TraceparentFrom) }

func prefixes(list []string) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
		} else if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return out
}

// PublicOrigin returns public_url's origin: scheme://host[:port].
func (c *Config) PublicOrigin() string {
	u, err := url.Parse(c.PublicURL)
	if err != nil || u.Host == "" {
		return strings.TrimSuffix(c.PublicURL, "/")
	}
	return u.Scheme + "://" + u.Host
}

// BaseURLParsed returns upstream.base_url parsed.
func (u *Upstream) BaseURLParsed() *url.URL {
	p, err := url.Parse(u.BaseURL)
	if err != nil {
		return &url.URL{}
	}
	return p
}

// ExpiresInDuration returns the unit of the token endpoint's expiresIn.
func (u *Upstream) ExpiresInDuration() time.Duration {
	if u.ExpiresInUnit == UnitMilliseconds {
		return time.Millisecond
	}
	return time.Second
}
