package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fintech-bff/bff/internal/money"
	"github.com/fintech-bff/bff/internal/webhooks"
)

// Methods a route may allow.
var routeMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// Validate checks every key and reports every problem it finds, joined with
// errors.Join; each names its key and none holds a secret's value. It reads
// upstream.client_secret_file and admin_token_file, which must be readable
// when set. Load calls it after filling the derived keys; on a Config built
// by hand an empty session.cookie_name or (in development) public_url stands
// for the derived value.
func (c *Config) Validate() error {
	v := &validator{}
	prod := c.Env == EnvProduction

	switch c.Env {
	case EnvProduction, EnvDevelopment:
	default:
		v.addf("env", "%q is not one of production, development", c.Env)
	}
	v.hostPort("listen", c.Listen)
	v.hostPort("admin_listen", c.AdminListen)
	if sameListener(c.Listen, c.AdminListen) {
		v.addf("admin_listen", "must differ from listen (%q): the admin endpoints are never on the public listener", c.Listen)
	}
	switch {
	case c.PublicURL == "" && prod:
		v.addf("public_url", "required when env is production")
	case c.PublicURL != "":
		if msg := checkOrigin(c.PublicURL, true); msg != "" {
			v.addf("public_url", "%s", msg)
		} else if prod && !isHTTPS(c.PublicURL) {
			v.addf("public_url", "must be https when env is production")
		}
	}
	v.prefixList("trusted_proxies", c.TrustedProxies, prod,
		"any client could then set X-Forwarded-For and X-Request-Id; list the proxies' own addresses or CIDRs")
	v.prefixList("traceparent_from", c.TraceparentFrom, prod,
		"any client could then choose its trace (and force sampling); list only peers that set their own traceparent, or set trust_client_traceparent")
	if prod && c.AdminTokenFile == "" && !c.AdminMutationsDisabled {
		v.addf("admin_token_file", "required when env is production: without it the operator's revocation endpoint (DELETE /users/{userId}/sessions) and POST /reload-secret do not exist; set admin_mutations_disabled: true to run without them on purpose")
	}
	v.positive("shutdown_timeout", int64(c.ShutdownTimeout))
	if c.ShutdownDelay < 0 {
		v.addf("shutdown_delay", "must not be negative")
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		v.addf("log_level", "%q is not one of debug, info, warn, error", c.LogLevel)
	}
	if prod && c.Pprof && !loopbackListener(c.AdminListen) {
		v.addf("pprof", "true is refused when env is production unless admin_listen (%q) is on a loopback address such as 127.0.0.1:9090 or [::1]:9090: /debug/pprof/ exposes the process's memory and costs CPU", c.AdminListen)
	}
	if _, err := c.LoadAdminToken(); err != nil {
		v.add(err)
	}

	c.Upstream.validate(v, prod)
	c.Redis.validate(v, prod)
	c.Session.validate(v, prod)
	c.Auth.validate(v, prod)
	if c.Ledger.PostgresURL == "" && prod {
		v.addf("ledger.postgres_url", "required when env is production: payments are recorded durably in PostgreSQL")
	} else if u := c.Ledger.PostgresURL.Reveal(); u != "" && !strings.HasPrefix(u, "postgres://") && !strings.HasPrefix(u, "postgresql://") {
		v.addf("ledger.postgres_url", "must be a postgres:// or postgresql:// URL")
	}
	if r := c.Limits.RequestsPerSecond; r < 0 || r > 1_000_000 {
		v.addf("limits.requests_per_second", "%d is not between 0 (off) and 1000000", r)
	} else if r > 0 && (c.Limits.Burst < 1 || c.Limits.Burst > 1_000_000) {
		v.addf("limits.burst", "%d is not between 1 and 1000000 (with limits.requests_per_second set)", c.Limits.Burst)
	}
	if n := c.Limits.AuthPerMinute; n < 0 || n > 1_000_000 {
		v.addf("limits.auth_per_minute", "%d is not between 0 (off) and 1000000", n)
	}
	if c.Limits.RefreshInterval < 0 {
		v.addf("limits.refresh_interval", "must not be negative (0 switches it off)")
	}
	if n := c.Limits.SessionsPerUser; n < 0 || n > 10_000 {
		v.addf("limits.sessions_per_user", "%d is not between 0 (off) and 10000", n)
	}
	if n := c.Limits.BackchannelPerMinute; n < 0 || n > 1_000_000 {
		v.addf("limits.backchannel_per_minute", "%d is not between 0 (off) and 1000000", n)
	}
	if n := c.Limits.PendingLoginsPerAddress; n < 0 || n > 1_000_000 {
		v.addf("limits.pending_logins_per_address", "%d is not between 0 (off) and 1000000", n)
	}
	if n := c.Limits.IPv6Prefix; n < 32 || n > 128 {
		v.addf("limits.ipv6_prefix", "%d is not between 32 and 128 (a client owns at least a /64)", n)
	}
	if n := c.Limits.StreamsPerUser; n < 0 || n > 10000 {
		v.addf("limits.streams_per_user", "%d is not between 0 (no cap) and 10000", n)
	}
	if n := c.Limits.StreamsPerAddress; n < 0 || n > 1_000_000 {
		v.addf("limits.streams_per_address", "%d is not between 0 (no cap) and 1000000", n)
	}
	if n := c.Limits.StreamsPerInstance; n < 0 || n > 1_000_000 {
		v.addf("limits.streams_per_instance", "%d is not between 0 (half the descriptor limit) and 1000000", n)
	}
	v.payments(c)
	if n := c.Ledger.MaxConns; n < 0 || n > 1000 {
		v.addf("ledger.max_conns", "%d is not between 0 and 1000", n)
	}

	for i, o := range c.CORS.AllowedOrigins {
		key := fmt.Sprintf("cors.allowed_origins[%d]", i)
		switch {
		case o == "*":
			v.addf(key, `"*" is not allowed: credentials are sent only to listed origins`)
		case strings.Contains(o, "*"):
			// Echo turns a * into ".*": https://*.example.com would also
			// match https://evil.com?.example.com.
			v.addf(key, "must not hold *: the CORS middleware reads it as a pattern that also matches other origins (https://*.example.com matches https://evil.com?.example.com); list each origin")
		default:
			if msg := checkOrigin(o, false); msg != "" {
				v.addf(key, "%s", msg)
			} else if prod && !isHTTPS(o) {
				v.addf(key, "must be https when env is production")
			}
		}
	}
	return errors.Join(v.errs...)
}

