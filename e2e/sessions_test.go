//go:build integration

package e2e

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/testing/redistest"
)

type sessionList struct {
	Sessions []struct {
		ID      string `json:"id"`
		Current bool   `json:"current"`
		Method  string `json:"method"`
	} `json:"sessions"`
}

func listOf(t *testing.T, r reply) sessionList {
	t.Helper()
	var l sessionList
	if r.status != 200 || json.Unmarshal(r.body, &l) != nil {
		t.Fatalf("GET /auth/sessions: got %d %s", r.status, r.body)
	}
	return l
}

// A user sees their sessions (never a token), ends another device's, and
// the operator can end all of a user's sessions on the admin listener.
func TestListAndRevokeSessions(t *testing.T) {
	t.Parallel()
	e := start(t, options{})
	laptop := e.browser()
	laptopToken := laptop.login("vera")
	phone := e.app(e.browser().login("vera"))

	r := laptop.do("GET", "/auth/sessions", "")
	l := listOf(t, r)
	if len(l.Sessions) != 2 || strings.Contains(string(r.body), laptopToken) || strings.Contains(string(r.body), phone.token) {
		t.Fatalf("got %s, want two sessions and no token", r.body)
	}
	var other string
	for _, s := range l.Sessions {
		if !s.Current {
			other = s.ID
		}
	}
	wantProblem(t, laptop.do("DELETE", "/auth/sessions/"+other, ""), 403, "CSRF_REJECTED")
	if r := laptop.do("DELETE", "/auth/sessions/"+other, "", "X-CSRF", "1"); r.status != 204 {
		t.Fatalf("revoke the phone: got %d %s", r.status, r.body)
	}
	wantProblem(t, phone.do("GET", "/api/v2/payments", ""), 401, "SESSION_REQUIRED")
	wantProblem(t, laptop.do("DELETE", "/auth/sessions/"+other, "", "X-CSRF", "1"), 404, "NOT_FOUND")

	// Someone else's session id cannot be revoked by this user.
	stranger := e.browser()
	stranger.login("walt")
	strangerID := listOf(t, stranger.do("GET", "/auth/sessions", "")).Sessions[0].ID
	wantProblem(t, laptop.do("DELETE", "/auth/sessions/"+strangerID, "", "X-CSRF", "1"), 404, "NOT_FOUND")
	if r := stranger.do("GET", "/auth/session", ""); r.status != 200 {
		t.Fatalf("the stranger's session was touched: %d", r.status)
	}

	// The operator revokes all of vera's sessions.
	resp := e.adminDo("DELETE", "/users/vera/sessions")
	var out struct{ Revoked int }
	_ = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if resp.StatusCode != 200 || out.Revoked != 1 {
		t.Fatalf("admin revoke: got %d revoked=%d, want 200 and 1", resp.StatusCode, out.Revoked)
	}
	wantProblem(t, laptop.do("GET", "/auth/session", ""), 401, "SESSION_REQUIRED")
	// The revoke endpoint is not on the public listener.
	wantProblem(t, stranger.do("DELETE", "/users/walt/sessions", "", "X-CSRF", "1"), 404, "ROUTE_NOT_FOUND")
}

// Logging out of the last session drops the user's upstream token: the
// next login mints again.
func TestLastLogoutDropsTheUpstreamToken(t *testing.T) {
	t.Parallel()
	e := start(t, options{})
	a, b := e.browser(), e.browser()
	a.login("xena")
	b.login("xena")
	a.do("GET", "/api/v2/payments", "")
	a.do("POST", "/auth/logout", "", "X-CSRF", "1")
	b.do("GET", "/api/v2/payments", "")
	if got := e.sim.Mints("xena"); got != 1 {
		t.Fatalf("after logging out of one of two sessions: got %d mints, want 1", got)
	}
	b.do("POST", "/auth/logout", "", "X-CSRF", "1")
	c := e.browser()
	c.login("xena")
	c.do("GET", "/api/v2/payments", "")
	if got := e.sim.Mints("xena"); got != 2 {
		t.Fatalf("after the last logout and a new login: got %d mints, want 2", got)
	}
}

