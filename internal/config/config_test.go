package config

import (
	"encoding/base64"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// Distinctive secret values: no error message or Dump may ever hold them.
const (
	upstreamSecret = "upstream-SECRET-7f3a9c"
	oidcSecret     = "oidc-SECRET-51be02"
	redisPassword  = "redis-PASSWORD-c0ffee"
	ledgerPassword = "ledger-PASSWORD-5eed"
	sentinelSecret = "sentinel-SECRET-9d1e"
	adminToken     = "admin-TOKEN-4e7f21a9b3"
)

var (
	sessionKey    = base64.StdEncoding.EncodeToString([]byte("session-KEY-0123456789abcdefghijk"))
	sessionKeyOld = base64.RawURLEncoding.EncodeToString([]byte("old-session-KEY-0123456789abcdefgh"))
	encryptionKey = base64.StdEncoding.EncodeToString([]byte("encryption-KEY-0123456789abcdefg"))
	decryptionKey = base64.RawURLEncoding.EncodeToString([]byte("decryption-KEY-0123456789abcdefg"))
)

// secretValues are the strings that must never be printed.
func secretValues() []string {
	return []string{upstreamSecret, oidcSecret, redisPassword, ledgerPassword, sentinelSecret, adminToken, sessionKey, sessionKeyOld, encryptionKey, decryptionKey}
}

// prodEnv is the smallest environment that makes a valid production config.
func prodEnv() map[string]string {
	return map[string]string{
		"BFF_PUBLIC_URL":               "https://app.example.com",
		"BFF_UPSTREAM_BASE_URL":        "https://api.example.com",
		"BFF_UPSTREAM_CLIENT_ID":       "bff",
		"BFF_UPSTREAM_CLIENT_SECRET":   upstreamSecret,
		"BFF_REDIS_URL":                "redis://:" + redisPassword + "@redis.internal:6379/0",
		"BFF_REDIS_ENCRYPTION_KEY":     encryptionKey,
		"BFF_REDIS_DECRYPTION_KEYS":    "[" + decryptionKey + "]",
		"BFF_SESSION_KEYS":             "[" + sessionKey + ", " + sessionKeyOld + "]",
		"BFF_AUTH_OIDC_ISSUER":         "https://id.example.com",
		"BFF_AUTH_OIDC_CLIENT_ID":      "bff-web",
		"BFF_AUTH_OIDC_CLIENT_SECRET":  oidcSecret,
		"BFF_AUTH_OIDC_REDIRECT_URL":   "https://app.example.com/auth/callback",
		"BFF_LEDGER_POSTGRES_URL":      "postgres://bff:" + ledgerPassword + "@db.internal:5432/bff",
		"BFF_ADMIN_MUTATIONS_DISABLED": "true",
	}
}

// devEnv is the smallest environment that makes a valid development config.
func devEnv() map[string]string {
	return map[string]string{
		"BFF_ENV":                    "development",
		"BFF_AUTH_MODE":              "dev",
		"BFF_UPSTREAM_BASE_URL":      "http://127.0.0.1:9000",
		"BFF_UPSTREAM_CLIENT_ID":     "bff",
		"BFF_UPSTREAM_CLIENT_SECRET": upstreamSecret,
	}
}

// with returns base with the overrides applied; an empty value unsets.
func with(base map[string]string, overrides map[string]string) map[string]string {
	m := maps.Clone(base)
	maps.Copy(m, overrides)
	return m
}

func getenv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// writeFile writes content to a new file in a temporary directory.
func writeFile(t testing.TB, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// load writes yaml (if non-empty) to a file and loads it with env.
func load(t testing.TB, yaml string, env map[string]string) (*Config, error) {
	t.Helper()
	path := ""
	if yaml != "" {
		path = writeFile(t, "bff.yaml", yaml)
	}
	return Load(path, getenv(env))
}

func mustLoad(t testing.TB, yaml string, env map[string]string) *Config {
	t.Helper()
	c, err := load(t, yaml, env)
	if err != nil {
		t.Fatalf("Load: got error %v, want nil", err)
	}
	return c
}

func TestDefaults(t *testing.T) {
	d := Defaults()
	tests := []struct {
		key       string
		got, want any
	}{
		{"env", d.Env, "production"},
		{"listen", d.Listen, ":8080"},
		{"admin_listen", d.AdminListen, ":9090"},
		{"public_url", d.PublicURL, ""},
		{"trusted_proxies", d.TrustedProxies, []string{}},
		{"shutdown_timeout", d.ShutdownTimeout, 30 * time.Second},
		{"shutdown_delay", d.ShutdownDelay, 5 * time.Second},
		{"log_level", d.LogLevel, "info"},
		{"pprof", d.Pprof, false},
		{"admin_token_file", d.AdminTokenFile, ""},
		{"upstream.timeout", d.Upstream.Timeout, 15 * time.Second},
		{"upstream.max_body_bytes", d.Upstream.MaxBodyBytes, int64(1048576)},
		{"upstream.expires_in_unit", d.Upstream.ExpiresInUnit, "seconds"},
		{"upstream.refresh_before", d.Upstream.RefreshBefore, time.Minute},
		{"upstream.max_token_ttl", d.Upstream.MaxTokenTTL, time.Hour},
		{"upstream.retry", d.Upstream.Retry, Retry{MaxAttempts: 3, BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}},
		{"upstream.routes count", len(d.Upstream.Routes), 10},
		{"upstream.routes[0]", d.Upstream.Routes[0], Route{Prefix: "/v2/payments", Methods: []string{"GET", "POST", "DELETE"}}},
		{"upstream.routes[1]", d.Upstream.Routes[1], Route{Prefix: "/v2/pay", Methods: []string{"POST"}}},
		{"upstream.routes[9]", d.Upstream.Routes[9], Route{Prefix: "/chat/chat/connections/refresh", Methods: []string{"POST"}}},
		{"upstream.money_routes", d.Upstream.MoneyRoutes, []string{"/v2/payments", "/v2/pay"}},
		{"ledger.postgres_url", d.Ledger.PostgresURL.Reveal(), ""},
		{"ledger.max_conns", d.Ledger.MaxConns, 0},
		{"ledger.require_synchronous_replication", d.Ledger.RequireSynchronousReplication, false},
		{"redis.url", d.Redis.URL.Reveal(), "redis://127.0.0.1:6379/0"},
		{"redis.key_prefix", d.Redis.KeyPrefix, "bff:"},
		{"redis.dial_timeout", d.Redis.DialTimeout, 2 * time.Second},
		{"redis.read_timeout", d.Redis.ReadTimeout, time.Second},
		{"redis.write_timeout", d.Redis.WriteTimeout, time.Second},
		{"redis.pool_size", d.Redis.PoolSize, 0},
		{"session.cookie_name", d.Session.CookieName, ""},
		{"session.secure_cookie", d.Session.SecureCookie, true},
		{"session.idle_timeout", d.Session.IdleTimeout, 30 * time.Minute},
		{"session.absolute_timeout", d.Session.AbsoluteTimeout, 12 * time.Hour},
		{"auth.mode", d.Auth.Mode, "oidc"},
		{"auth.oidc.scopes", d.Auth.OIDC.Scopes, []string{"openid", "profile"}},
		{"auth.oidc.user_id_claim", d.Auth.OIDC.UserIDClaim, "sub"},
		{"cors.allowed_origins", d.CORS.AllowedOrigins, []string{}},
		{"limits.sessions_per_user", d.Limits.SessionsPerUser, 20},
		{"limits.streams_per_address", d.Limits.StreamsPerAddress, 100},
		{"limits.streams_per_instance", d.Limits.StreamsPerInstance, 0},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("got %#v, want %#v", tt.got, tt.want)
			}
		})
	}

	t.Run("fresh slices", func(t *testing.T) {
		a := Defaults()
		a.Upstream.Routes[0].Methods[0] = "X"
		if got := Defaults().Upstream.Routes[0].Methods[0]; got != "GET" {
			t.Errorf("got %q after modifying another Defaults(), want GET", got)
		}
	})
}