func (u *Upstream) validate(v *validator, prod bool) {
	if u.BaseURL == "" {
		v.addf("upstream.base_url", "required")
	} else if msg := checkBaseURL(u.BaseURL); msg != "" {
		v.addf("upstream.base_url", "%s", msg)
	} else if prod && !isHTTPS(u.BaseURL) && !isLoopback(u.BaseURL) {
		v.addf("upstream.base_url", "must be https when env is production (plain http only to a loopback host)")
	}
	if u.ClientID == "" {
		v.addf("upstream.client_id", "required")
	}
	switch {
	case u.ClientSecret != "" && u.ClientSecretFile != "":
		v.addf("upstream.client_secret_file", "set client_secret or client_secret_file, not both")
	default:
		if _, err := u.LoadClientSecret(); err != nil {
			v.add(err)
		}
	}
	v.positive("upstream.timeout", int64(u.Timeout))
	if u.MaxBodyBytes <= 0 {
		v.addf("upstream.max_body_bytes", "must be greater than 0")
	}
	switch u.ExpiresInUnit {
	case UnitSeconds, UnitMilliseconds:
	default:
		v.addf("upstream.expires_in_unit", "%q is not one of seconds, milliseconds", u.ExpiresInUnit)
	}
	v.positive("upstream.max_token_ttl", int64(u.MaxTokenTTL))
	switch {
	case u.RefreshBefore < 0:
		v.addf("upstream.refresh_before", "must not be negative")
	case u.MaxTokenTTL > 0 && u.RefreshBefore >= u.MaxTokenTTL:
		v.addf("upstream.refresh_before", "must be shorter than upstream.max_token_ttl (%s)", u.MaxTokenTTL)
	}
	v.cacheBytes("upstream.token_cache_bytes", u.TokenCacheBytes)
	if a := u.Retry.MaxAttempts; a < 1 || a > 10 {
		v.addf("upstream.retry.max_attempts", "%d is not between 1 and 10 (attempts include the first)", a)
	}
	v.positive("upstream.retry.base_delay", int64(u.Retry.BaseDelay))
	v.positive("upstream.retry.max_delay", int64(u.Retry.MaxDelay))
	if u.Retry.BaseDelay > 0 && u.Retry.MaxDelay > 0 && u.Retry.BaseDelay > u.Retry.MaxDelay {
		v.addf("upstream.retry.base_delay", "must not exceed upstream.retry.max_delay (%s)", u.Retry.MaxDelay)
	}

	if len(u.Routes) == 0 {
		v.addf("upstream.routes", "at least one route is required")
	}
	seen := map[string]int{}
	for i, r := range u.Routes {
		key := fmt.Sprintf("upstream.routes[%d]", i)
		if msg := checkPrefix(r.Prefix); msg != "" {
			v.addf(key+".prefix", "%s", msg)
		} else if j, dup := seen[r.Prefix]; dup {
			v.addf(key+".prefix", "%q is already upstream.routes[%d].prefix", r.Prefix, j)
		} else {
			seen[r.Prefix] = i
		}
		if len(r.Methods) == 0 {
			v.addf(key+".methods", "at least one method is required")
		}
		for j, m := range r.Methods {
			if !slices.Contains(routeMethods, strings.ToUpper(m)) {
				v.addf(fmt.Sprintf("%s.methods[%d]", key, j), "%q is not one of %s", m, strings.Join(routeMethods, " "))
			}
		}
	}
	u.checkMoneyRoutes(v)
}