func TestCookieAndTokenTogetherAreRefused(t *testing.T) {
	t.Parallel()
	e := start(t, options{})
	b := e.browser()
	token := b.login("yuri")
	wantProblem(t, b.do("GET", "/api/v2/payments", "", "Authorization", "Bearer "+token), 400, "BAD_REQUEST")
}

func TestCSRFOriginRules(t *testing.T) {
	t.Parallel()
	e := start(t, options{extraYAML: `cors: { allowed_origins: ["https://spa.example"] }`})
	b := e.browser()
	b.login("zoe")
	body := `{"paymentInformation":{}}`
	// Same origin (public_url) and a listed origin pass the CSRF check
	// (the upstream then answers with its own validation).
	for _, origin := range []string{e.public, "https://spa.example", ""} {
		r := b.do("POST", "/api/v2/payments", body, "X-CSRF", "1", "Origin", origin, "Idempotency-Key", "csrf-"+origin)
		if r.status == 403 {
			t.Fatalf("Origin %q: got 403 %s, want the request forwarded", origin, r.body)
		}
	}
	for _, h := range [][]string{
		{"X-CSRF", "1", "Origin", "https://evil.example"},
		{"X-CSRF", "1", "Origin", "null"},
		{"X-CSRF", "true"},
		{"Origin", e.public},
	} {
		wantProblem(t, b.do("POST", "/api/v2/payments", body, h...), 403, "CSRF_REJECTED")
	}
	// Safe methods need no CSRF header.
	if r := b.do("GET", "/api/v2/payments", ""); r.status != 200 {
		t.Fatalf("GET: got %d", r.status)
	}
}

func TestCORS(t *testing.T) {
	t.Parallel()
	e := start(t, options{extraYAML: `cors: { allowed_origins: ["https://spa.example"] }`})
	pre := func(origin string) *http.Response {
		req, _ := http.NewRequest("OPTIONS", e.public+"/api/v2/payments", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "content-type,x-csrf")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	r := pre("https://spa.example")
	if r.StatusCode != 204 || r.Header.Get("Access-Control-Allow-Origin") != "https://spa.example" ||
		r.Header.Get("Access-Control-Allow-Credentials") != "true" || !strings.Contains(strings.ToLower(r.Header.Get("Access-Control-Allow-Headers")), "x-csrf") {
		t.Fatalf("listed origin preflight: got %d %v", r.StatusCode, r.Header)
	}
	if !strings.Contains(strings.Join(r.Header.Values("Vary"), ","), "Origin") {
		t.Fatalf("no Vary: Origin on the preflight: %v", r.Header)
	}
	r = pre("https://evil.example")
	if r.Header.Get("Access-Control-Allow-Origin") != "" || r.Header.Get("Access-Control-Allow-Credentials") != "" {
		t.Fatalf("unlisted origin got CORS headers: %v", r.Header)
	}
	b := e.browser()
	b.login("cory")
	got := b.do("GET", "/api/v2/payments", "", "Origin", "https://spa.example")
	if got.header.Get("Access-Control-Allow-Origin") != "https://spa.example" || !strings.Contains(strings.Join(got.header.Values("Vary"), ","), "Origin") {
		t.Fatalf("actual request: got %v", got.header)
	}
	got = b.do("GET", "/api/v2/payments", "", "Origin", "https://evil.example")
	if got.header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("unlisted origin got ACAO on an actual request: %v", got.header)
	}
}