func TestLoadDerived(t *testing.T) {
	tests := []struct {
		name          string
		env           map[string]string
		wantCookie    string
		wantPublicURL string
		wantInProcess bool
	}{
		{"production", prodEnv(), SecureCookieName, "https://app.example.com", false},
		{"development", devEnv(), SecureCookieName, DevPublicURL, false},
		{"development insecure", with(devEnv(), map[string]string{"BFF_SESSION_SECURE_COOKIE": "false"}), PlainCookieName, DevPublicURL, false},
		{"development in-process", with(devEnv(), map[string]string{"BFF_REDIS_URL": ""}), SecureCookieName, DevPublicURL, false},
		{"explicit cookie name", with(devEnv(), map[string]string{"BFF_SESSION_COOKIE_NAME": "sid"}), "sid", DevPublicURL, false},
		{"public_url trailing slash and case", with(prodEnv(), map[string]string{"BFF_PUBLIC_URL": "HTTPS://App.Example.com/"}), SecureCookieName, "https://app.example.com", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustLoad(t, "", tt.env)
			if got := c.Session.CookieName; got != tt.wantCookie {
				t.Errorf("cookie_name: got %q, want %q", got, tt.wantCookie)
			}
			if got := c.PublicURL; got != tt.wantPublicURL {
				t.Errorf("public_url: got %q, want %q", got, tt.wantPublicURL)
			}
		})
	}

	for _, yaml := range []string{"redis: {url: \"\"}\n", "redis:\n  url:\n"} {
		t.Run("explicit empty url is the in-process store: "+yaml, func(t *testing.T) {
			c := mustLoad(t, yaml, devEnv())
			if !c.Redis.InProcessStore() {
				t.Errorf("InProcessStore: got false, want true")
			}
		})
	}
	t.Run("default url dropped for sentinel", func(t *testing.T) {
		c := mustLoad(t, "redis:\n  sentinel: {master: mymaster, addrs: [\"s1:26379\", \"s2:26379\"]}\n", with(prodEnv(), map[string]string{"BFF_REDIS_URL": ""}))
		if c.Redis.URL != "" {
			t.Errorf("redis.url: got a value, want empty")
		}
	})
	t.Run("default url dropped for cluster", func(t *testing.T) {
		c := mustLoad(t, "", with(prodEnv(), map[string]string{"BFF_REDIS_URL": "", "BFF_REDIS_CLUSTER_ADDRS": "[c1:6379, c2:6379]"}))
		if c.Redis.URL != "" || c.Redis.InProcessStore() {
			t.Errorf("got url %v, in-process %v; want empty url, not in-process", c.Redis.URL.Reveal() != "", c.Redis.InProcessStore())
		}
	})
	t.Run("methods upper-cased", func(t *testing.T) {
		c := mustLoad(t, "upstream:\n  routes:\n    - {prefix: /v2/x, methods: [get, Post]}\n  money_routes: []\n", prodEnv())
		if got, want := c.Upstream.Routes[0].Methods, []string{"GET", "POST"}; !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
}

func TestYAMLOverride(t *testing.T) {
	yaml := `
listen: "127.0.0.1:8081"
trusted_proxies: ["10.0.0.0/8", "192.168.1.1"]
shutdown_delay: 0
upstream:
  timeout: 5s
  max_body_bytes: 2_048
  retry: { max_attempts: 5 }
  routes:
    - prefix: /v2/payments
      methods: [GET]
  money_routes: [/v2/payments]
session:
  idle_timeout: 1h30m
auth:
  oidc: { scopes: [openid, email] }
`
	c := mustLoad(t, yaml, prodEnv())
	tests := []struct {
		key       string
		got, want any
	}{
		{"listen", c.Listen, "127.0.0.1:8081"},
		{"admin_listen (default kept)", c.AdminListen, ":9090"},
		{"trusted_proxies", c.TrustedProxies, []string{"10.0.0.0/8", "192.168.1.1"}},
		{"shutdown_delay", c.ShutdownDelay, time.Duration(0)},
		{"upstream.timeout", c.Upstream.Timeout, 5 * time.Second},
		{"upstream.max_body_bytes", c.Upstream.MaxBodyBytes, int64(2048)},
		{"upstream.retry.max_attempts", c.Upstream.Retry.MaxAttempts, 5},
		{"upstream.retry.base_delay (default kept)", c.Upstream.Retry.BaseDelay, 100 * time.Millisecond},
		{"upstream.routes (replaced)", c.Upstream.Routes, []Route{{Prefix: "/v2/payments", Methods: []string{"GET"}}}},
		{"upstream.money_routes", c.Upstream.MoneyRoutes, []string{"/v2/payments"}},
		{"session.idle_timeout", c.Session.IdleTimeout, 90 * time.Minute},
		{"auth.oidc.scopes", c.Auth.OIDC.Scopes, []string{"openid", "email"}},
		{"auth.oidc.user_id_claim (default kept)", c.Auth.OIDC.UserIDClaim, "sub"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("got %#v, want %#v", tt.got, tt.want)
			}
		})
	}
}