// checkMoneyRoutes refuses money prefixes that are malformed or that no
// allowlisted route covers: a typo would leave payments unprotected while
// looking configured.
func (u *Upstream) checkMoneyRoutes(v *validator) {
	for i, m := range u.MoneyRoutes {
		key := fmt.Sprintf("upstream.money_routes[%d]", i)
		if msg := checkPrefix(m); msg != "" {
			v.addf(key, "%s", msg)
			continue
		}
		reached := slices.ContainsFunc(u.Routes, func(r Route) bool {
			return r.Prefix == m || strings.HasPrefix(m, r.Prefix+"/") || strings.HasPrefix(r.Prefix, m+"/")
		})
		if !reached {
			v.addf(key, "%q is not under (or over) any upstream.routes prefix (set upstream.money_routes to [] when no route moves money)", m)
		}
	}
}

// checkPrefix returns what is wrong with a route prefix, or "".
func checkPrefix(p string) string {
	switch {
	case !strings.HasPrefix(p, "/"):
		return fmt.Sprintf("%q must start with /", p)
	case strings.HasSuffix(p, "/"):
		return fmt.Sprintf("%q must not end with /", p)
	case strings.Contains(p, ".."), strings.Contains(p, "//"):
		return fmt.Sprintf("%q must not hold .. or //", p)
	case strings.ContainsAny(p, "%?#\\"):
		return fmt.Sprintf("%q must not hold %%, ?, # or \\ (no escapes, no query)", p)
	case strings.IndexFunc(p, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0:
		return fmt.Sprintf("%q must not hold spaces or control characters", p)
	}
	// The token endpoint, POST {base_url}/oauth/token, is never reachable.
	if l := strings.ToLower(p); l == "/oauth" || strings.HasPrefix(l, "/oauth/") {
		return fmt.Sprintf("%q is under /oauth, which is never forwarded", p)
	}
	return ""
}

func (r *Redis) validate(v *validator, prod bool) {
	if r.URL != "" {
		// Never show the url: it may hold a password.
		u, err := url.Parse(r.URL.Reveal())
		switch {
		case err != nil:
			v.addf("redis.url", "not a valid URL")
		case u.Scheme != "redis" && u.Scheme != "rediss":
			v.addf("redis.url", "scheme must be redis or rediss")
		case u.Host == "":
			v.addf("redis.url", "has no host")
		}
	}
	s := r.Sentinel
	if s.Master != "" && len(s.Addrs) == 0 {
		v.addf("redis.sentinel.addrs", "required when redis.sentinel.master is set")
	}
	if s.Master == "" && len(s.Addrs) > 0 {
		v.addf("redis.sentinel.master", "required when redis.sentinel.addrs is set")
	}
	for i, a := range s.Addrs {
		v.hostPort(fmt.Sprintf("redis.sentinel.addrs[%d]", i), a)
	}
	for i, a := range r.ClusterAddrs {
		v.hostPort(fmt.Sprintf("redis.cluster_addrs[%d]", i), a)
	}
	var modes []string
	if r.URL != "" {
		modes = append(modes, "redis.url")
	}
	if s.Master != "" || len(s.Addrs) > 0 {
		modes = append(modes, "redis.sentinel")
	}
	if len(r.ClusterAddrs) > 0 {
		modes = append(modes, "redis.cluster_addrs")
	}
	if len(modes) > 1 {
		v.addf(modes[1], "%s are mutually exclusive: set one", strings.Join(modes, " and "))
	}
	if r.URL != "" && (r.Username != "" || r.Password != "" || r.TLS) {
		v.addf("redis.username", "username, password and tls are for Sentinel and Cluster; with redis.url put them in the URL (redis://user:pass@host, rediss:// for TLS)")
	}
	if r.EncryptionKey == "" {
		if prod {
			v.addf("redis.encryption_key", "required when env is production")
		}
	} else if _, err := r.DecodedEncryptionKey(); err != nil {
		v.add(err)
	}
	if len(r.DecryptionKeys) > 0 && r.EncryptionKey == "" {
		v.addf("redis.decryption_keys", "needs redis.encryption_key: they are the keys it rotates from")
	}
	for i, k := range r.DecryptionKeys {
		if _, err := decodeEncryptionKey(fmt.Sprintf("redis.decryption_keys[%d]", i), k); err != nil {
			v.add(err)
		}
	}
	v.positive("redis.dial_timeout", int64(r.DialTimeout))
	v.positive("redis.read_timeout", int64(r.ReadTimeout))
	v.positive("redis.write_timeout", int64(r.WriteTimeout))
	if r.PoolSize < 0 {
		v.addf("redis.pool_size", "must not be negative (0 is the client's default)")
	}
	if prod && r.InProcessStore() {
		v.addf("redis.url", "required when env is production: the in-process store is not shared between instances")
	}
}

func (s *Session) validate(v *validator, prod bool) {
	v.cacheBytes("session.cache_bytes", s.CacheBytes)
	name := s.CookieName
	if name == "" {
		name = PlainCookieName
		if s.SecureCookie {
			name = SecureCookieName
		}
	}
	if prod && !s.SecureCookie {
		v.addf("session.secure_cookie", "must be true when env is production")
	}
	switch {
	case !isToken(name):
		v.addf("session.cookie_name", "%q is not a valid cookie name", name)
	case !s.SecureCookie && (strings.HasPrefix(name, "__Host-") || strings.HasPrefix(name, "__Secure-")):
		v.addf("session.cookie_name", "%q needs secure_cookie: true (browsers drop __Host- and __Secure- cookies without Secure)", name)
	case strings.HasPrefix(strings.TrimPrefix(strings.TrimPrefix(name, "__Host-"), "__Secure-"), LoginCookiePrefix):
		v.addf("session.cookie_name", "%q starts like the login cookies' names (%s…), which a login start may delete", name, LoginCookiePrefix)
	case prod && !strings.HasPrefix(name, "__Host-"):
		v.addf("session.cookie_name", "%q must start with __Host- when env is production (the browser then refuses the cookie without Secure, with a Domain, or with a Path other than /)", name)
	}
	v.positive("session.idle_timeout", int64(s.IdleTimeout))
	v.positive("session.absolute_timeout", int64(s.AbsoluteTimeout))
	if s.IdleTimeout > 0 && s.AbsoluteTimeout > 0 && s.IdleTimeout > s.AbsoluteTimeout {
		v.addf("session.idle_timeout", "must not exceed session.absolute_timeout (%s)", s.AbsoluteTimeout)
	}
	if len(s.Keys) == 0 && prod {
		v.addf("session.keys", "at least one key is required when env is production")
	}
	switch s.MobileDPoP {
	case "", MobileDPoPOff, MobileDPoPOptional, MobileDPoPRequired:
	default:
		v.addf("session.mobile_dpop", "%q is not one of off, optional, required", s.MobileDPoP)
	}
	for i, k := range s.Keys {
		if _, err := decodeSessionKey(i, k); err != nil {
			v.add(err)
		}
	}
}

func (a *Auth) validate(v *validator, prod bool) {
	switch a.Mode {
	case AuthModeOIDC:
		o := a.OIDC
		if o.Issuer == "" {
			v.addf("auth.oidc.issuer", "required when auth.mode is oidc")
		} else if msg := checkBaseURL(o.Issuer); msg != "" {
			v.addf("auth.oidc.issuer", "%s", msg)
		} else if prod && !isHTTPS(o.Issuer) && !isLoopback(o.Issuer) {
			v.addf("auth.oidc.issuer", "must be https when env is production")
		}
		if o.ClientID == "" {
			v.addf("auth.oidc.client_id", "required when auth.mode is oidc")
		}
		if o.RedirectURL == "" {
			v.addf("auth.oidc.redirect_url", "required when auth.mode is oidc")
		} else if msg := checkBaseURL(o.RedirectURL); msg != "" {
			v.addf("auth.oidc.redirect_url", "%s", msg)
		} else if prod && !isHTTPS(o.RedirectURL) {
			v.addf("auth.oidc.redirect_url", "must be https when env is production")
		}
		if o.UserIDClaim == "" {
			v.addf("auth.oidc.user_id_claim", "required when auth.mode is oidc")
		}
		if !slices.Contains(o.Scopes, "openid") {
			v.addf("auth.oidc.scopes", "must include openid")
		}
		switch o.Profile {
		case "":
		case OIDCProfileFAPI2:
			if o.ClientKeysFile == "" {
				v.addf("auth.oidc.client_keys_file", "required with auth.oidc.profile fapi2 (the client authenticates with private_key_jwt)")
			}
			if o.ClientSecret != "" {
				v.addf("auth.oidc.client_secret", "must be empty with auth.oidc.profile fapi2, which authenticates the client with auth.oidc.client_keys_file")
			}
		default:
			v.addf("auth.oidc.profile", "%q is not one of \"\" (OpenID Connect), fapi2", o.Profile)
		}
		if o.ClientKeyID != "" && o.ClientKeysFile == "" {
			v.addf("auth.oidc.client_key_id", "needs auth.oidc.client_keys_file")
		}
		if o.Profile == "" && o.ClientKeysFile != "" && o.ClientSecret != "" {
			v.addf("auth.oidc.client_secret", "set either it or auth.oidc.client_keys_file (private_key_jwt), not both: the keys would be used and the secret ignored")
		}
	case AuthModeDev:
		if prod {
			v.addf("auth.mode", "dev is refused when env is production")
		}
	default:
		v.addf("auth.mode", "%q is not one of oidc, dev", a.Mode)
	}
	for i, s := range a.MobileRedirectURIs {
		key := fmt.Sprintf("auth.mobile_redirect_uris[%d]", i)
		u, err := url.Parse(s)
		switch {
		case err != nil || u.Scheme == "":
			v.addf(key, "not an absolute URI (e.g. com.example.app:/callback)")
		case scriptSchemes[strings.ToLower(u.Scheme)]:
			// Never an app's redirect: a browser runs or renders it.
			v.addf(key, "the %s: scheme is refused: a browser would run or render it instead of opening an app (use the app's own scheme, an https link, or a loopback http address)", strings.ToLower(u.Scheme))
		case u.Fragment != "" || strings.Contains(s, "#"):
			v.addf(key, "must not hold a fragment")
		case prod && u.Scheme == "http" && !isLoopbackIP(u.Hostname()):
			// RFC 8252 section 7.3; localhost is not accepted (section 8.3:
			// NOT RECOMMENDED, it may resolve elsewhere or be firewalled).
			v.addf(key, "plain http is refused when env is production except to a loopback IP literal (RFC 8252 section 7.3: http://127.0.0.1:PORT/... or http://[::1]:PORT/..., not localhost)")
		}
	}
}

// scriptSchemes are URI schemes a browser runs or renders itself, never an
// app's redirect.
var scriptSchemes = map[string]bool{"javascript": true, "data": true, "vbscript": true, "blob": true, "file": true, "about": true, "filesystem": true}

// prefixList checks a list of CIDRs or addresses; in production a list
// whose union holds every address of a family (0.0.0.0/0, ::/0, written
// any way: two /1 halves, ::ffff:0.0.0.0/96 for every IPv4 address) is
// refused, why saying what it would allow.
func (v *validator) prefixList(key string, list []string, prod bool, why string) {
	var parsed []netip.Prefix
	alone := false
	for i, p := range list {
		var pfx netip.Prefix
		if x, err := netip.ParsePrefix(p); err == nil {
			pfx = x.Masked()
		} else if a, err := netip.ParseAddr(p); err == nil && a.Zone() == "" {
			pfx = netip.PrefixFrom(a, a.BitLen())
		} else {
			v.addf(fmt.Sprintf("%s[%d]", key, i), "%q is neither a CIDR nor an IP address (without a zone)", p)
			continue
		}
		parsed = append(parsed, pfx)
		switch {
		case prod && catchAll([]netip.Prefix{pfx}) != "":
			alone = true
			v.addf(fmt.Sprintf("%s[%d]", key, i), "%q trusts every address, which is refused when env is production: %s", p, why)
		case prod && tooWide(pfx):
			alone = true
			v.addf(fmt.Sprintf("%s[%d]", key, i), "%q is wider than a /%d (IPv4) or a /%d (IPv6), which is refused when env is production: it holds much of the internet's clients; %s", p, minBitsV4, minBitsV6, why)
		}
	}
	if !prod || alone {
		return
	}
	if fam := catchAll(parsed); fam != "" {
		v.addf(key, "%q together trust every %s address, which is refused when env is production: %s", list, fam, why)
	}
}

// minBitsV4 and minBitsV6 are the widest ranges production accepts in a
// trust list: a /8 holds a private network (10.0.0.0/8), a /16 a large
// operator's IPv6 network; anything wider holds clients.
const (
	minBitsV4 = 8
	minBitsV6 = 16
)

// tooWide reports whether p is wider than production accepts (an
// IPv4-mapped prefix counts as its IPv4 prefix). Private and local ranges
// (a data centre's own addresses) may be as wide as they are.
func tooWide(p netip.Prefix) bool {
	a := p.Addr()
	if a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		a = p.Addr()
	}
	for _, private := range privateRanges {
		if private.Bits() <= p.Bits() && private.Contains(a) {
			return false
		}
	}
	if a.Is4() {
		return p.Bits() < minBitsV4
	}
	return p.Bits() < minBitsV6
}