// When Redis stops answering, session checks fail closed with 503
// SESSION_STORE_UNAVAILABLE (never 401), bff_store_up turns 0, and /readyz
// stays 200: every instance shares Redis, and taking them all out of the
// load balancer would replace this clear 503 with the balancer's. A session
// the instance checked within the last second may still be served from its
// in-process copy until the instance notices the outage (at most the copy's
// 1 s lifetime), so the first check polls; every answer is 200 or 503.
func TestRedisOutageFailsClosed(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	addr := srv.Addr
	e := start(t, options{redisAddr: addr})
	b := e.browser()
	token := b.login("otto")
	if r := b.do("GET", "/api/v2/payments", ""); r.status != 200 {
		t.Fatalf("before the outage: got %d", r.status)
	}
	srv.Kill()
	eventually(t, 5*time.Second, func() error {
		r := b.do("GET", "/api/v2/payments", "")
		switch r.status {
		case 503:
			wantProblem(t, r, 503, "SESSION_STORE_UNAVAILABLE")
			return nil
		case 200:
			return errors.New("the cached session was still served into the outage")
		default:
			t.Fatalf("during the outage: got %d %s, want 503 (or 200 from the in-process copy)", r.status, r.body)
			return nil
		}
	})
	wantProblem(t, e.app(token).do("GET", "/auth/session", ""), 503, "SESSION_STORE_UNAVAILABLE")
	wantProblem(t, e.browser().do("POST", "/auth/dev/login", `{"userId":"otto"}`), 503, "SESSION_STORE_UNAVAILABLE")
	if got := readyz(t, e); got != 200 {
		t.Fatalf("readyz during the outage: got %d, want 200", got)
	}
	if m := scrape(t, e); !strings.Contains(m, "\nbff_store_up 0\n") {
		t.Fatal("bff_store_up is not 0 during the outage")
	}
}

// readyz returns the status of the instance's /readyz.
func readyz(t *testing.T, e *env) int {
	t.Helper()
	resp, err := http.Get(e.admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// scrape returns the instance's /metrics text.
func scrape(t *testing.T, e *env) string {
	t.Helper()
	resp, err := http.Get(e.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// Every answer under /api and /auth, the BFF's own and the upstream's, is
// not cacheable and not to be sniffed.
func TestNoStoreAndNoSniff(t *testing.T) {
	t.Parallel()
	e := start(t, options{})
	b := e.browser()
	anon := e.browser().do("GET", "/auth/session", "")
	b.login("nora")
	for name, r := range map[string]reply{
		"401 on /auth/session":  anon,
		"200 proxied":           b.do("GET", "/api/v2/providers", ""),
		"404 ROUTE_NOT_FOUND":   b.do("GET", "/api/v2/nope", ""),
		"200 /auth/session":     b.do("GET", "/auth/session", ""),
		"upstream 4xx envelope": b.do("GET", "/api/v2/payments/not-an-id", ""),
	} {
		if r.header.Get("Cache-Control") != "no-store" || r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: got Cache-Control %q, X-Content-Type-Options %q; want no-store, nosniff",
				name, r.header.Values("Cache-Control"), r.header.Get("X-Content-Type-Options"))
		}
	}
}

// A CORS preflight is answered before any session check and is never 401:
// with no origin configured it gets 204 without Access-Control-Allow-*;
// a listed origin gets them.
func TestPreflightIsNeverUnauthorized(t *testing.T) {
	t.Parallel()
	preflight := func(e *env, origin string) *http.Response {
		req, _ := http.NewRequest("OPTIONS", e.public+"/api/v2/payments", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "content-type, x-csrf, idempotency-key")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	none := start(t, options{})
	if r := preflight(none, "https://spa.example"); r.StatusCode != 204 || r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("no origins configured: got %d ACAO %q, want 204 and none", r.StatusCode, r.Header.Get("Access-Control-Allow-Origin"))
	}
	listed := start(t, options{extraYAML: `cors: { allowed_origins: ["https://spa.example"] }`})
	r := preflight(listed, "https://spa.example")
	if r.StatusCode != 204 || r.Header.Get("Access-Control-Allow-Origin") != "https://spa.example" || r.Header.Get("Access-Control-Allow-Credentials") != "true" {
		t.Fatalf("a listed origin: got %d %v", r.StatusCode, r.Header)
	}
	for _, h := range []string{"X-CSRF", "Content-Type", "Idempotency-Key"} {
		if !strings.Contains(r.Header.Get("Access-Control-Allow-Headers"), h) {
			t.Errorf("Access-Control-Allow-Headers %q lacks %s", r.Header.Get("Access-Control-Allow-Headers"), h)
		}
	}
	if r := preflight(listed, "https://evil.example"); r.StatusCode != 204 || r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("an unlisted origin: got %d ACAO %q, want 204 and none", r.StatusCode, r.Header.Get("Access-Control-Allow-Origin"))
	}
}

// DELETE /auth/sessions ends every session of the caller's user, on every
// device and instance, and leaves other users' sessions alone.
func TestLogoutEverywhere(t *testing.T) {
	t.Parallel()
	a := start(t, options{})
	b := a.another(options{})
	laptop, phone, other := a.browser(), b.app(""), a.browser()
	laptop.login("lena")
	phone.token = a.browser().login("lena")
	other.login("olaf")
	for _, c := range []*client{laptop, phone, other} {
		if r := c.do("GET", "/api/v2/providers", ""); r.status != 200 {
			t.Fatalf("before: got %d", r.status)
		}
	}
	wantProblem(t, laptop.do("DELETE", "/auth/sessions", ""), 403, "CSRF_REJECTED")
	if r := laptop.do("DELETE", "/auth/sessions", "", "X-CSRF", "1"); r.status != 204 {
		t.Fatalf("DELETE /auth/sessions: got %d %s, want 204", r.status, r.body)
	}
	wantProblem(t, laptop.do("GET", "/api/v2/providers", ""), 401, "SESSION_REQUIRED")
	wantProblem(t, phone.do("GET", "/api/v2/providers", ""), 401, "SESSION_REQUIRED")
	if r := other.do("GET", "/api/v2/providers", ""); r.status != 200 {
		t.Fatalf("another user's session: got %d, want 200", r.status)
	}
}

// The admin listener's mutating endpoints need the bearer token from
// admin_token_file (a DNS-rebinding page reaching the listener has none),
// and do not exist without the file; /healthz, /readyz and /metrics stay
// open.
func TestAdminEndpointsNeedTheToken(t *testing.T) {
	t.Parallel()
	e := start(t, options{})
	e.browser().login("ada")
	for _, tc := range []struct{ method, path, auth string }{
		{"POST", "/reload-secret", ""},
		{"POST", "/reload-secret", "Bearer wrong-token-value-xx"},
		{"DELETE", "/users/ada/sessions", ""},
		{"DELETE", "/users/ada/sessions", "Basic " + e.adminTok},
	} {
		req, _ := http.NewRequest(tc.method, e.admin+tc.path, nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Fatalf("%s %s with %q: got %d, want 401", tc.method, tc.path, tc.auth, resp.StatusCode)
		}
	}
	if resp := e.adminDo("DELETE", "/users/ada/sessions"); resp.StatusCode != 200 {
		t.Fatalf("with the token: got %d, want 200", resp.StatusCode)
	}
	open := start(t, options{noAdminToken: true})
	for _, tc := range []struct{ method, path string }{{"POST", "/reload-secret"}, {"DELETE", "/users/ada/sessions"}} {
		resp := open.adminDo(tc.method, tc.path)
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Fatalf("%s %s without admin_token_file: got %d, want 404", tc.method, tc.path, resp.StatusCode)
		}
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := http.Get(open.admin + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: got %d, want 200", path, resp.StatusCode)
		}
	}
	if strings.Contains(e.logs.String(), e.adminTok) {
		t.Fatal("the admin token reached the logs")
	}
}

