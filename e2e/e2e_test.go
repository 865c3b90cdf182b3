//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fintech-bff/bff/internal/testing/redistest"
)

// The walkthrough of the README: login, a forwarded call carrying the
// user's minted token, one mint for many calls, an upstream error rule as
// the error envelope (docs/errors.md), logout, then 401.
func TestLoginForwardLogout(t *testing.T) {
	t.Parallel()
	e := start(t, options{})
	alice := e.browser()
	token := alice.login("alice")

	r := alice.do("GET", "/auth/session", "")
	if v := r.json(t); r.status != 200 || v["userId"] != "alice" || v["expiresAt"] == nil || strings.Contains(string(r.body), token) {
		t.Fatalf("GET /auth/session: got %d %s, want alice without a token", r.status, r.body)
	}

	r = alice.do("GET", "/api/v2/payments", "")
	if r.status != 200 {
		t.Fatalf("GET /api/v2/payments: got %d %s", r.status, r.body)
	}
	var list struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal(r.body, &list); err != nil || len(list.Items) == 0 {
		t.Fatalf("got %s, want the simulator's payments for alice", r.body)
	}
	if r.header.Get("X-Request-Id") == "" {
		t.Fatal("no X-Request-Id on the reply")
	}

	seen := e.sim.Requests()
	last := seen[len(seen)-1]
	if last.Path != "/v2/payments" || last.UserID != "alice" || !strings.HasPrefix(last.Header.Get("Authorization"), "Bearer eyJ") {
		t.Fatalf("upstream saw %s with a token for %q (%s), want /v2/payments with a JWT for alice", last.Path, last.UserID, last.Header.Get("Authorization"))
	}
	if last.Header.Get("Cookie") != "" || last.Header.Get("X-Request-Id") != r.header.Get("X-Request-Id") {
		t.Fatalf("upstream got Cookie %q and X-Request-Id %q", last.Header.Get("Cookie"), last.Header.Get("X-Request-Id"))
	}

	for i := 0; i < 20; i++ {
		if r := alice.do("GET", "/api/v2/providers?includeFakeProviders=true", ""); r.status != 200 {
			t.Fatalf("call %d: got %d %s", i, r.status, r.body)
		}
	}
	if got := e.sim.Mints("alice"); got != 1 {
		t.Fatalf("got %d mints for 21 calls, want 1", got)
	}

	// The same session through its token, as a mobile app would send it.
	app := e.app(token)
	if r := app.do("GET", "/api/v2/data/accounts", ""); r.status != 200 {
		t.Fatalf("token-authenticated call: got %d %s", r.status, r.body)
	}
	// Token-authenticated unsafe requests need no CSRF header.
	r = app.do("POST", "/api/v2/payments", `{"providerId":"x"}`, "Idempotency-Key", "e2e-validation-1")
	v := wantProblem(t, r, 400, "VALIDATION_ERROR")
	if fields, _ := v["fields"].([]any); len(fields) == 0 {
		t.Fatalf("got %s, want fields naming paymentInformation", r.body)
	} else if f := fields[0].(map[string]any); f["field"] != "paymentInformation" {
		t.Fatalf("got field %v, want paymentInformation", f["field"])
	}
	if v["action"] != "fix_request" || v["retryable"] != false {
		t.Fatalf("got action %v retryable %v", v["action"], v["retryable"])
	}

	// Cookie-authenticated unsafe requests need X-CSRF: 1.
	wantProblem(t, alice.do("POST", "/api/v2/payments", `{}`), 403, "CSRF_REJECTED")
	wantProblem(t, alice.do("POST", "/auth/logout", ""), 403, "CSRF_REJECTED")
	wantProblem(t, alice.do("POST", "/auth/logout", "", "X-CSRF", "1", "Origin", "https://evil.example"), 403, "CSRF_REJECTED")

	if r := alice.do("POST", "/auth/logout", "", "X-CSRF", "1"); r.status != 204 {
		t.Fatalf("logout: got %d %s, want 204", r.status, r.body)
	}
	wantProblem(t, alice.do("GET", "/api/v2/payments", ""), 401, "SESSION_REQUIRED")
	wantProblem(t, app.do("GET", "/api/v2/payments", ""), 401, "SESSION_REQUIRED")
	wantProblem(t, app.do("GET", "/auth/session", ""), 401, "SESSION_REQUIRED")
}