func TestEnvOverride(t *testing.T) {
	file := `
log_level: warn
trusted_proxies: ["10.0.0.0/8"]
upstream:
  timeout: 5s
  retry: { max_attempts: 5, base_delay: 200ms }
`
	tests := []struct {
		name string
		env  map[string]string
		get  func(*Config) any
		want any
	}{
		{"scalar", map[string]string{"BFF_LISTEN": ":8000"}, func(c *Config) any { return c.Listen }, ":8000"},
		{"scalar beats file", map[string]string{"BFF_LOG_LEVEL": "debug"}, func(c *Config) any { return c.LogLevel }, "debug"},
		{"empty value is unset", map[string]string{"BFF_LOG_LEVEL": ""}, func(c *Config) any { return c.LogLevel }, "warn"},
		{"nested scalar", map[string]string{"BFF_UPSTREAM_RETRY_MAX_ATTEMPTS": "7"}, func(c *Config) any { return c.Upstream.Retry }, Retry{7, 200 * time.Millisecond, time.Second}},
		{"nested duration beats file", map[string]string{"BFF_UPSTREAM_TIMEOUT": "20s"}, func(c *Config) any { return c.Upstream.Timeout }, 20 * time.Second},
		{"bool", map[string]string{"BFF_PPROF": "true", "BFF_ADMIN_LISTEN": "127.0.0.1:9090"}, func(c *Config) any { return c.Pprof }, true},
		{"scalar is literal", map[string]string{"BFF_REDIS_KEY_PREFIX": "'x: y'"}, func(c *Config) any { return c.Redis.KeyPrefix }, "'x: y'"},
		{"list", map[string]string{"BFF_TRUSTED_PROXIES": `["172.16.0.0/12", "::1"]`}, func(c *Config) any { return c.TrustedProxies }, []string{"172.16.0.0/12", "::1"}},
		{"empty list", map[string]string{"BFF_TRUSTED_PROXIES": `[]`}, func(c *Config) any { return c.TrustedProxies }, []string{}},
		// A section's variable replaces the file's section: keys it leaves out take their defaults.
		{"struct", map[string]string{"BFF_UPSTREAM_RETRY": `{max_attempts: 2}`}, func(c *Config) any { return c.Upstream.Retry }, Retry{2, 100 * time.Millisecond, time.Second}},
		{"struct then more specific leaf", map[string]string{"BFF_UPSTREAM_RETRY": `{max_attempts: 2}`, "BFF_UPSTREAM_RETRY_MAX_ATTEMPTS": "4"}, func(c *Config) any { return c.Upstream.Retry.MaxAttempts }, 4},
		{"list of structs", map[string]string{"BFF_UPSTREAM_ROUTES": `[{prefix: /v2/x, methods: [GET]}]`, "BFF_UPSTREAM_MONEY_ROUTES": `[]`}, func(c *Config) any { return c.Upstream.Routes }, []Route{{Prefix: "/v2/x", Methods: []string{"GET"}}}},
		{"section absent from file", map[string]string{"BFF_CORS_ALLOWED_ORIGINS": `["https://web.example.com"]`}, func(c *Config) any { return c.CORS.AllowedOrigins }, []string{"https://web.example.com"}},
		{"whole section", map[string]string{"BFF_CORS": `{allowed_origins: ["https://a.example.com"]}`}, func(c *Config) any { return c.CORS.AllowedOrigins }, []string{"https://a.example.com"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustLoad(t, file, with(prodEnv(), tt.env))
			if got := tt.get(c); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
		})
	}

	t.Run("no file", func(t *testing.T) {
		c := mustLoad(t, "", with(prodEnv(), map[string]string{"BFF_UPSTREAM_RETRY_BASE_DELAY": "50ms"}))
		if got, want := c.Upstream.Retry.BaseDelay, 50*time.Millisecond; got != want {
			t.Errorf("got %v, want %v", got, want)
		}
	})
	t.Run("section set to null in file", func(t *testing.T) {
		c := mustLoad(t, "cors:\n", with(prodEnv(), map[string]string{"BFF_CORS_ALLOWED_ORIGINS": `["https://a.example.com"]`}))
		if got, want := c.CORS.AllowedOrigins, []string{"https://a.example.com"}; !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
}

func TestEnvTable(t *testing.T) {
	keys := envKeys()
	byName := map[string]string{}
	for _, k := range keys {
		if p, dup := byName[k.name]; dup {
			t.Errorf("%s names both %s and %s", k.name, p, k.path)
		}
		byName[k.name] = k.path
	}
	for name, want := range map[string]string{
		"BFF_ENV":                         "env",
		"BFF_ADMIN_TOKEN_FILE":            "admin_token_file",
		"BFF_UPSTREAM_BASE_URL":           "upstream.base_url",
		"BFF_UPSTREAM_RETRY":              "upstream.retry",
		"BFF_UPSTREAM_RETRY_MAX_ATTEMPTS": "upstream.retry.max_attempts",
		"BFF_UPSTREAM_ROUTES":             "upstream.routes",
		"BFF_REDIS_SENTINEL_PASSWORD":     "redis.sentinel.password",
		"BFF_AUTH_OIDC_USER_ID_CLAIM":     "auth.oidc.user_id_claim",
		"BFF_CORS":                        "cors",
	} {
		if got := byName[name]; got != want {
			t.Errorf("%s: got %q, want %q", name, got, want)
		}
	}
	// Every key path outside list entries has a variable.
	var want []string
	for _, p := range structPaths(reflect.TypeFor[Config](), "") {
		if !strings.Contains(p, "routes.") {
			want = append(want, p)
		}
	}
	var got []string
	for _, k := range keys {
		got = append(got, k.path)
	}
	if !slices.Equal(got, want) {
		t.Errorf("got paths %v, want %v", got, want)
	}
}

// structPaths lists every key path of t, including the fields of list
// entries ("upstream.routes.prefix"), in declaration order.
func structPaths(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		name := yamlName(t.Field(i))
		if name == "" {
			continue
		}
		p := prefix + name
		out = append(out, p)
		ft := t.Field(i).Type
		if ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct {
			out = append(out, structPaths(ft, p+".")...)
		}
	}
	return out
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		want string // the whole error message
	}{
		{"unknown top key", "lissen: \":8080\"\n", nil, `config: unknown key "lissen" (did you mean "listen"?)`},
		{"unknown nested key", "upstream:\n  tiemout: 5s\n", nil, `config: unknown key "upstream.tiemout" (did you mean "upstream.timeout"?)`},
		{"replaced key", "session:\n  cache_entries: 5000\n", nil, `config: key "session.cache_entries" was replaced by session.cache_bytes: the in-process session cache is bounded by memory, not by a count (default 67108864, 64 MiB; 0 still turns it off)`},
		{"unknown deep key", "upstream:\n  retry: {attempts: 3}\n", nil, `config: unknown key "upstream.retry.attempts"`},
		{"unknown key in route", "upstream:\n  routes:\n    - {prefix: /v2/x, methods: [GET]}\n    - {prefix: /v2/y, method: [GET]}\n", nil, `config: unknown key "upstream.routes[1].method" (did you mean "upstream.routes[1].methods"?)`},
		{"unknown key in env struct", "", map[string]string{"BFF_UPSTREAM_ROUTES": "[{prefix: /v2/x, verbs: [GET]}]"}, `config: BFF_UPSTREAM_ROUTES: unknown key "upstream.routes[0].verbs"`},
		{"duplicate key", "listen: \":1\"\nlisten: \":2\"\n", nil, `config: key "listen" is set twice`},
		{"bad duration", "upstream:\n  timeout: abc\n", nil, `config: upstream.timeout: invalid duration "abc"`},
		{"duration without unit", "upstream:\n  timeout: 15\n", nil, `config: upstream.timeout: invalid duration "15" (a unit is required, e.g. 15s, 100ms, 1h)`},
		{"bad integer", "upstream:\n  max_body_bytes: 1MB\n", nil, `config: upstream.max_body_bytes: invalid integer "1MB"`},
		{"bad bool", "session:\n  secure_cookie: maybe\n", nil, `config: session.secure_cookie: invalid boolean "maybe" (want true or false)`},
		{"list for string", "env: [production]\n", nil, `config: env: expected a string, got a list`},
		{"scalar for list", "trusted_proxies: 10.0.0.0/8\n", nil, `config: trusted_proxies: expected a list, got a scalar`},
		{"scalar for section", "upstream: yes\n", nil, `config: upstream: expected a mapping of keys, got a scalar`},
		{"mapping for int", "upstream:\n  retry:\n    max_attempts: {a: 1}\n", nil, `config: upstream.retry.max_attempts: expected an integer, got a mapping`},
		{"bad type in route", "upstream:\n  routes: [{prefix: /v2/x, methods: GET}]\n", nil, `config: upstream.routes[0].methods: expected a list, got a scalar`},
		{"top level not a mapping", "- a\n- b\n", nil, `config: the document must be a mapping of keys, got a list`},
		{"env bad integer", "", map[string]string{"BFF_UPSTREAM_RETRY_MAX_ATTEMPTS": "three"}, `config: upstream.retry.max_attempts (from BFF_UPSTREAM_RETRY_MAX_ATTEMPTS): invalid integer "three"`},
		{"env bad duration", "", map[string]string{"BFF_SESSION_IDLE_TIMEOUT": "soon"}, `config: session.idle_timeout (from BFF_SESSION_IDLE_TIMEOUT): invalid duration "soon"`},
		{"env bad list", "", map[string]string{"BFF_TRUSTED_PROXIES": "10.0.0.0/8"}, `config: trusted_proxies (from BFF_TRUSTED_PROXIES): expected a list, got a scalar`},
		{"env bad yaml", "", map[string]string{"BFF_TRUSTED_PROXIES": "[a, b"}, `config: trusted_proxies (from BFF_TRUSTED_PROXIES): invalid YAML value: `},
		{"env bad type in struct", "", map[string]string{"BFF_UPSTREAM_RETRY": "{max_attempts: x}"}, `config: upstream.retry.max_attempts (from BFF_UPSTREAM_RETRY): invalid integer "x"`},
		{"env invalid value", "", map[string]string{"BFF_LOG_LEVEL": "loud"}, `config: log_level (from BFF_LOG_LEVEL): "loud" is not one of debug, info, warn, error`},
		{"env invalid value in list", "", map[string]string{"BFF_TRUSTED_PROXIES": "[nope]"}, `config: trusted_proxies[0] (from BFF_TRUSTED_PROXIES): "nope" is neither a CIDR nor an IP address`},
		{"multiple documents", "env: production\n---\nenv: development\n", nil, `holds more than one YAML document`},
		{"syntax error", "env: [production\n", nil, `config: `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(t, tt.yaml, with(prodEnv(), tt.env))
			if err == nil {
				t.Fatalf("got nil error, want %q", tt.want)
			}
			if got := err.Error(); !strings.Contains(got, tt.want) {
				t.Errorf("got %q, want it to contain %q", got, tt.want)
			}
		})
	}

	t.Run("missing file", func(t *testing.T) {
		_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"), getenv(prodEnv()))
		if !errors.Is(err, os.ErrNotExist) {
			t.Errorf("got %v, want an error wrapping os.ErrNotExist", err)
		}
	})
	t.Run("error type", func(t *testing.T) {
		_, err := load(t, "upstream:\n  timeout: abc\n", prodEnv())
		var ce *Error
		if !errors.As(err, &ce) || ce.Key != "upstream.timeout" {
			t.Errorf("got %#v, want an *Error with Key upstream.timeout", err)
		}
	})
}