// privateRanges are not clients' addresses: RFC 1918, shared address
// space (RFC 6598), loopback, link-local, IPv6 unique local (RFC 4193).
var privateRanges = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("172.16.0.0/12"), netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("100.64.0.0/10"), netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("fc00::/7"), netip.MustParsePrefix("fe80::/10"), netip.MustParsePrefix("::1/128"),
}

// catchAll names the address family ("IPv4" or "IPv6") whose every
// address the prefixes hold together, or "". An IPv4-mapped IPv6 prefix
// (::ffff:0:0/96 and within) counts as the IPv4 prefix it maps.
func catchAll(list []netip.Prefix) string {
	var v4, v6 []netip.Prefix
	for _, p := range list {
		a := p.Addr()
		switch {
		case a.Is4In6() && p.Bits() >= 96:
			v4 = append(v4, netip.PrefixFrom(a.Unmap(), p.Bits()-96))
		case a.Is4():
			v4 = append(v4, p)
		default:
			if p.Bits() <= 96 && p.Contains(netip.MustParseAddr("::ffff:0.0.0.0")) {
				// A wider IPv6 prefix around ::ffff:0:0/96 holds every
				// IPv4-mapped address too.
				v4 = append(v4, netip.MustParsePrefix("0.0.0.0/0"))
			}
			v6 = append(v6, p)
		}
	}
	switch {
	case covers(v4, netip.MustParsePrefix("0.0.0.0/0")):
		return "IPv4"
	case covers(v6, netip.MustParsePrefix("::/0")):
		return "IPv6"
	}
	return ""
}