// A replayed cookie is refused after logout, even when the browser kept it.
func TestReplayedCookieAfterLogout(t *testing.T) {
	t.Parallel()
	e := start(t, options{})
	b := e.browser()
	token := b.login("bob")
	u := mustURL(t, e.public)
	cookies := b.http.Jar.Cookies(u)
	if len(cookies) != 1 || cookies[0].Name != "bff_session" || strings.Contains(cookies[0].Value, token) {
		t.Fatalf("got cookies %v, want one opaque bff_session", cookies)
	}
	if r := e.app(token).do("POST", "/auth/logout", ""); r.status != 204 {
		t.Fatalf("logout by token: got %d", r.status)
	}
	// The jar still holds the cookie: it names the same, now ended, session.
	wantProblem(t, b.do("GET", "/auth/session", ""), 401, "SESSION_REQUIRED")
}

func TestBFFErrorsUseTheEnvelope(t *testing.T) {
	t.Parallel()
	e := start(t, options{})
	anon := e.browser()
	wantProblem(t, anon.do("GET", "/api/v2/payments", ""), 401, "SESSION_REQUIRED")
	wantProblem(t, anon.do("GET", "/no/such/page", ""), 404, "ROUTE_NOT_FOUND")
	wantProblem(t, e.app("forged-token").do("GET", "/api/v2/payments", ""), 401, "SESSION_REQUIRED")

	b := e.browser()
	b.login("carol")
	wantProblem(t, b.do("GET", "/api/v2/not-allowlisted", ""), 404, "ROUTE_NOT_FOUND")
	wantProblem(t, b.do("GET", "/api/oauth/token", ""), 404, "ROUTE_NOT_FOUND")
	r := b.do("PUT", "/api/v2/payments", "{}", "X-CSRF", "1")
	wantProblem(t, r, 405, "METHOD_NOT_ALLOWED")
	if r.header.Get("Allow") == "" {
		t.Fatal("405 without Allow")
	}
	wantProblem(t, b.do("GET", "/api/v2/payments/%2e%2e/%2e%2e/oauth/token", ""), 400, "BAD_PATH")
	wantProblem(t, b.do("POST", "/api/v2/payments", strings.Repeat("x", 2<<20), "X-CSRF", "1"), 413, "BODY_TOO_LARGE")
	for _, rq := range e.sim.Requests() {
		if strings.Contains(rq.Path, "oauth") && rq.Method != "POST" || strings.Contains(rq.Path, "not-allowlisted") {
			t.Fatalf("the upstream saw %s %s", rq.Method, rq.Path)
		}
	}
	// The admin endpoints are not on the public listener.
	wantProblem(t, anon.do("GET", "/metrics", ""), 404, "ROUTE_NOT_FOUND")
	wantProblem(t, anon.do("GET", "/readyz", ""), 404, "ROUTE_NOT_FOUND")
}

// An upstream rule seeded in the simulator comes back as the error
// envelope (docs/errors.md): the free plan's 403.
func TestUpstreamPlanGate(t *testing.T) {
	t.Parallel()
	e := start(t, options{})
	b := e.browser()
	b.login("dave")
	e.sim.SetPlan("free")
	v := wantProblem(t, b.do("GET", "/api/v2/payments", ""), 403, "NOT_AVAILABLE_ON_PLAN")
	if v["action"] != "upgrade_plan" {
		t.Fatalf("got action %v, want upgrade_plan", v["action"])
	}
}

