package config

import (
	"encoding/base64"
	"errors"
	"regexp"
	"strings"
	"testing"
)

var fromEnv = regexp.MustCompile(` \(from BFF_[A-Z_]+\)`)

func TestValidate(t *testing.T) {
	short := base64.StdEncoding.EncodeToString(make([]byte, 31))
	tokenFile := writeFile(t, "admin_token", adminToken+"\n")
	shortTokenFile := writeFile(t, "short_token", "0123456789abcde\n")
	tests := []struct {
		name string
		base map[string]string // prodEnv when nil
		env  map[string]string
		yaml string
		want string // substring of the error; "" for a valid config
	}{
		{name: "production minimal"},
		{name: "development minimal", base: devEnv()},

		{name: "env unknown", env: map[string]string{"BFF_ENV": "staging"}, want: `env: "staging" is not one of production, development`},

		{name: "listen not host:port", env: map[string]string{"BFF_LISTEN": "8080"}, want: `listen: "8080" is not host:port`},
		{name: "admin_listen bad port", env: map[string]string{"BFF_ADMIN_LISTEN": ":http"}, want: `admin_listen: ":http": port must be a number`},
		{name: "listeners equal", env: map[string]string{"BFF_ADMIN_LISTEN": ":8080"}, want: `admin_listen: must differ from listen`},
		{name: "listeners overlap on wildcard", env: map[string]string{"BFF_ADMIN_LISTEN": "127.0.0.1:8080"}, want: `admin_listen: must differ from listen`},
		{name: "listeners on different hosts", env: map[string]string{"BFF_LISTEN": "10.0.0.1:8080", "BFF_ADMIN_LISTEN": "127.0.0.1:8080"}},
		{name: "listeners both port 0", base: devEnv(), env: map[string]string{"BFF_LISTEN": "127.0.0.1:0", "BFF_ADMIN_LISTEN": "127.0.0.1:0"}},

		{name: "public_url required in production", env: map[string]string{"BFF_PUBLIC_URL": ""}, want: `public_url: required when env is production`},
		{name: "public_url https in production", env: map[string]string{"BFF_PUBLIC_URL": "http://app.example.com"}, want: `public_url: must be https when env is production`},
		{name: "public_url http in development", base: devEnv(), env: map[string]string{"BFF_PUBLIC_URL": "http://localhost:3000"}},
		{name: "public_url with path", env: map[string]string{"BFF_PUBLIC_URL": "https://app.example.com/app"}, want: `public_url: must be an origin only`},
		{name: "public_url with query", env: map[string]string{"BFF_PUBLIC_URL": "https://app.example.com/?a=b"}, want: `public_url: must be an origin only`},
		{name: "public_url relative", env: map[string]string{"BFF_PUBLIC_URL": "app.example.com"}, want: `public_url: not an absolute URL`},
		{name: "public_url ftp", env: map[string]string{"BFF_PUBLIC_URL": "ftp://app.example.com"}, want: `public_url: scheme must be http or https`},

		{name: "trusted_proxies catch-all v4 in production", env: map[string]string{"BFF_TRUSTED_PROXIES": `["10.0.0.0/8", "0.0.0.0/0"]`}, want: `trusted_proxies[1]: "0.0.0.0/0" trusts every address, which is refused when env is production`},
		{name: "trusted_proxies catch-all v6 in production", env: map[string]string{"BFF_TRUSTED_PROXIES": `["::/0"]`}, want: `trusted_proxies[0]: "::/0" trusts every address`},
		{name: "trusted_proxies /0 of another address", env: map[string]string{"BFF_TRUSTED_PROXIES": `["10.1.2.3/0"]`}, want: `trusted_proxies[0]: "10.1.2.3/0" trusts every address`},
		{name: "trusted_proxies /0 of a v6 address", env: map[string]string{"BFF_TRUSTED_PROXIES": `["2001:db8::1/0"]`}, want: `trusted_proxies[0]: "2001:db8::1/0" trusts every address`},
		{name: "trusted_proxies /0 of a mapped address", env: map[string]string{"BFF_TRUSTED_PROXIES": `["::ffff:10.0.0.1/0"]`}, want: `trusted_proxies[0]: "::ffff:10.0.0.1/0" trusts every address`},
		{name: "trusted_proxies /1 in production", env: map[string]string{"BFF_TRUSTED_PROXIES": `["10.0.0.0/8", "0.0.0.0/1", "fd00::/8", "0.0.0.0"]`}, want: `trusted_proxies[1]: "0.0.0.0/1" is wider than`},
		{name: "trusted_proxies private ranges and single addresses in production", env: map[string]string{"BFF_TRUSTED_PROXIES": `["10.0.0.0/8", "fd00::/8", "0.0.0.0", "192.168.0.0/16"]`}},
		{name: "trusted_proxies catch-all as two halves", env: map[string]string{"BFF_TRUSTED_PROXIES": `["0.0.0.0/1", "128.0.0.0/1"]`}, want: `trusted_proxies[0]: "0.0.0.0/1" is wider than a /8`},
		{name: "trusted_proxies catch-all as four quarters out of order", env: map[string]string{"BFF_TRUSTED_PROXIES": `["192.0.0.0/2", "10.0.0.0/8", "0.0.0.0/2", "128.0.0.0/2", "64.0.0.0/2"]`}, want: `trusted_proxies[0]: "192.0.0.0/2" is wider than`},
		{name: "trusted_proxies every IPv4-mapped address", env: map[string]string{"BFF_TRUSTED_PROXIES": `["::ffff:0.0.0.0/96"]`}, want: `trusted_proxies[0]: "::ffff:0.0.0.0/96" trusts every address`},
		{name: "trusted_proxies mapped halves", env: map[string]string{"BFF_TRUSTED_PROXIES": `["::ffff:0.0.0.0/97", "128.0.0.0/1"]`}, want: `trusted_proxies[0]: "::ffff:0.0.0.0/97" is wider than`},
		{name: "trusted_proxies IPv6 halves", env: map[string]string{"BFF_TRUSTED_PROXIES": `["::/1", "8000::/1"]`}, want: `trusted_proxies[0]: "::/1" trusts every address`}, // it holds ::ffff:0:0/96, every IPv4 address
		{name: "trusted_proxies an IPv6 range around the mapped block", env: map[string]string{"BFF_TRUSTED_PROXIES": `["::/64"]`}, want: `trusted_proxies[0]: "::/64" trusts every address`},
		{name: "trusted_proxies unicast IPv4 in three", env: map[string]string{"BFF_TRUSTED_PROXIES": `["0.0.0.0/1", "128.0.0.0/2", "192.0.0.0/3"]`}, want: `trusted_proxies[0]: "0.0.0.0/1" is wider than a /8 (IPv4) or a /16 (IPv6)`},
		{name: "trusted_proxies every global IPv6", env: map[string]string{"BFF_TRUSTED_PROXIES": `["2000::/3"]`}, want: `trusted_proxies[0]: "2000::/3" is wider than`},
		{name: "trusted_proxies a mapped /4", env: map[string]string{"BFF_TRUSTED_PROXIES": `["::ffff:64.0.0.0/100"]`}, want: `is wider than`},
		{name: "step_up off by default"},
		{name: "step_up a bank-grade policy", env: map[string]string{"BFF_PAYMENTS_STEP_UP_ENABLED": "true",
			"BFF_PAYMENTS_STEP_UP_THRESHOLDS": `["EUR 100.00", "GBP 90"]`, "BFF_PAYMENTS_STEP_UP_ACR_VALUES": `["urn:bank:acr:mfa"]`}},
		{name: "step_up always", env: map[string]string{"BFF_PAYMENTS_STEP_UP_ENABLED": "true", "BFF_PAYMENTS_STEP_UP_ALWAYS": "true",
			"BFF_PAYMENTS_STEP_UP_ACR_VALUES": `["mfa"]`, "BFF_PAYMENTS_STEP_UP_ROUTES": `["/v2/payments", "/v2/pay"]`}},
		{name: "step_up on one creating route only", env: map[string]string{"BFF_PAYMENTS_STEP_UP_ENABLED": "true", "BFF_PAYMENTS_STEP_UP_ALWAYS": "true",
			"BFF_PAYMENTS_STEP_UP_ACR_VALUES": `["mfa"]`, "BFF_PAYMENTS_STEP_UP_ROUTES": `["/v2/payments"]`}, want: `payments.step_up.routes: "/v2/pay" creates payments too`},
		{name: "step_up on an operator's money route", env: map[string]string{"BFF_PAYMENTS_STEP_UP_ENABLED": "true", "BFF_PAYMENTS_STEP_UP_ALWAYS": "true",
			"BFF_PAYMENTS_STEP_UP_ACR_VALUES": `["mfa"]`, "BFF_UPSTREAM_MONEY_ROUTES": `["/v2/payments", "/v2/pay", "/v2/connections"]`,
			"BFF_PAYMENTS_STEP_UP_ROUTES": `["/v2/payments", "/v2/pay", "/v2/connections"]`}, want: `payments.step_up.routes[2]: "/v2/connections" creates no payment the BFF can show`},
		{name: "step_up without acr_values", env: map[string]string{"BFF_PAYMENTS_STEP_UP_ENABLED": "true", "BFF_PAYMENTS_STEP_UP_ALWAYS": "true"},
			want: "payments.step_up.acr_values: required"},
		{name: "step_up needs oidc", base: devEnv(), env: map[string]string{"BFF_PAYMENTS_STEP_UP_ENABLED": "true", "BFF_PAYMENTS_STEP_UP_ALWAYS": "true",
			"BFF_PAYMENTS_STEP_UP_ACR_VALUES": `["mfa"]`}, want: "payments.step_up.enabled: needs auth.mode oidc"},
		{name: "step_up without thresholds or always", env: map[string]string{"BFF_PAYMENTS_STEP_UP_ENABLED": "true", "BFF_PAYMENTS_STEP_UP_ACR_VALUES": `["mfa"]`},
			want: "payments.step_up.thresholds: set thresholds, or always: true"},
		{name: "step_up a threshold without an amount", env: map[string]string{"BFF_PAYMENTS_STEP_UP_ENABLED": "true", "BFF_PAYMENTS_STEP_UP_ACR_VALUES": `["mfa"]`,
			"BFF_PAYMENTS_STEP_UP_THRESHOLDS": `["EUR"]`}, want: `payments.step_up.thresholds[0]: "EUR" is not "CUR amount"`},
		{name: "step_up a threshold in lower case", env: map[string]string{"BFF_PAYMENTS_STEP_UP_ENABLED": "true", "BFF_PAYMENTS_STEP_UP_ACR_VALUES": `["mfa"]`,
			"BFF_PAYMENTS_STEP_UP_THRESHOLDS": `["eur 10"]`}, want: `payments.step_up.thresholds[0]: "eur" is not an ISO 4217 currency code`},
		{name: "step_up a negative threshold", env: map[string]string{"BFF_PAYMENTS_STEP_UP_ENABLED": "true", "BFF_PAYMENTS_STEP_UP_ACR_VALUES": `["mfa"]`,
			"BFF_PAYMENTS_STEP_UP_THRESHOLDS": `["EUR -1"]`}, want: `payments.step_up.thresholds[0]: "-1" is not an amount in EUR: it must not be negative`},
		{name: "step_up a currency twice", env: map[string]string{"BFF_PAYMENTS_STEP_UP_ENABLED": "true", "BFF_PAYMENTS_STEP_UP_ACR_VALUES": `["mfa"]`,
			"BFF_PAYMENTS_STEP_UP_THRESHOLDS": `["EUR 1", "EUR 2"]`}, want: `payments.step_up.thresholds[1]: currency "EUR" is listed twice`},
		{name: "step_up a route that moves no money", env: map[string]string{"BFF_PAYMENTS_STEP_UP_ENABLED": "true", "BFF_PAYMENTS_STEP_UP_ACR_VALUES": `["mfa"]`,
			"BFF_PAYMENTS_STEP_UP_ALWAYS": "true", "BFF_PAYMENTS_STEP_UP_ROUTES": `["/v2/merchants"]`}, want: `payments.step_up.routes[0]: "/v2/merchants" is not one of upstream.money_routes`},
		{name: "step_up an acr value with a quote", env: map[string]string{"BFF_PAYMENTS_STEP_UP_ENABLED": "true", "BFF_PAYMENTS_STEP_UP_ALWAYS": "true",
			"BFF_PAYMENTS_STEP_UP_ACR_VALUES": `["a\"b"]`}, want: `payments.step_up.acr_values[0]`},
		{name: "step_up a hold too short", env: map[string]string{"BFF_PAYMENTS_STEP_UP_ENABLED": "true", "BFF_PAYMENTS_STEP_UP_ALWAYS": "true",
			"BFF_PAYMENTS_STEP_UP_ACR_VALUES": `["mfa"]`, "BFF_PAYMENTS_STEP_UP_HOLD_FOR": "10s"}, want: `payments.step_up.hold_for: 10s is not between 1m and 24h`},
		{name: "step_up max_age over an hour", env: map[string]string{"BFF_PAYMENTS_STEP_UP_ENABLED": "true", "BFF_PAYMENTS_STEP_UP_ALWAYS": "true",
			"BFF_PAYMENTS_STEP_UP_ACR_VALUES": `["mfa"]`, "BFF_PAYMENTS_STEP_UP_MAX_AGE": "2h"}, want: `payments.step_up.max_age: 2h0m0s is not between 0 and 1h`},

		{name: "trusted_proxies a zone", env: map[string]string{"BFF_TRUSTED_PROXIES": `["::%eth0/0"]`}, want: `is neither a CIDR nor an IP address (without a zone)`},
		{name: "trusted_proxies private /8, CGNAT and a v6 /32 are allowed", env: map[string]string{"BFF_TRUSTED_PROXIES": `["10.0.0.0/8", "100.64.0.0/10", "2001:db8::/32", "fd00::/16"]`}},
		{name: "trusted_proxies wide ranges in development", base: devEnv(), env: map[string]string{"BFF_TRUSTED_PROXIES": `["0.0.0.0/1", "2000::/3"]`}},
		{name: "traceparent_from catch-all in production", env: map[string]string{"BFF_TRACEPARENT_FROM": `["0.0.0.0/1", "128.0.0.0/1"]`}, want: `traceparent_from[0]: "0.0.0.0/1" is wider than a /8`},
		{name: "traceparent_from not an address", env: map[string]string{"BFF_TRACEPARENT_FROM": `["collector"]`}, want: `traceparent_from[0]: "collector" is neither a CIDR nor an IP address`},
		{name: "traceparent_from a collector's range", env: map[string]string{"BFF_TRACEPARENT_FROM": `["10.1.0.0/16"]`}},
		{name: "no admin token in production unsaid", env: map[string]string{"BFF_ADMIN_MUTATIONS_DISABLED": "false"}, want: `admin_token_file: required when env is production`},
		{name: "no admin token in development", base: devEnv()},
		{name: "mobile redirect javascript", env: map[string]string{"BFF_AUTH_MOBILE_REDIRECT_URIS": `["javascript:alert(1)"]`}, want: `auth.mobile_redirect_uris[0]: the javascript: scheme is refused`},
		{name: "mobile redirect data", env: map[string]string{"BFF_AUTH_MOBILE_REDIRECT_URIS": `["DATA:text/html,<script>x</script>"]`}, want: `auth.mobile_redirect_uris[0]: the data: scheme is refused`},
		{name: "mobile redirect javascript in development", base: devEnv(), env: map[string]string{"BFF_AUTH_MOBILE_REDIRECT_URIS": `["javascript://x/%0aalert(1)"]`}, want: `the javascript: scheme is refused`},
		{name: "limits.ipv6_prefix too short", env: map[string]string{"BFF_LIMITS_IPV6_PREFIX": "16"}, want: `16 is not between 32 and 128`},
		{name: "trusted_proxies catch-all in development", base: devEnv(), env: map[string]string{"BFF_TRUSTED_PROXIES": `["0.0.0.0/0", "::/0"]`}},

		{name: "pprof on all interfaces in production", env: map[string]string{"BFF_PPROF": "true"}, want: `pprof: true is refused when env is production unless admin_listen (":9090") is on a loopback address`},
		{name: "pprof on 0.0.0.0 in production", env: map[string]string{"BFF_PPROF": "true", "BFF_ADMIN_LISTEN": "0.0.0.0:9090"}, want: `pprof: true is refused when env is production unless admin_listen ("0.0.0.0:9090")`},
		{name: "pprof on [::] in production", env: map[string]string{"BFF_PPROF": "true", "BFF_ADMIN_LISTEN": "[::]:9090"}, want: `pprof: true is refused when env is production`},
		{name: "pprof on a private address in production", env: map[string]string{"BFF_PPROF": "true", "BFF_ADMIN_LISTEN": "10.0.0.5:9090"}, want: `pprof: true is refused when env is production`},
		{name: "pprof on localhost in production", env: map[string]string{"BFF_PPROF": "true", "BFF_ADMIN_LISTEN": "localhost:9090"}, want: `pprof: true is refused when env is production`},
		{name: "pprof on 127.0.0.1 in production", env: map[string]string{"BFF_PPROF": "true", "BFF_ADMIN_LISTEN": "127.0.0.1:9090"}},
		{name: "pprof on [::1] in production", env: map[string]string{"BFF_PPROF": "true", "BFF_ADMIN_LISTEN": "[::1]:9090"}},
		{name: "pprof off on all interfaces in production", env: map[string]string{"BFF_PPROF": "false", "BFF_ADMIN_LISTEN": ":9090"}},
		{name: "pprof on all interfaces in development", base: devEnv(), env: map[string]string{"BFF_PPROF": "true"}},

		{name: "admin_token_file readable", env: map[string]string{"BFF_ADMIN_TOKEN_FILE": tokenFile}},
		{name: "admin_token_file missing", env: map[string]string{"BFF_ADMIN_TOKEN_FILE": "/nonexistent/admin_token"}, want: `admin_token_file: open /nonexistent/admin_token: no such file or directory`},
		{name: "admin_token_file empty", env: map[string]string{"BFF_ADMIN_TOKEN_FILE": "/dev/null"}, want: `admin_token_file: /dev/null is empty`},
		{name: "admin_token_file short", env: map[string]string{"BFF_ADMIN_TOKEN_FILE": shortTokenFile}, want: `admin_token_file: the token in ` + shortTokenFile + ` is shorter than 16 characters`},
		{name: "admin_token_file short in development", base: devEnv(), env: map[string]string{"BFF_ADMIN_TOKEN_FILE": shortTokenFile}, want: `admin_token_file: the token in ` + shortTokenFile + ` is shorter than 16 characters`},
		{name: "public_url userinfo", env: map[string]string{"BFF_PUBLIC_URL": "https://u:p@app.example.com"}, want: `public_url: must not hold user:password`},

		{name: "trusted_proxies cidr and ip", env: map[string]string{"BFF_TRUSTED_PROXIES": `["10.0.0.0/8", "192.0.2.1", "2001:db8::/32"]`}},
		{name: "trusted_proxies bad", env: map[string]string{"BFF_TRUSTED_PROXIES": `["10.0.0.0/8", "10.0.0.0/33"]`}, want: `trusted_proxies[1]: "10.0.0.0/33" is neither a CIDR nor an IP address`},

		{name: "shutdown_timeout zero", env: map[string]string{"BFF_SHUTDOWN_TIMEOUT": "0"}, want: `shutdown_timeout: must be greater than 0`},
		{name: "shutdown_delay zero", env: map[string]string{"BFF_SHUTDOWN_DELAY": "0s"}},
		{name: "shutdown_delay negative", env: map[string]string{"BFF_SHUTDOWN_DELAY": "-1s"}, want: `shutdown_delay: must not be negative`},
		{name: "log_level", env: map[string]string{"BFF_LOG_LEVEL": "trace"}, want: `log_level: "trace" is not one of debug, info, warn, error`},

		{name: "upstream.timeout null", yaml: "upstream:\n  timeout:\n", want: `upstream.timeout: must be greater than 0`},
		{name: "upstream.timeout zero", env: map[string]string{"BFF_UPSTREAM_TIMEOUT": "0s"}, want: `upstream.timeout: must be greater than 0`},
		{name: "idle_timeout zero", env: map[string]string{"BFF_SESSION_IDLE_TIMEOUT": "0s"}, want: `session.idle_timeout: must be greater than 0`},
		{name: "absolute_timeout zero", env: map[string]string{"BFF_SESSION_ABSOLUTE_TIMEOUT": "0s"}, want: `session.absolute_timeout: must be greater than 0`},
		{name: "idle over absolute", env: map[string]string{"BFF_SESSION_IDLE_TIMEOUT": "13h"}, want: `session.idle_timeout: must not exceed session.absolute_timeout (12h0m0s)`},
		{name: "max_token_ttl zero", env: map[string]string{"BFF_UPSTREAM_MAX_TOKEN_TTL": "0s"}, want: `upstream.max_token_ttl: must be greater than 0`},
		{name: "refresh_before zero", env: map[string]string{"BFF_UPSTREAM_REFRESH_BEFORE": "0s"}},
		{name: "refresh_before negative", env: map[string]string{"BFF_UPSTREAM_REFRESH_BEFORE": "-1s"}, want: `upstream.refresh_before: must not be negative`},
		{name: "refresh_before not below ttl", env: map[string]string{"BFF_UPSTREAM_REFRESH_BEFORE": "1h"}, want: `upstream.refresh_before: must be shorter than upstream.max_token_ttl`},
		{name: "base_delay zero", env: map[string]string{"BFF_UPSTREAM_RETRY_BASE_DELAY": "0s"}, want: `upstream.retry.base_delay: must be greater than 0`},
		{name: "max_delay zero", env: map[string]string{"BFF_UPSTREAM_RETRY_MAX_DELAY": "0s"}, want: `upstream.retry.max_delay: must be greater than 0`},
		{name: "base over max delay", env: map[string]string{"BFF_UPSTREAM_RETRY_BASE_DELAY": "2s"}, want: `upstream.retry.base_delay: must not exceed upstream.retry.max_delay`},
		{name: "max_attempts 0", env: map[string]string{"BFF_UPSTREAM_RETRY_MAX_ATTEMPTS": "0"}, want: `upstream.retry.max_attempts: 0 is not between 1 and 10`},
		{name: "max_attempts 11", env: map[string]string{"BFF_UPSTREAM_RETRY_MAX_ATTEMPTS": "11"}, want: `upstream.retry.max_attempts: 11 is not between 1 and 10`},
		{name: "max_attempts 1 and 10", env: map[string]string{"BFF_UPSTREAM_RETRY": "{max_attempts: 1}", "BFF_UPSTREAM_RETRY_MAX_ATTEMPTS": "10"}},
		{name: "max_body_bytes zero", env: map[string]string{"BFF_UPSTREAM_MAX_BODY_BYTES": "0"}, want: `upstream.max_body_bytes: must be greater than 0`},
		{name: "expires_in_unit", env: map[string]string{"BFF_UPSTREAM_EXPIRES_IN_UNIT": "minutes"}, want: `upstream.expires_in_unit: "minutes" is not one of seconds, milliseconds`},
		{name: "expires_in_unit milliseconds", env: map[string]string{"BFF_UPSTREAM_EXPIRES_IN_UNIT": "milliseconds"}},

		{name: "base_url required", env: map[string]string{"BFF_UPSTREAM_BASE_URL": ""}, want: `upstream.base_url: required`},
		{name: "base_url relative", env: map[string]string{"BFF_UPSTREAM_BASE_URL": "/api"}, want: `upstream.base_url: not an absolute http(s) URL`},
		{name: "base_url scheme", env: map[string]string{"BFF_UPSTREAM_BASE_URL": "ws://api.example.com"}, want: `upstream.base_url: scheme must be http or https`},
		{name: "base_url http in production", env: map[string]string{"BFF_UPSTREAM_BASE_URL": "http://api.example.com"}, want: `upstream.base_url: must be https when env is production`},
		{name: "base_url http loopback in production", env: map[string]string{"BFF_UPSTREAM_BASE_URL": "http://127.0.0.1:9000"}},
		{name: "base_url http localhost in production", env: map[string]string{"BFF_UPSTREAM_BASE_URL": "http://localhost:9000"}},
		{name: "base_url http ::1 in production", env: map[string]string{"BFF_UPSTREAM_BASE_URL": "http://[::1]:9000"}},
		{name: "base_url http in development", base: devEnv(), env: map[string]string{"BFF_UPSTREAM_BASE_URL": "http://upstream:9000"}},
		{name: "base_url query", env: map[string]string{"BFF_UPSTREAM_BASE_URL": "https://api.example.com?x=1"}, want: `upstream.base_url: must not hold a query or fragment`},
		{name: "client_id required", env: map[string]string{"BFF_UPSTREAM_CLIENT_ID": ""}, want: `upstream.client_id: required`},
		{name: "client secret required", env: map[string]string{"BFF_UPSTREAM_CLIENT_SECRET": ""}, want: `upstream.client_secret: required: set client_secret or client_secret_file`},
		{name: "client secret both", env: map[string]string{"BFF_UPSTREAM_CLIENT_SECRET_FILE": "/dev/null"}, want: `upstream.client_secret_file: set client_secret or client_secret_file, not both`},
		{name: "client secret file missing", env: map[string]string{"BFF_UPSTREAM_CLIENT_SECRET": "", "BFF_UPSTREAM_CLIENT_SECRET_FILE": "/nonexistent/secret"}, want: `upstream.client_secret_file: open /nonexistent/secret: no such file or directory`},
		{name: "client secret file empty", env: map[string]string{"BFF_UPSTREAM_CLIENT_SECRET": "", "BFF_UPSTREAM_CLIENT_SECRET_FILE": "/dev/null"}, want: `upstream.client_secret_file: /dev/null is empty`},

		{name: "routes empty", env: map[string]string{"BFF_UPSTREAM_ROUTES": "[]"}, want: `upstream.routes: at least one route is required`},
		{name: "route without slash", env: map[string]string{"BFF_UPSTREAM_ROUTES": "[{prefix: v2/x, methods: [GET]}]"}, want: `upstream.routes[0].prefix: "v2/x" must start with /`},
		{name: "route trailing slash", env: map[string]string{"BFF_UPSTREAM_ROUTES": "[{prefix: /v2/x/, methods: [GET]}]"}, want: `upstream.routes[0].prefix: "/v2/x/" must not end with /`},
		{name: "route slash only", env: map[string]string{"BFF_UPSTREAM_ROUTES": "[{prefix: /, methods: [GET]}]"}, want: `must not end with /`},
		{name: "route dotdot", env: map[string]string{"BFF_UPSTREAM_ROUTES": "[{prefix: /v2/../oauth, methods: [GET]}]"}, want: `must not hold .. or //`},
		{name: "route double slash", env: map[string]string{"BFF_UPSTREAM_ROUTES": "[{prefix: /v2//x, methods: [GET]}]"}, want: `must not hold .. or //`},
		{name: "route percent", env: map[string]string{"BFF_UPSTREAM_ROUTES": "[{prefix: /v2/%2e, methods: [GET]}]"}, want: `must not hold %, ?, # or \`},
		{name: "route query", env: map[string]string{"BFF_UPSTREAM_ROUTES": "[{prefix: '/v2/x?a=b', methods: [GET]}]"}, want: `must not hold %, ?, # or \`},
		{name: "route space", env: map[string]string{"BFF_UPSTREAM_ROUTES": "[{prefix: '/v2/x y', methods: [GET]}]"}, want: `must not hold spaces or control characters`},
		{name: "route oauth", env: map[string]string{"BFF_UPSTREAM_ROUTES": "[{prefix: /oauth, methods: [POST]}]"}, want: `upstream.routes[0].prefix: "/oauth" is under /oauth, which is never forwarded`},
		{name: "route under oauth", env: map[string]string{"BFF_UPSTREAM_ROUTES": "[{prefix: /oauth/token, methods: [POST]}]"}, want: `is under /oauth`},
		{name: "route under OAuth", env: map[string]string{"BFF_UPSTREAM_ROUTES": "[{prefix: /OAuth/token, methods: [POST]}]"}, want: `is under /oauth`},
		{name: "route oauthx is fine", env: map[string]string{"BFF_UPSTREAM_ROUTES": "[{prefix: /oauthx, methods: [POST]}]", "BFF_UPSTREAM_MONEY_ROUTES": "[]"}},
		{name: "route duplicate", env: map[string]string{"BFF_UPSTREAM_ROUTES": "[{prefix: /v2/x, methods: [GET]}, {prefix: /v2/x, methods: [POST]}]"}, want: `upstream.routes[1].prefix: "/v2/x" is already upstream.routes[0].prefix`},
		{name: "route no methods", env: map[string]string{"BFF_UPSTREAM_ROUTES": "[{prefix: /v2/x}]"}, want: `upstream.routes[0].methods: at least one method is required`},
		{name: "route bad method", env: map[string]string{"BFF_UPSTREAM_ROUTES": "[{prefix: /v2/x, methods: [GET, TRACE]}]"}, want: `upstream.routes[0].methods[1]: "TRACE" is not one of GET HEAD POST PUT PATCH DELETE OPTIONS`},
		{name: "route lower-case methods", env: map[string]string{"BFF_UPSTREAM_ROUTES": "[{prefix: /v2/x, methods: [get, head, options]}]", "BFF_UPSTREAM_MONEY_ROUTES": "[]"}},
		{name: "money route typo", env: map[string]string{"BFF_UPSTREAM_MONEY_ROUTES": "[/v2/paymnets]"}, want: `upstream.money_routes[0]: "/v2/paymnets" is not under (or over) any upstream.routes prefix`},
		{name: "money route malformed", env: map[string]string{"BFF_UPSTREAM_MONEY_ROUTES": "[v2/payments/]"}, want: `upstream.money_routes[0]: "v2/payments/" must start with /`},
		{name: "money route under a route", env: map[string]string{"BFF_UPSTREAM_MONEY_ROUTES": "[/v2/pay/open-banking-init]"}},
		{name: "ledger required in production", env: map[string]string{"BFF_LEDGER_POSTGRES_URL": ""}, want: `ledger.postgres_url: required when env is production`},
		{name: "ledger scheme", env: map[string]string{"BFF_LEDGER_POSTGRES_URL": "mysql://u:" + ledgerPassword + "@db/x"}, want: `ledger.postgres_url: must be a postgres:// or postgresql:// URL`},
		{name: "ledger max conns", env: map[string]string{"BFF_LEDGER_MAX_CONNS": "-1"}, want: `ledger.max_conns: -1 is not between 0 and 1000`},

		{name: "sessions per user off", env: map[string]string{"BFF_LIMITS_SESSIONS_PER_USER": "0"}},
		{name: "sessions per user 1", env: map[string]string{"BFF_LIMITS_SESSIONS_PER_USER": "1"}},
		{name: "sessions per user 10000", env: map[string]string{"BFF_LIMITS_SESSIONS_PER_USER": "10000"}},
		{name: "sessions per user negative", env: map[string]string{"BFF_LIMITS_SESSIONS_PER_USER": "-1"}, want: `limits.sessions_per_user: -1 is not between 0 (off) and 10000`},
		{name: "sessions per user too many", env: map[string]string{"BFF_LIMITS_SESSIONS_PER_USER": "10001"}, want: `limits.sessions_per_user: 10001 is not between 0 (off) and 10000`},
		{name: "sessions per user in yaml", yaml: "limits:\n  sessions_per_user: 20000\n", want: `limits.sessions_per_user: 20000 is not between 0 (off) and 10000`},
		{name: "streams per address negative", env: map[string]string{"BFF_LIMITS_STREAMS_PER_ADDRESS": "-1"}, want: `limits.streams_per_address: -1 is not between 0 (no cap) and 1000000`},
		{name: "streams per address in yaml", yaml: "limits:\n  streams_per_address: 1000001\n", want: `limits.streams_per_address: 1000001 is not between 0 (no cap) and 1000000`},
		{name: "streams per instance negative", env: map[string]string{"BFF_LIMITS_STREAMS_PER_INSTANCE": "-1"}, want: `limits.streams_per_instance: -1 is not between 0 (half the descriptor limit) and 1000000`},
		{name: "streams per instance too many", env: map[string]string{"BFF_LIMITS_STREAMS_PER_INSTANCE": "2000000"}, want: `limits.streams_per_instance: 2000000 is not between 0 (half the descriptor limit) and 1000000`},

		{name: "redis scheme", env: map[string]string{"BFF_REDIS_URL": "http://" + redisPassword + "@redis:6379"}, want: `redis.url: scheme must be redis or rediss`},
		{name: "redis rediss", env: map[string]string{"BFF_REDIS_URL": "rediss://:" + redisPassword + "@redis:6380/1"}},
		{name: "redis bad url", env: map[string]string{"BFF_REDIS_URL": "redis://" + redisPassword + "%zz@redis"}, want: `redis.url: not a valid URL`},
		{name: "sentinel master without addrs", env: map[string]string{"BFF_REDIS_URL": "", "BFF_REDIS_SENTINEL_MASTER": "m"}, want: `redis.sentinel.addrs: required when redis.sentinel.master is set`},
		{name: "sentinel addrs without master", env: map[string]string{"BFF_REDIS_URL": "", "BFF_REDIS_SENTINEL_ADDRS": "[s:26379]"}, want: `redis.sentinel.master: required when redis.sentinel.addrs is set`},
		{name: "sentinel bad addr", env: map[string]string{"BFF_REDIS_URL": "", "BFF_REDIS_SENTINEL": "{master: m, addrs: [s1]}"}, want: `redis.sentinel.addrs[0]: "s1" is not host:port`},
		{name: "sentinel ok", env: map[string]string{"BFF_REDIS_URL": "", "BFF_REDIS_SENTINEL": "{master: m, addrs: [s1:26379], password: " + sentinelSecret + "}"}},
		{name: "url and sentinel", env: map[string]string{"BFF_REDIS_SENTINEL": "{master: m, addrs: [s1:26379]}"}, want: `redis.sentinel: redis.url and redis.sentinel are mutually exclusive`},
		{name: "url and cluster", env: map[string]string{"BFF_REDIS_CLUSTER_ADDRS": "[c1:6379]"}, want: `redis.url and redis.cluster_addrs are mutually exclusive`},
		{name: "sentinel and cluster", env: map[string]string{"BFF_REDIS_URL": "", "BFF_REDIS_SENTINEL": "{master: m, addrs: [s1:26379]}", "BFF_REDIS_CLUSTER_ADDRS": "[c1:6379]"}, want: `redis.sentinel and redis.cluster_addrs are mutually exclusive`},
		{name: "cluster bad addr", env: map[string]string{"BFF_REDIS_URL": "", "BFF_REDIS_CLUSTER_ADDRS": "[c1]"}, want: `redis.cluster_addrs[0]: "c1" is not host:port`},
		{name: "encryption_key required in production", env: map[string]string{"BFF_REDIS_ENCRYPTION_KEY": ""}, want: `redis.encryption_key: required when env is production`},
		{name: "encryption_key optional in development", base: devEnv()},
		{name: "encryption_key bad base64", env: map[string]string{"BFF_REDIS_ENCRYPTION_KEY": "!!!" + encryptionKey}, want: `redis.encryption_key: not valid base64`},
		{name: "encryption_key short", env: map[string]string{"BFF_REDIS_ENCRYPTION_KEY": short}, want: `redis.encryption_key: decodes to 31 bytes, want exactly 32`},
		{name: "encryption_key long", env: map[string]string{"BFF_REDIS_ENCRYPTION_KEY": base64.StdEncoding.EncodeToString(make([]byte, 33))}, want: `redis.encryption_key: decodes to 33 bytes, want exactly 32`},
		{name: "decryption_keys short", env: map[string]string{"BFF_REDIS_DECRYPTION_KEYS": "[" + decryptionKey + ", " + short + "]"}, want: `redis.decryption_keys[1]: decodes to 31 bytes, want exactly 32`},
		{name: "decryption_keys bad base64", env: map[string]string{"BFF_REDIS_DECRYPTION_KEYS": "['*" + decryptionKey + "']"}, want: `redis.decryption_keys[0]: not valid base64`},
		{name: "decryption_keys without encryption_key", base: devEnv(), env: map[string]string{"BFF_REDIS_DECRYPTION_KEYS": "[" + decryptionKey + "]"}, want: `redis.decryption_keys: needs redis.encryption_key`},
		{name: "in-process store in production", env: map[string]string{"BFF_REDIS_URL": ""}, yaml: "redis: {url: \"\"}\n", want: `redis.url: required when env is production: the in-process store is not shared between instances`},
		{name: "pool_size negative", env: map[string]string{"BFF_REDIS_POOL_SIZE": "-1"}, want: `redis.pool_size: must not be negative`},
		{name: "dial_timeout zero", env: map[string]string{"BFF_REDIS_DIAL_TIMEOUT": "0"}, want: `redis.dial_timeout: must be greater than 0`},

		{name: "session keys required in production", env: map[string]string{"BFF_SESSION_KEYS": "[]"}, want: `session.keys: at least one key is required when env is production`},
		{name: "session keys optional in development", base: devEnv(), env: map[string]string{"BFF_SESSION_KEYS": "[]"}},
		{name: "session key short", env: map[string]string{"BFF_SESSION_KEYS": "[" + sessionKey + ", " + short + "]"}, want: `session.keys[1]: decodes to 31 bytes, want at least 32`},
		{name: "session key bad base64", env: map[string]string{"BFF_SESSION_KEYS": "['" + sessionKey + "*']"}, want: `session.keys[0]: not valid base64`},
		{name: "cookie __Host- insecure", base: devEnv(), env: map[string]string{"BFF_SESSION_SECURE_COOKIE": "false", "BFF_SESSION_COOKIE_NAME": "__Host-sid"}, want: `session.cookie_name: "__Host-sid" needs secure_cookie: true`},
		{name: "cookie named like the login cookies", base: devEnv(), env: map[string]string{"BFF_SESSION_COOKIE_NAME": "bff_login_x"}, want: `session.cookie_name: "bff_login_x" starts like the login cookies' names`},
		{name: "cookie __Secure- insecure", base: devEnv(), env: map[string]string{"BFF_SESSION_SECURE_COOKIE": "false", "BFF_SESSION_COOKIE_NAME": "__Secure-sid"}, want: `session.cookie_name: "__Secure-sid" needs secure_cookie: true`},
		{name: "cookie __Secure- secure", base: devEnv(), env: map[string]string{"BFF_SESSION_COOKIE_NAME": "__Secure-sid"}},
		{name: "cookie __Secure- in production", env: map[string]string{"BFF_SESSION_COOKIE_NAME": "__Secure-sid"}, want: `session.cookie_name: "__Secure-sid" must start with __Host- when env is production`},
		{name: "cookie plain name in production", env: map[string]string{"BFF_SESSION_COOKIE_NAME": "sid"}, want: `session.cookie_name: "sid" must start with __Host- when env is production`},
		{name: "cookie lower-case prefix in production", env: map[string]string{"BFF_SESSION_COOKIE_NAME": "__host-sid"}, want: `session.cookie_name: "__host-sid" must start with __Host-`},
		{name: "cookie __Host- in production", env: map[string]string{"BFF_SESSION_COOKIE_NAME": "__Host-sid"}},
		{name: "cookie plain name in development", base: devEnv(), env: map[string]string{"BFF_SESSION_COOKIE_NAME": "sid"}},
		{name: "secure_cookie false in production", env: map[string]string{"BFF_SESSION_SECURE_COOKIE": "false"}, want: `session.secure_cookie: must be true when env is production`},
		{name: "secure_cookie false names the derived cookie in production", env: map[string]string{"BFF_SESSION_SECURE_COOKIE": "false"}, want: `session.cookie_name: "bff_session" must start with __Host- when env is production`},
		{name: "secure_cookie false in development", base: devEnv(), env: map[string]string{"BFF_SESSION_SECURE_COOKIE": "false"}},
		{name: "cookie name invalid", env: map[string]string{"BFF_SESSION_COOKIE_NAME": "my session"}, want: `session.cookie_name: "my session" is not a valid cookie name`},

		{name: "auth mode unknown", env: map[string]string{"BFF_AUTH_MODE": "saml"}, want: `auth.mode: "saml" is not one of oidc, dev`},
		{name: "auth dev in production", env: map[string]string{"BFF_AUTH_MODE": "dev"}, want: `config: auth.mode: dev is refused when env is production`},
		{name: "auth dev in production from file", yaml: "auth: {mode: dev}\n", want: `config: auth.mode: dev is refused when env is production`},
		{name: "oidc issuer required", env: map[string]string{"BFF_AUTH_OIDC_ISSUER": ""}, want: `auth.oidc.issuer: required when auth.mode is oidc`},
		{name: "oidc issuer http", env: map[string]string{"BFF_AUTH_OIDC_ISSUER": "http://id.example.com"}, want: `auth.oidc.issuer: must be https when env is production`},
		{name: "oidc client_id required", env: map[string]string{"BFF_AUTH_OIDC_CLIENT_ID": ""}, want: `auth.oidc.client_id: required when auth.mode is oidc`},
		{name: "oidc client_secret optional", env: map[string]string{"BFF_AUTH_OIDC_CLIENT_SECRET": ""}},
		{name: "oidc redirect_url required", env: map[string]string{"BFF_AUTH_OIDC_REDIRECT_URL": ""}, want: `auth.oidc.redirect_url: required when auth.mode is oidc`},
		{name: "oidc redirect_url relative", env: map[string]string{"BFF_AUTH_OIDC_REDIRECT_URL": "/auth/callback"}, want: `auth.oidc.redirect_url: not an absolute http(s) URL`},
		{name: "oidc redirect_url http in production", env: map[string]string{"BFF_AUTH_OIDC_REDIRECT_URL": "http://app.example.com/auth/callback"}, want: `auth.oidc.redirect_url: must be https when env is production`},
		{name: "oidc redirect_url http loopback in production", env: map[string]string{"BFF_AUTH_OIDC_REDIRECT_URL": "http://127.0.0.1:8080/auth/callback"}, want: `auth.oidc.redirect_url: must be https when env is production`},
		{name: "oidc redirect_url http in development", base: devEnv(), env: map[string]string{"BFF_AUTH_MODE": "oidc", "BFF_AUTH_OIDC_ISSUER": "http://localhost:8082", "BFF_AUTH_OIDC_CLIENT_ID": "bff-web", "BFF_AUTH_OIDC_REDIRECT_URL": "http://localhost:8080/auth/callback"}},
		{name: "oidc user_id_claim required", yaml: "auth:\n  oidc:\n    user_id_claim: \"\"\n", want: `auth.oidc.user_id_claim: required when auth.mode is oidc`},
		{name: "oidc scopes need openid", env: map[string]string{"BFF_AUTH_OIDC_SCOPES": "[profile]"}, want: `auth.oidc.scopes: must include openid`},
		{name: "oidc profile unknown", env: map[string]string{"BFF_AUTH_OIDC_PROFILE": "fapi1"}, want: `auth.oidc.profile: "fapi1" is not one of "" (OpenID Connect), fapi2`},
		{name: "oidc fapi2 needs client keys", env: map[string]string{"BFF_AUTH_OIDC_PROFILE": "fapi2", "BFF_AUTH_OIDC_CLIENT_SECRET": ""}, want: `auth.oidc.client_keys_file: required with auth.oidc.profile fapi2`},
		{name: "oidc fapi2 refuses a secret", env: map[string]string{"BFF_AUTH_OIDC_PROFILE": "fapi2", "BFF_AUTH_OIDC_CLIENT_KEYS_FILE": "/run/keys.json", "BFF_AUTH_OIDC_CLIENT_SECRET": "s"}, want: `auth.oidc.client_secret: must be empty with auth.oidc.profile fapi2`},
		{name: "oidc fapi2 with keys", env: map[string]string{"BFF_AUTH_OIDC_PROFILE": "fapi2", "BFF_AUTH_OIDC_CLIENT_KEYS_FILE": "/run/keys.json", "BFF_AUTH_OIDC_CLIENT_SECRET": ""}},
		{name: "oidc client_key_id needs the file", env: map[string]string{"BFF_AUTH_OIDC_CLIENT_KEY_ID": "k2"}, want: `auth.oidc.client_key_id: needs auth.oidc.client_keys_file`},
		{name: "oidc keys and a secret", env: map[string]string{"BFF_AUTH_OIDC_CLIENT_KEYS_FILE": "/run/keys.json", "BFF_AUTH_OIDC_CLIENT_SECRET": "s"}, want: `auth.oidc.client_secret: set either it or auth.oidc.client_keys_file`},
		{name: "receipts key_id needs the file", env: map[string]string{"BFF_PAYMENTS_RECEIPTS_KEY_ID": "r2"}, want: `payments.receipts.key_id: needs payments.receipts.keys_file`},
		{name: "dev mode needs no oidc", base: devEnv(), env: map[string]string{"BFF_AUTH_OIDC_SCOPES": "[]"}},
		{name: "mobile redirect custom scheme", env: map[string]string{"BFF_AUTH_MOBILE_REDIRECT_URIS": "[\"com.example.app:/cb\", \"https://app.example.com/m\", \"http://127.0.0.1:7777/cb\"]"}},
		{name: "mobile redirect loopback IPs in production", env: map[string]string{"BFF_AUTH_MOBILE_REDIRECT_URIS": `["http://127.0.0.1:7777/cb", "http://[::1]:7777/cb", "http://127.0.0.1/cb"]`}},
		{name: "mobile redirect http host in production", env: map[string]string{"BFF_AUTH_MOBILE_REDIRECT_URIS": `["com.example.app:/cb", "http://app.example.com/cb"]`}, want: `auth.mobile_redirect_uris[1]: plain http is refused when env is production except to a loopback IP literal (RFC 8252 section 7.3`},
		{name: "mobile redirect http localhost in production", env: map[string]string{"BFF_AUTH_MOBILE_REDIRECT_URIS": `["http://localhost:7777/cb"]`}, want: `auth.mobile_redirect_uris[0]: plain http is refused when env is production except to a loopback IP literal`},
		{name: "mobile redirect HTTP upper-case in production", env: map[string]string{"BFF_AUTH_MOBILE_REDIRECT_URIS": `["HTTP://app.example.com/cb"]`}, want: `auth.mobile_redirect_uris[0]: plain http is refused when env is production`},
		{name: "mobile redirect mapped loopback in production", env: map[string]string{"BFF_AUTH_MOBILE_REDIRECT_URIS": `["http://[::ffff:127.0.0.1]:7777/cb"]`}, want: `auth.mobile_redirect_uris[0]: plain http is refused when env is production`},
		{name: "mobile redirect loopback name in production", env: map[string]string{"BFF_AUTH_MOBILE_REDIRECT_URIS": `["http://127.0.0.1.nip.io/cb"]`}, want: `auth.mobile_redirect_uris[0]: plain http is refused when env is production`},
		{name: "mobile redirect http in development", base: devEnv(), env: map[string]string{"BFF_AUTH_MOBILE_REDIRECT_URIS": `["http://localhost:7777/cb", "http://app.example.com/cb"]`}},
		{name: "mobile redirect relative", env: map[string]string{"BFF_AUTH_MOBILE_REDIRECT_URIS": "[/cb]"}, want: `auth.mobile_redirect_uris[0]: not an absolute URI`},
		{name: "mobile redirect fragment", env: map[string]string{"BFF_AUTH_MOBILE_REDIRECT_URIS": "[\"com.example.app:/cb#x\"]"}, want: `auth.mobile_redirect_uris[0]: must not hold a fragment`},

		{name: "cors origins", base: devEnv(), env: map[string]string{"BFF_CORS_ALLOWED_ORIGINS": `["https://web.example.com", "http://localhost:3000", "capacitor://localhost"]`}},
		{name: "cors https origins in production", env: map[string]string{"BFF_CORS_ALLOWED_ORIGINS": `["https://web.example.com", "https://admin.example.com:8443"]`}},
		{name: "cors http in production", env: map[string]string{"BFF_CORS_ALLOWED_ORIGINS": `["https://web.example.com", "http://web.example.com"]`}, want: `cors.allowed_origins[1]: must be https when env is production`},
		{name: "cors http localhost in production", env: map[string]string{"BFF_CORS_ALLOWED_ORIGINS": `["http://localhost:3000"]`}, want: `cors.allowed_origins[0]: must be https when env is production`},
		{name: "cors custom scheme in production", env: map[string]string{"BFF_CORS_ALLOWED_ORIGINS": `["capacitor://localhost"]`}, want: `cors.allowed_origins[0]: must be https when env is production`},
		{name: "cors wildcard subdomain", env: map[string]string{"BFF_CORS_ALLOWED_ORIGINS": `["https://*.example.com"]`}, want: `cors.allowed_origins[0]: must not hold *`},
		{name: "cors wildcard subdomain in development", base: devEnv(), env: map[string]string{"BFF_CORS_ALLOWED_ORIGINS": `["https://*.example.com"]`}, want: `cors.allowed_origins[0]: must not hold *`},
		{name: "cors wildcard port in development", base: devEnv(), env: map[string]string{"BFF_CORS_ALLOWED_ORIGINS": `["http://localhost:*"]`}, want: `cors.allowed_origins[0]: must not hold *`},
		{name: "cors wildcard scheme in development", base: devEnv(), env: map[string]string{"BFF_CORS_ALLOWED_ORIGINS": `["https://web.example.com", "*://web.example.com"]`}, want: `cors.allowed_origins[1]: must not hold *`},
		{name: "cors wildcard without scheme in development", base: devEnv(), env: map[string]string{"BFF_CORS_ALLOWED_ORIGINS": `["*.example.com"]`}, want: `cors.allowed_origins[0]: must not hold *`},
		{name: "cors star", env: map[string]string{"BFF_CORS_ALLOWED_ORIGINS": `["*"]`}, want: `cors.allowed_origins[0]: "*" is not allowed`},
		{name: "cors path", env: map[string]string{"BFF_CORS_ALLOWED_ORIGINS": `["https://web.example.com/app"]`}, want: `cors.allowed_origins[0]: must be an origin only`},
		{name: "cors no scheme", env: map[string]string{"BFF_CORS_ALLOWED_ORIGINS": `["web.example.com"]`}, want: `cors.allowed_origins[0]: not an absolute URL`},
		{name: "cors null", env: map[string]string{"BFF_CORS_ALLOWED_ORIGINS": `["null"]`}, want: `cors.allowed_origins[0]: not an absolute URL`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := tt.base
			if base == nil {
				base = prodEnv()
			}
			_, err := load(t, tt.yaml, with(base, tt.env))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("got error %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got nil error, want %q", tt.want)
			}
			// Values here come from the environment; the message names the
			// variable after the key, which TestLoadErrors checks.
			got := fromEnv.ReplaceAllString(err.Error(), "")
			if !strings.Contains(got, tt.want) {
				t.Errorf("got %q, want it to contain %q", got, tt.want)
			}
			for _, s := range secretValues() {
				if strings.Contains(got, s) {
					t.Errorf("error %q holds a secret value", got)
				}
			}
		})
	}
}

func TestValidateReportsAll(t *testing.T) {
	c := Defaults()
	err := c.Validate()
	if err == nil {
		t.Fatal("got nil error for bare production defaults, want several")
	}
	for _, key := range []string{"public_url", "upstream.base_url", "upstream.client_id", "redis.encryption_key", "session.keys", "auth.oidc.issuer"} {
		if !strings.Contains(err.Error(), "config: "+key+":") {
			t.Errorf("got %q, want a problem about %s", err, key)
		}
	}
	var ce *Error
	if !errors.As(err, &ce) {
		t.Errorf("got %T, want errors.As to find an *Error", err)
	}
}