// limits.auth_per_minute is one budget per client address across
// instances: past it, /auth/* is 429 RATE_LIMITED with Retry-After; the
// API is not counted.
func TestAuthBudgetPerAddress(t *testing.T) {
	t.Parallel()
	o := options{limitsYAML: "limits: { requests_per_second: 0, auth_per_minute: 5, refresh_interval: 0s }"}
	a := start(t, o)
	b := a.another(o)
	token := a.browser().login("abe") // 1
	var statuses []int
	for i := 0; i < 6; i++ { // 2..7, alternating instances
		e := a
		if i%2 == 1 {
			e = b
		}
		statuses = append(statuses, e.app(token).do("GET", "/auth/session", "").status)
	}
	want := []int{200, 200, 200, 200, 429, 429}
	for i := range want {
		if statuses[i] != want[i] {
			t.Fatalf("got statuses %v, want %v: 5 a minute across both instances", statuses, want)
		}
	}
	r := b.app(token).do("GET", "/auth/session", "")
	v := wantProblem(t, r, 429, "RATE_LIMITED")
	if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 || ra > 60 || v["retryable"] != true {
		t.Fatalf("got Retry-After %q retryable %v, want 1..60 and true", r.header.Get("Retry-After"), v["retryable"])
	}
	if r := a.app(token).do("GET", "/api/v2/providers", ""); r.status != 200 {
		t.Fatalf("the API is not under the /auth budget: got %d", r.status)
	}
	if m := scrape(t, a) + scrape(t, b); !strings.Contains(m, `bff_limit_refusals_total{limit="auth"}`) {
		t.Fatal("the refusals are not counted")
	}
}