// The client secret, upstream tokens, session tokens and cookie values
// never reach a log line, and neither Redis nor the payments ledger holds
// one in plain text.
func TestNoSecretInLogsOrRedis(t *testing.T) {
	t.Parallel()
	e := start(t, options{})
	b := e.browser()
	token := b.login("erin")
	for _, p := range []string{"/api/v2/payments", "/api/v2/data/accounts", "/api/v2/nope"} {
		b.do("GET", p, "")
	}
	b.do("POST", "/api/v2/payments", "{}", "X-CSRF", "1", "Idempotency-Key", "no-secret-1")
	if r := b.do("POST", "/api/v2/payments", fmt.Sprintf(validPayment, "Order no-secret"), "X-CSRF", "1", "Idempotency-Key", "no-secret-2"); r.status != 201 {
		t.Fatalf("payment: got %d %s", r.status, r.body)
	}
	e.app(token).do("POST", "/api/v2/payments", fmt.Sprintf(validPayment, "Order no-secret"), "Idempotency-Key", "no-secret-2") // a replay, audited
	e.app("forged-session-token-value").do("GET", "/api/v2/payments", "")
	cookie := b.http.Jar.Cookies(mustURL(t, e.public))[0].Value
	upstreamTokens := e.bearers.seen()
	if len(upstreamTokens) == 0 {
		t.Fatal("the simulator saw no upstream token")
	}
	e.stop()
	logs := e.logs.String()
	secrets := append([]string{clientSecret, token, cookie, "forged-session-token-value", e.encKey, e.cookieKey}, upstreamTokens...)
	for _, s := range secrets {
		if strings.Contains(logs, s) {
			t.Fatalf("a secret appears in the logs: %.12s...", s)
		}
	}
	if !strings.Contains(logs, `"msg":"request"`) {
		t.Fatal("no access log lines: the scan above checked nothing")
	}
	rc, _ := redistest.Client(t)
	ctx := context.Background()
	keys := redistest.Keys(ctx, rc, e.prefix)
	if len(keys) == 0 {
		t.Fatal("no keys under the instance's prefix: the scan checks nothing")
	}
	for _, k := range keys {
		v := rc.Get(ctx, k).Val()
		for _, s := range secrets {
			if strings.Contains(k, s) || strings.Contains(v, s) {
				t.Fatalf("Redis key %q or its value holds a secret in plain text", k)
			}
		}
	}
	// The ledger: every row of both tables, as text.
	conn, err := pgx.Connect(ctx, e.ledgerURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var dump string
	if err := conn.QueryRow(ctx, `SELECT coalesce(string_agg(m::text, E'\n'), '') || coalesce((SELECT string_agg(ev::text, E'\n') FROM money_request_events ev), '') FROM money_requests m`).Scan(&dump); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(dump, "no-secret-2") || !strings.Contains(dump, "replayed") {
		t.Fatalf("the ledger lacks the payment or its replay: the scan checks nothing:\n%s", dump)
	}
	for _, s := range append(secrets, "payUrl") { // the answer (with its consent URL) is sealed
		if strings.Contains(dump, s) {
			t.Fatalf("the ledger holds a secret in plain text: %.12s...", s)
		}
	}
}

func TestCheckFlagAndStartupRefusals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ok := write("ok.yaml", `env: development
upstream: { base_url: "http://127.0.0.1:1", client_id: c, client_secret: "check-secret-VALUE" }
redis: { url: "" }
session: { secure_cookie: false }
auth: { mode: dev }
`)
	check := func(args ...string) *exec.Cmd {
		c := exec.Command(bffBin, args...)
		c.Env = []string{"PATH=" + os.Getenv("PATH")} // not the tests' own BFF_TEST_* settings
		return c
	}
	out, err := check("-config", ok, "-check").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "configuration OK") || strings.Contains(string(out), "check-secret-VALUE") {
		t.Fatalf("-check: got %v\n%s\nwant OK with the secret redacted", err, out)
	}
	cases := map[string]string{
		"dev login in production": `env: production
public_url: "https://app.example.com"
upstream: { base_url: "https://api.example.com", client_id: c, client_secret: "s" }
redis: { encryption_key: "` + randomB64(32) + `" }
session: { keys: ["` + randomB64(32) + `"] }
auth: { mode: dev }
`,
		"unknown key": "env: development\nupstream: { tiemout: 3s }\n",
	}
	wants := map[string]string{"dev login in production": "auth.mode", "unknown key": "upstream.tiemout"}
	for name, body := range cases {
		out, err := check("-config", write(strings.ReplaceAll(name, " ", "_")+".yaml", body), "-check").CombinedOutput()
		if err == nil || !strings.Contains(string(out), wants[name]) {
			t.Errorf("%s: got %v\n%s\nwant a failure naming %s", name, err, out, wants[name])
		}
	}
	// A BFF_ variable that names no key is refused, naming it, never its value.
	typo := check("-config", ok, "-check")
	typo.Env = append(typo.Env, "BFF_UPSTREAM_TIMOUT=5s-secret-looking-value")
	out, err = typo.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "BFF_UPSTREAM_TIMOUT") || strings.Contains(string(out), "secret-looking-value") {
		t.Errorf("a misspelt variable: got %v\n%s\nwant a failure naming BFF_UPSTREAM_TIMOUT without its value", err, out)
	}
}

// Many concurrent first requests of a fresh user cause one mint.
func TestConcurrentFirstRequestsMintOnce(t *testing.T) {
	t.Parallel()
	e := start(t, options{})
	b := e.browser()
	token := b.login("frank")
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", e.public+"/api/v2/data/accounts", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("got %d, want 200", resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	if got := e.sim.Mints("frank"); got != 1 {
		t.Fatalf("got %d mints for 50 concurrent first calls, want 1", got)
	}
}