// covers reports whether the union of list holds every address of p: one
// entry holds p, or p's two halves are each covered. The recursion only
// goes as deep as the longest entry that overlaps p.
func covers(list []netip.Prefix, p netip.Prefix) bool {
	overlap := false
	for _, q := range list {
		if q.Bits() <= p.Bits() && q.Contains(p.Addr()) {
			return true
		}
		overlap = overlap || q.Overlaps(p)
	}
	if !overlap || p.Bits() == p.Addr().BitLen() {
		return false
	}
	lo := netip.PrefixFrom(p.Addr(), p.Bits()+1)
	hi := netip.PrefixFrom(upperHalf(p), p.Bits()+1)
	return covers(list, lo) && covers(list, hi)
}

// upperHalf is the first address of p's upper half.
func upperHalf(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	bit := p.Bits()
	b[bit/8] |= 0x80 >> (bit % 8)
	a, _ := netip.AddrFromSlice(b)
	return a
}

// validator collects problems.
type validator struct{ errs []error }

func (v *validator) add(err error) { v.errs = append(v.errs, err) }

func (v *validator) addf(key, format string, args ...any) {
	v.add(&Error{Key: key, Msg: fmt.Sprintf(format, args...)})
}

func (v *validator) positive(key string, n int64) {
	if n <= 0 {
		v.addf(key, "must be greater than 0")
	}
}