// limits.refresh_interval: a second on-demand refresh within the interval
// is 429 REFRESH_TOO_SOON, on any instance, and costs no credits.
func TestRefreshCreditGuard(t *testing.T) {
	t.Parallel()
	o := options{limitsYAML: "limits: { requests_per_second: 0, auth_per_minute: 0, refresh_interval: 15m }"}
	a := start(t, o)
	b := a.another(o)
	token := a.browser().login("rita")
	a.app(token).do("POST", "/api/v2/connections", `{"providerIds":["demobank-sandbox"]}`) // something to refresh
	before := a.sim.Org().Credits
	first := a.app(token).do("POST", "/api/chat/chat/connections/refresh", "")
	if first.status != 200 {
		t.Fatalf("first refresh: got %d %s", first.status, first.body)
	}
	r := b.app(token).do("POST", "/api/chat/chat/connections/refresh", "")
	wantProblem(t, r, 429, "REFRESH_TOO_SOON")
	if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 890 || ra > 900 {
		t.Fatalf("got Retry-After %q, want about 900 s", r.header.Get("Retry-After"))
	}
	refreshes := 0
	for _, rq := range a.sim.Requests() {
		if rq.Path == "/chat/chat/connections/refresh" {
			refreshes++
		}
	}
	if refreshes != 1 || before-a.sim.Org().Credits != 20 {
		t.Fatalf("the upstream saw %d refreshes and charged %d credits, want 1 and 20", refreshes, before-a.sim.Org().Credits)
	}
}

// limits.requests_per_second and burst: a session's /api budget, one
// bucket across instances. Rapid calls past the burst are 429
// RATE_LIMITED with Retry-After; the tokens come back at the rate.
func TestSessionRequestBudget(t *testing.T) {
	t.Parallel()
	o := options{limitsYAML: "limits: { requests_per_second: 1, burst: 4, auth_per_minute: 0, refresh_interval: 0s }"}
	a := start(t, o)
	b := a.another(o)
	token := a.browser().login("bea")
	admitted := 0
	var refused reply
	began := time.Now()
	for i := 0; i < 40 && (i < 12 || refused.status == 0); i++ { // both instances, alternating, until one is refused
		e := a
		if i%2 == 1 {
			e = b
		}
		r := e.app(token).do("GET", "/api/v2/providers", "")
		switch r.status {
		case 200:
			admitted++
		case 429:
			refused = r
		default:
			t.Fatalf("got %d %s", r.status, r.body)
		}
	}
	// One exact bucket admits 4 plus what refilled meanwhile (1 a second);
	// two instances may each admit up to the burst before they exchange
	// (the stated overshoot).
	refilled := int(time.Since(began).Seconds()) + 1
	if admitted < 4 || admitted > 8+refilled {
		t.Fatalf("admitted %d calls in %v with burst 4 on two instances, want 4 to %d", admitted, time.Since(began), 8+refilled)
	}
	v := wantProblem(t, refused, 429, "RATE_LIMITED")
	if ra, err := strconv.Atoi(refused.header.Get("Retry-After")); err != nil || ra < 1 || ra > 2 || v["retryable"] != true {
		t.Fatalf("got Retry-After %q retryable %v, want 1 or 2 and true", refused.header.Get("Retry-After"), v["retryable"])
	}
	other := a.app(a.browser().login("ben"))
	if r := other.do("GET", "/api/v2/providers", ""); r.status != 200 {
		t.Fatalf("another session: got %d, want 200 (the budget is per session)", r.status)
	}
	if m := scrape(t, a) + scrape(t, b); !strings.Contains(m, `bff_limit_refusals_total{limit="requests"}`) {
		t.Fatal("the refusals are not counted")
	}
}