func TestLoadAccepts(t *testing.T) {
	tests := []struct {
		name string
		yaml string
	}{
		{"empty file", ""},
		{"only whitespace", "\n\n"},
		{"only comments", "# nothing here\n"},
		{"empty document", "---\n"},
		{"null section keeps defaults", "upstream:\n"},
		{"null list is empty", "trusted_proxies:\ncors:\n  allowed_origins: ~\n"},
		{"anchors and aliases", "trusted_proxies: &p [\"10.0.0.0/8\"]\ncors:\n  allowed_origins: []\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, "bff.yaml", tt.yaml)
			c, err := Load(path, getenv(prodEnv()))
			if err != nil {
				t.Fatalf("got error %v, want nil", err)
			}
			if got, want := c.Upstream.Timeout, 15*time.Second; got != want {
				t.Errorf("upstream.timeout: got %v, want %v", got, want)
			}
		})
	}
}

func TestAliasExpansionBounded(t *testing.T) {
	// One anchored route of 1000 methods, aliased 1000 times: a few KiB
	// that would expand to a million nodes.
	var b strings.Builder
	b.WriteString("upstream:\n  routes:\n    - &r {prefix: /v2/x, methods: [GET")
	b.WriteString(strings.Repeat(", GET", 999))
	b.WriteString("]}\n")
	b.WriteString(strings.Repeat("    - *r\n", 1000))
	_, err := load(t, b.String(), prodEnv())
	if err == nil || !strings.Contains(err.Error(), "YAML nodes") {
		t.Fatalf("got %v, want an error about too many YAML nodes", err)
	}
}