func (v *validator) hostPort(key, s string) {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		v.addf(key, "%q is not host:port", s)
		return
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		v.addf(key, "%q: port must be a number from 0 to 65535", s)
	}
}

// sameListener reports whether two listen addresses would collide: the same
// non-zero port on the same or a wildcard host.
func sameListener(a, b string) bool {
	ha, pa, err1 := net.SplitHostPort(a)
	hb, pb, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || pa != pb || pa == "0" {
		return false
	}
	wild := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	return ha == hb || wild(ha) || wild(hb)
}

// checkOrigin returns what keeps s from being a bare origin
// (scheme://host[:port]), or "". web limits the scheme to http and https.
// The value is not echoed: it could hold user:password.
func checkOrigin(s string, web bool) string {
	u, err := url.Parse(s)
	switch {
	case err != nil || u.Scheme == "" || u.Host == "" || u.Opaque != "":
		return "not an absolute URL of the form scheme://host[:port]"
	case web && u.Scheme != "http" && u.Scheme != "https":
		return "scheme must be http or https"
	case u.User != nil:
		return "must not hold user:password"
	case u.Path != "" && u.Path != "/", u.RawQuery != "", u.ForceQuery, u.Fragment != "", strings.Contains(s, "#"):
		return "must be an origin only (scheme://host[:port]), with no path, query or fragment"
	}
	return ""
}

