package config

import "time"

// Derived defaults: values that depend on other keys and are filled in by
// Load after decoding.
const (
	// DevPublicURL is public_url when it is empty and env is development.
	DevPublicURL = "http://localhost:8080"
	// SecureCookieName is the session cookie's name when cookie_name is
	// empty and secure_cookie is true. The __Host- prefix makes the browser
	// refuse it without Secure, with a Domain, or with a Path other than /.
	SecureCookieName = "__Host-bff_session"
	// PlainCookieName is the session cookie's name when cookie_name is
	// empty and secure_cookie is false.
	PlainCookieName = "bff_session"
	// LoginCookiePrefix starts the name of every pending login's binding
	// cookie (after __Host- when secure_cookie is true); the session
	// cookie's name may not start with it.
	LoginCookiePrefix = "bff_login"
)

// The in-process caches' memory bounds. Measured (docs/operations.md,
// "Capacity"): a cached session takes 150 to 220 bytes and a cached token
// about 140 plus the token's length, so each default holds the sessions
// or tokens of over 100,000 active users (300,000 sessions or more;
// 300,000 tokens of 300 bytes, 115,000 of 1 KB).
const (
	DefaultSessionCacheBytes = 64 << 20
	DefaultTokenCacheBytes   = 128 << 20
)

// Defaults returns the configuration with every default filled in. The
// derived keys (public_url in development, session.cookie_name) are left
// empty: Load fills them from the other keys. Each call returns fresh slices,
// so callers may modify the result.
func Defaults() Config {
	return Config{
		Env:             EnvProduction,
		Listen:          ":8080",
		AdminListen:     ":9090",
		TrustedProxies:  []string{},
		TraceparentFrom: []string{},
		ShutdownTimeout: 30 * time.Second,
		ShutdownDelay:   5 * time.Second,
		LogLevel:        "info",
		AdminTokenFile:  "", // unset: the admin listener's mutating endpoints answer 404
		StaticDir:       "", // unset: no web app at /
		Upstream: Upstream{
			Timeout:         15 * time.Second,
			MaxBodyBytes:    1 << 20,
			ExpiresInUnit:   UnitSeconds,
			RefreshBefore:   60 * time.Second,
			MaxTokenTTL:     time.Hour,
			TokenCacheBytes: DefaultTokenCacheBytes,
			Retry: Retry{
				MaxAttempts: 3,
				BaseDelay:   100 * time.Millisecond,
				MaxDelay:    time.Second,
			},
			Routes:      DefaultRoutes(),
			MoneyRoutes: []string{"/v2/payments", "/v2/pay"},
		},
		Redis: Redis{
			URL:            "redis://127.0.0.1:6379/0",
			Sentinel:       Sentinel{Addrs: []string{}},
			ClusterAddrs:   []string{},
			KeyPrefix:      "bff:",
			DecryptionKeys: []Secret{},
			DialTimeout:    2 * time.Second,
			ReadTimeout:    time.Second,
			WriteTimeout:   time.Second,
		},
		Session: Session{
			SecureCookie:    true,
			IdleTimeout:     30 * time.Minute,
			AbsoluteTimeout: 12 * time.Hour,
			CacheBytes:      DefaultSessionCacheBytes,
			Keys:            []Secret{},
		},
		Auth: Auth{
			Mode: AuthModeOIDC,
			OIDC: OIDC{
				Scopes:      []string{"openid", "profile"},
				UserIDClaim: "sub",
			},
			MobileRedirectURIs: []string{},
		},
		CORS: CORS{AllowedOrigins: []string{}},
		Limits: Limits{RequestsPerSecond: 20, Burst: 40, AuthPerMinute: 60, RefreshInterval: 15 * time.Minute, SessionsPerUser: 20,
			BackchannelPerMinute: 120, PendingLoginsPerAddress: 100, IPv6Prefix: 64, StreamsPerUser: 5,
			StreamsPerAddress: 100},
		Payments: Payments{WatchInterval: 2 * time.Second, WatchMaxInterval: 30 * time.Second, WatchFor: 24 * time.Hour,
			WatchBatch: 64, WebhookSecrets: []Secret{},
			StepUp: StepUp{Routes: []string{}, Thresholds: []string{}, ACRValues: []string{},
				MaxAge: 5 * time.Minute, HoldFor: 10 * time.Minute}},
	}
}

// DefaultRoutes returns the default upstream allowlist (upstream.routes in
// config.example.yaml), in its order. Each call returns a fresh slice.
func DefaultRoutes() []Route {
	r := func(prefix string, methods ...string) Route { return Route{Prefix: prefix, Methods: methods} }
	return []Route{
		r("/v2/payments", "GET", "POST", "DELETE"),
		r("/v2/pay", "POST"),
		r("/v2/connections", "GET", "POST", "DELETE"),
		r("/v2/data/accounts", "GET"),
		r("/v2/data/transactions", "GET", "PATCH"),
		r("/v2/data/transaction-categories", "GET"),
		r("/v2/providers", "GET"),
		r("/v2/bank-branches", "GET"),
		r("/v2/merchants", "GET", "POST", "PUT", "DELETE"),
		// The 20-credit on-demand refresh.
		r("/chat/chat/connections/refresh", "POST"),
	}
}