// checkBaseURL returns what keeps s from being an absolute http(s) URL
// usable as a base (a path is allowed; a query, fragment or user:password
// is not), or "".
func checkBaseURL(s string) string {
	u, err := url.Parse(s)
	switch {
	case err != nil || u.Host == "" || u.Opaque != "":
		return "not an absolute http(s) URL"
	case u.Scheme != "http" && u.Scheme != "https":
		return "scheme must be http or https"
	case u.User != nil:
		return "must not hold user:password"
	case u.RawQuery != "", u.ForceQuery, u.Fragment != "", strings.Contains(s, "#"):
		return "must not hold a query or fragment"
	}
	return ""
}

// isHTTPS reports whether s parses as a URL with the https scheme.
func isHTTPS(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme == "https"
}

// isLoopback reports whether the URL's host is localhost or a loopback IP.
func isLoopback(s string) bool {
	u, err := url.Parse(s)
	if err != nil {
		return false
	}
	h := strings.ToLower(u.Hostname())
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.IsLoopback()
}

// isLoopbackIP reports whether host (without brackets or port) is a literal
// loopback IP: 127.0.0.0/8 or ::1, with no zone. Names such as localhost
// are not: they go through the resolver.
func isLoopbackIP(host string) bool {
	ip, err := netip.ParseAddr(host)
	if err != nil || ip.Zone() != "" {
		return false
	}
	return (ip.Is4() && ip.IsLoopback()) || ip == netip.IPv6Loopback()
}

// loopbackListener reports whether the listen address host:port binds a
// loopback IP literal only (":9090" and "0.0.0.0:9090" bind every address).
func loopbackListener(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && isLoopbackIP(host)
}

// isToken reports whether s is a non-empty RFC 7230 token, as a cookie
// name must be (RFC 6265 section 4.1.1).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`()<>@,;:\"/[]?={}`, c) >= 0 {
			return false
		}
	}
	return true
}

// maxCacheBytes bounds each in-process cache: 16 GiB.
const maxCacheBytes = 16 << 30

func (v *validator) cacheBytes(key string, n int64) {
	if n < 0 || n > maxCacheBytes {
		v.addf(key, "%d is not between 0 and %d", n, int64(maxCacheBytes))
	}
}

// stepUp checks payments.step_up: it needs an OpenID provider, an
// authentication class to ask for, money routes, and thresholds that read
// as amounts.
func (v *validator) stepUp(c *Config) {
	su := c.Payments.StepUp
	if !su.Enabled {
		return
	}
	if c.Auth.Mode != AuthModeOIDC {
		v.addf("payments.step_up.enabled", "needs auth.mode oidc: an approval is an authentication at the OpenID provider")
	}
	if len(su.ACRValues) == 0 {
		v.addf("payments.step_up.acr_values", "required: name the authentication class an approval must reach (the provider's, e.g. a second factor)")
	}
	for i, a := range su.ACRValues {
		if a == "" || strings.ContainsAny(a, " \"\\") {
			v.addf(fmt.Sprintf("payments.step_up.acr_values[%d]", i), "%q is not an acr value (no space, quote or backslash)", a)
		}
	}
	// Only the upstream's payment creations can be shown to the user for
	// approval, and both routes create payments: holding one and not the
	// other would let a held payment be made unheld on the other.
	creating := []string{"/v2/payments", "/v2/pay"}
	for i, r := range su.Routes {
		switch {
		case !slices.Contains(c.Upstream.MoneyRoutes, r):
			v.addf(fmt.Sprintf("payments.step_up.routes[%d]", i), "%q is not one of upstream.money_routes", r)
		case !slices.Contains(creating, r):
			v.addf(fmt.Sprintf("payments.step_up.routes[%d]", i), "%q creates no payment the BFF can show for approval (only /v2/payments and /v2/pay do)", r)
		}
	}
	if len(su.Routes) > 0 {
		for _, r := range creating {
			if slices.Contains(c.Upstream.MoneyRoutes, r) && !slices.Contains(su.Routes, r) {
				v.addf("payments.step_up.routes", "%q creates payments too (POST /v2/payments, or open-banking-init with paymentInformation): list both, or leave routes empty; held on one route, a payment could be made unheld on the other", r)
			}
		}
	}
	seen := map[string]bool{}
	for i, t := range su.Thresholds {
		key := fmt.Sprintf("payments.step_up.thresholds[%d]", i)
		cur, amount, ok := Threshold(t)
		if !ok {
			v.addf(key, "%q is not \"CUR amount\", e.g. \"EUR 100.00\"", t)
			continue
		}
		if seen[cur] {
			v.addf(key, "currency %q is listed twice", cur)
		}
		seen[cur] = true
		if len(cur) != 3 || strings.ToUpper(cur) != cur || strings.Trim(cur, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
			v.addf(key, "%q is not an ISO 4217 currency code (three capital letters)", cur)
		}
		if _, known := money.MinorDigits(cur); known {
			if _, err := money.ParseMinor(amount, cur); err != nil {
				v.addf(key, "%q is not an amount in %s: it %s", amount, cur, strings.TrimPrefix(err.Error(), "amount "))
			}
		} else if len(cur) == 3 && strings.ToUpper(cur) == cur {
			v.addf(key, "%q is not an ISO 4217 currency code this BFF knows", cur)
		}
	}
	if !su.Always && len(su.Thresholds) == 0 {
		v.addf("payments.step_up.thresholds", "set thresholds, or always: true (every payment is held)")
	}
	if su.MaxAge < 0 || su.MaxAge > time.Hour {
		v.addf("payments.step_up.max_age", "%s is not between 0 and 1h", su.MaxAge)
	}
	if su.HoldFor < time.Minute || su.HoldFor > 24*time.Hour {
		v.addf("payments.step_up.hold_for", "%s is not between 1m and 24h", su.HoldFor)
	}
}

// payments checks the payments section: a followed payment's waits, and a
// webhook path that needs a secret and must not shadow a route of the BFF.
func (v *validator) payments(c *Config) {
	p := c.Payments
	v.stepUp(c)
	if r := c.Payments.Receipts; r.KeyID != "" && r.KeysFile == "" {
		v.addf("payments.receipts.key_id", "needs payments.receipts.keys_file (the derived key has its own kid)")
	}
	switch {
	case p.WatchInterval < 0:
		v.addf("payments.watch_interval", "must not be negative (0 follows no payment)")
	case p.WatchInterval > 0 && p.WatchInterval < 100*time.Millisecond:
		v.addf("payments.watch_interval", "%s is below 100ms: the upstream's rate limit is spent on polling", p.WatchInterval)
	case p.WatchInterval > 0 && p.WatchMaxInterval < p.WatchInterval:
		v.addf("payments.watch_max_interval", "%s is below payments.watch_interval (%s)", p.WatchMaxInterval, p.WatchInterval)
	}
	if p.WatchInterval > 0 && p.WatchFor <= 0 {
		v.addf("payments.watch_for", "must be positive: a payment is followed for a bounded time")
	}
	if d := p.ListLag; d < 0 || d > time.Minute {
		v.addf("payments.list_lag", "%s is not between 0 and 1m (a lost answer's settling waits it once)", d)
	}
	if n := p.WatchBatch; n < 1 || n > 1000 {
		v.addf("payments.watch_batch", "%d is not between 1 and 1000", n)
	}
	if p.WebhookPath == "" {
		if len(p.WebhookSecrets) > 0 {
			v.addf("payments.webhook_secrets", "set without payments.webhook_path: no webhook is received")
		}
		return
	}
	switch {
	case !strings.HasPrefix(p.WebhookPath, "/") || strings.ContainsAny(p.WebhookPath, "?#*: ") || strings.Contains(p.WebhookPath, "//"):
		v.addf("payments.webhook_path", "%q is not an absolute path without query, wildcard or parameter", p.WebhookPath)
	case underAny(p.WebhookPath, "/api", "/auth", "/bff", "/healthz", "/readyz", "/metrics"):
		v.addf("payments.webhook_path", "%q is under a route of the BFF; use its own, such as /webhooks/payments", p.WebhookPath)
	}
	if len(p.WebhookSecrets) == 0 {
		v.addf("payments.webhook_secrets", "required with payments.webhook_path: an unsigned webhook is refused")
	}
	// Read as start-up reads them (webhooks.NewVerifier), so that bff -check
	// refuses what would stop every instance.
	for i, s := range p.WebhookSecrets {
		key := fmt.Sprintf("payments.webhook_secrets[%d]", i)
		if _, err := webhooks.ParseSecret(s.Reveal()); err != nil {
			v.addf(key, "%v", err)
		} else if c.Env == EnvProduction && webhooks.Published(s.Reveal()) {
			v.addf(key, "a secret printed in the BFF's repository (the upstream simulator's default, or one of its tests or docs), which anyone can sign with, is refused when env is production; use the secret the upstream gave you")
		}
	}
}

// underAny reports whether path is one of prefixes or under one.
func underAny(path string, prefixes ...string) bool {
	for _, p := range prefixes {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}
