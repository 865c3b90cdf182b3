//go:build integration

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/upstreamsim"
)

const validPayment = `{"paymentInformation":{"amount":12.5,"currency":"EUR","remittanceInformation":"%s",
"creditorName":"Jane","creditorAccount":{"iban":"FR7630006000011234567890189"},"debtorAccount":{"iban":"DE89370400440532013000"}},
"providerIds":["demobank-sandbox"]}`

// One row per line of docs/errors.md's tables that involves the
// upstream, end to end: the real binary, the simulator (its own rules where
// it has them, injected faults for what only a gateway or a connector
// token produces), real Redis.
func TestContractErrorTable(t *testing.T) {
	t.Parallel()
	e := start(t, options{upstream: "timeout: 2s"})
	type row struct {
		name      string
		setup     func(*upstreamsim.Server)
		method    string
		path      string
		body      string
		status    int
		code      string
		action    string
		retryable bool
		check     func(t *testing.T, v map[string]any, r reply)
	}
	fault := func(f upstreamsim.Fault) func(*upstreamsim.Server) {
		return func(s *upstreamsim.Server) { s.InjectFault(f) }
	}
	rows := []row{
		{name: "400 CLIENT_ERROR: payment id not valid", method: "GET", path: "/v2/payments/not-a-payment-id",
			status: 400, code: "CLIENT_ERROR", action: "fix_request"},
		{name: "404 CLIENT_ERROR: payment does not exist", method: "GET", path: "/v2/payments/01ARZ3NDEKTSV4RRFFQ69G5FAV",
			status: 404, code: "CLIENT_ERROR", action: "fix_request"},
		{name: "400 VALIDATION_ERROR with fields", method: "POST", path: "/v2/payments", body: `{"providerIds":["demobank-sandbox"]}`,
			status: 400, code: "VALIDATION_ERROR", action: "fix_request",
			check: func(t *testing.T, v map[string]any, _ reply) {
				f, _ := v["fields"].([]any)
				if len(f) == 0 || f[0].(map[string]any)["field"] != "paymentInformation" {
					t.Fatalf("got fields %v, want paymentInformation", v["fields"])
				}
			}},
		{name: "400 PROVIDER_UNAVAILABLE (real rule, POST not retried)", method: "POST", path: "/v2/payments",
			body:   strings.Replace(fmt.Sprintf(validPayment, "Order 1"), "demobank-sandbox", "unavailable-bank-sandbox", 1),
			status: 503, code: "PROVIDER_UNAVAILABLE", action: "retry_later", retryable: true},
		{name: "402 insufficient_credits with cost and balance", setup: func(s *upstreamsim.Server) { s.SetCredits(0) },
			method: "POST", path: "/chat/chat/connections/refresh", status: 402, code: "INSUFFICIENT_CREDITS", action: "wait_for_credits",
			check: func(t *testing.T, v map[string]any, _ reply) {
				if v["cost"] != float64(20) || v["balance"] != float64(0) {
					t.Fatalf("got cost %v balance %v, want 20 and 0", v["cost"], v["balance"])
				}
			}},
		{name: "403 NOT_AVAILABLE_ON_PLAN in type (free plan)", setup: func(s *upstreamsim.Server) { s.SetPlan("free") },
			method: "GET", path: "/v2/data/accounts", status: 403, code: "NOT_AVAILABLE_ON_PLAN", action: "upgrade_plan"},
		{name: "403 NOT_AVAILABLE_ON_PLAN alone in message", setup: fault(upstreamsim.Fault{PathPrefix: "/v2/data/accounts", Status: 403, Body: `{"message":"NOT_AVAILABLE_ON_PLAN"}`}),
			method: "GET", path: "/v2/data/accounts", status: 403, code: "NOT_AVAILABLE_ON_PLAN", action: "upgrade_plan"},
		{name: "403 ACCOUNT_LIMIT_REACHED", setup: fault(upstreamsim.Fault{PathPrefix: "/v2/connections", Status: 403, Body: `{"type":"ACCOUNT_LIMIT_REACHED","message":"cap"}`}),
			method: "POST", path: "/v2/connections", body: `{"providerIds":["demobank-sandbox"]}`, status: 403, code: "ACCOUNT_LIMIT_REACHED", action: "contact_support"},
		{name: "403 MCP_FORBIDDEN", setup: fault(upstreamsim.Fault{PathPrefix: "/v2/data/accounts", Status: 403, Body: `{"type":"MCP_FORBIDDEN","message":"scope"}`}),
			method: "GET", path: "/v2/data/accounts", status: 403, code: "MCP_FORBIDDEN", action: "contact_support"},
		{name: "403 MCP_NO_SERVICE_ORG", setup: fault(upstreamsim.Fault{PathPrefix: "/v2/data/accounts", Status: 403, Body: `{"type":"MCP_NO_SERVICE_ORG","message":"org"}`}),
			method: "GET", path: "/v2/data/accounts", status: 403, code: "MCP_NO_SERVICE_ORG", action: "contact_support"},
		{name: "403 with an empty body", setup: fault(upstreamsim.Fault{PathPrefix: "/v2/data/accounts", Status: 403, EmptyBody: true}),
			method: "GET", path: "/v2/data/accounts", status: 403, code: "FORBIDDEN", action: "contact_support"},
		{name: "409 no_refreshable_connections", setup: fault(upstreamsim.Fault{PathPrefix: "/chat/chat/connections/refresh", Status: 409, Body: `{"status":"no_refreshable_connections","message":"none"}`}),
			method: "POST", path: "/chat/chat/connections/refresh", status: 409, code: "NO_REFRESHABLE_CONNECTIONS", action: "reconnect_bank"},
		{name: "401 twice on an API call", setup: fault(upstreamsim.Fault{PathPrefix: "/v2/providers", Status: 401, Body: `{"message":"expired"}`, Times: 2}),
			method: "GET", path: "/v2/providers", status: 502, code: "UPSTREAM_AUTH_FAILED", action: "contact_support"},
		{name: "token endpoint 401 {message}", setup: fault(upstreamsim.Fault{PathPrefix: "/oauth/token", Status: 401, Body: `{"message":"Unauthorized"}`}),
			method: "GET", path: "/v2/providers", status: 502, code: "UPSTREAM_AUTH_FAILED", action: "contact_support"},
		{name: "token endpoint 401 {type, message}", setup: fault(upstreamsim.Fault{PathPrefix: "/oauth/token", Status: 401,
			Body: `{"type":"CLIENT_ERROR","message":"{\"error\":\"access_denied\",\"error_description\":\"Unauthorized\"}"}`}),
			method: "GET", path: "/v2/providers", status: 502, code: "UPSTREAM_AUTH_FAILED", action: "contact_support"},
		{name: "500 INTERNAL_ERROR (real rule: failing provider)", method: "POST", path: "/v2/payments",
			body:   strings.Replace(fmt.Sprintf(validPayment, "Order 2"), "demobank-sandbox", "failing-bank-sandbox", 1),
			status: 502, code: "UPSTREAM_ERROR", action: "retry_later", retryable: true},
		{name: "500 INTERNAL_SERVER_ERROR on every attempt", setup: fault(upstreamsim.Fault{PathPrefix: "/v2/providers", Status: 500, Body: `{"type":"INTERNAL_SERVER_ERROR","message":"x"}`}),
			method: "GET", path: "/v2/providers", status: 502, code: "UPSTREAM_ERROR", action: "retry_later", retryable: true},
		{name: "503 MCP_TEMPORARILY_UNAVAILABLE", setup: fault(upstreamsim.Fault{PathPrefix: "/v2/providers", Status: 503, Body: `{"type":"MCP_TEMPORARILY_UNAVAILABLE","message":"x"}`}),
			method: "GET", path: "/v2/providers", status: 503, code: "MCP_TEMPORARILY_UNAVAILABLE", action: "retry_later", retryable: true},
		{name: "plain 503", setup: fault(upstreamsim.Fault{PathPrefix: "/v2/providers", Status: 503, EmptyBody: true}),
			method: "GET", path: "/v2/providers", status: 503, code: "UPSTREAM_UNAVAILABLE", action: "retry_later", retryable: true},
		{name: "upstream hangs up: unreachable", setup: fault(upstreamsim.Fault{PathPrefix: "/v2/providers", HangUp: true}),
			method: "GET", path: "/v2/providers", status: 502, code: "UPSTREAM_UNREACHABLE", action: "retry_later", retryable: true},
		{name: "upstream too slow: timeout", setup: fault(upstreamsim.Fault{PathPrefix: "/v2/providers", Delay: 4 * time.Second, Times: 1}),
			method: "GET", path: "/v2/providers", status: 504, code: "UPSTREAM_TIMEOUT", action: "retry_later", retryable: true},
		{name: "any other upstream error keeps its status and type", setup: fault(upstreamsim.Fault{PathPrefix: "/v2/providers", Status: 429, Body: `{"type":"RATE_LIMITED","message":"slow down"}`}),
			method: "GET", path: "/v2/providers", status: 429, code: "RATE_LIMITED", action: "retry_later", retryable: true},
	}
	for i, rw := range rows {
		t.Run(rw.name, func(t *testing.T) {
			e.sim.Reset()
			if rw.setup != nil {
				rw.setup(e.sim)
			}
			b := e.browser()
			b.login(fmt.Sprintf("row-%d", i))
			r := b.do(rw.method, "/api"+rw.path, rw.body, "X-CSRF", "1", "Idempotency-Key", fmt.Sprintf("row-%d", i))
			v := wantProblem(t, r, rw.status, rw.code)
			if v["action"] != rw.action || v["retryable"] != rw.retryable {
				t.Fatalf("got action %v retryable %v, want %s %v (%s)", v["action"], v["retryable"], rw.action, rw.retryable, r.body)
			}
			for _, leak := range []string{e.simURL, "127.0.0.1", "Bearer", "eyJ"} {
				if strings.Contains(string(r.body), leak) {
					t.Fatalf("the envelope leaks %q: %s", leak, r.body)
				}
			}
			if rw.check != nil {
				rw.check(t, v, r)
			}
		})
	}
	e.sim.Reset()
}

// 423 on deleting a connection younger than 90 minutes, with Retry-After.
func Test423WithRetryAfter(t *testing.T) {
	t.Parallel()
	e := start(t, options{})
	b := e.browser()
	b.login("lock-user")
	r := b.do("POST", "/api/v2/connections", `{"providerIds":["demobank-sandbox"]}`, "X-CSRF", "1")
	var created struct{ ID string }
	if r.status != 201 || json.Unmarshal(r.body, &created) != nil || created.ID == "" {
		t.Fatalf("create connection: got %d %s", r.status, r.body)
	}
	r = b.do("DELETE", "/api/v2/connections/"+created.ID, "", "X-CSRF", "1")
	v := wantProblem(t, r, 423, "RESOURCE_LOCKED")
	if r.header.Get("Retry-After") == "" || v["retryable"] != true || v["action"] != "retry_later" {
		t.Fatalf("got Retry-After %q, %s", r.header.Get("Retry-After"), r.body)
	}
}

// Payment outcomes and the refresh's already_running are 2xx and pass
// through byte for byte.
func TestOutcomesPassThrough(t *testing.T) {
	t.Parallel()
	e := start(t, options{})
	b := e.browser()
	b.login("outcome-user")
	for _, outcome := range []string{"RJCT", "CANC", "ERROR"} {
		r := b.do("POST", "/api/v2/payments", fmt.Sprintf(validPayment, "pay "+outcome), "X-CSRF", "1", "Idempotency-Key", "outcome-"+outcome)
		if r.status != 201 {
			t.Fatalf("%s: got %d %s, want 201", outcome, r.status, r.body)
		}
		var p struct{ ID string }
		_ = json.Unmarshal(r.body, &p)
		got := b.do("GET", "/api/v2/payments/"+p.ID, "")
		if got.status != 200 || !strings.Contains(string(got.body), `"`+outcome+`"`) {
			t.Fatalf("%s: got %d %s", outcome, got.status, got.body)
		}
	}
	first := b.do("POST", "/api/chat/chat/connections/refresh", "", "X-CSRF", "1")
	second := b.do("POST", "/api/chat/chat/connections/refresh", "", "X-CSRF", "1")
	if first.status != 200 || second.status != 200 || !strings.Contains(string(second.body), "already_running") {
		t.Fatalf("refresh: got %d %s then %d %s", first.status, first.body, second.status, second.body)
	}
	// Byte for byte: the BFF's reply is exactly what the upstream sends
	// for the same user and query.
	via := b.do("GET", "/api/v2/data/transactions?limit=3&sort=1", "")
	direct := directGet(t, e, "outcome-user", "/v2/data/transactions?limit=3&sort=1")
	if via.status != 200 || string(via.body) != string(direct) {
		t.Fatalf("got %d %q through the BFF, want the upstream's bytes %q", via.status, via.body, direct)
	}
}

// directGet calls the simulator itself, with a token minted for userID.
func directGet(t *testing.T, e *env, userID, path string) []byte {
	t.Helper()
	resp, err := http.Post(e.simURL+"/oauth/token", "application/json",
		strings.NewReader(fmt.Sprintf(`{"clientId":"e2e-client","clientSecret":%q,"userId":%q}`, e.secret, userID)))
	if err != nil {
		t.Fatal(err)
	}
	var tok struct{ AccessToken string }
	_ = json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	req, _ := http.NewRequest("GET", e.simURL+path, nil)
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return b
}

// Idempotent payments across three instances: concurrent duplicates run
// once, a retry replays, another body with the same key is refused, and a
// key is per user.
func TestIdempotentPaymentsAcrossInstances(t *testing.T) {
	t.Parallel()
	a := start(t, options{})
	bInst, cInst := a.another(options{}), a.another(options{})
	token := a.browser().login("ida")
	viaA, viaB := a.app(token), bInst.app(token)
	clients := []*client{viaA, viaB, cInst.app(token)}
	body := fmt.Sprintf(validPayment, "Order idem-1")
	var wg sync.WaitGroup
	results := make([]reply, 15)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = clients[i%3].do("POST", "/api/v2/payments", body, "Idempotency-Key", "idem-key-1")
		}()
	}
	wg.Wait()
	// One request runs; a duplicate that arrives while it runs gets 409,
	// and one that arrives after it finished gets the stored answer. On a
	// loaded machine the ledger may shed a duplicate's claim (503
	// LEDGER_UNAVAILABLE with a Retry-After: nothing sent): a retry later,
	// as a 409 is.
	created, replayed, conflicts := 0, 0, 0
	var first reply
	for _, r := range results {
		switch {
		case r.status == 503:
			if p := wantProblem(t, r, 503, "LEDGER_UNAVAILABLE"); r.header.Get("Retry-After") == "" {
				t.Fatalf("a shed claim without a Retry-After: %v", p)
			}
			conflicts++
		case r.status == 201 && r.header.Get("Idempotent-Replayed") == "":
			created++
			first = r
		case r.status == 201 && r.header.Get("Idempotent-Replayed") == "true":
			replayed++
		case r.status == 409:
			wantProblem(t, r, 409, "IDEMPOTENCY_IN_PROGRESS")
			conflicts++
		}
	}
	if created != 1 || created+replayed+conflicts != len(results) {
		t.Fatalf("got %d created, %d replayed and %d in progress (or shed) of %d, want one created and the rest replayed or in progress",
			created, replayed, conflicts, len(results))
	}
	for _, r := range results {
		if r.status == 201 && string(r.body) != string(first.body) {
			t.Fatalf("a duplicate got %s, want the first response %s", r.body, first.body)
		}
	}
	posts := 0
	for _, rq := range a.sim.Requests() {
		if rq.Method == "POST" && rq.Path == "/v2/payments" {
			posts++
		}
	}
	if posts != 1 {
		t.Fatalf("the upstream saw %d payment creations, want 1", posts)
	}
	// A retry on the other instance replays the stored response.
	again := viaB.do("POST", "/api/v2/payments", body, "Idempotency-Key", "idem-key-1")
	if again.status != 201 || string(again.body) != string(first.body) || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: got %d %s replayed=%q, want the first response", again.status, again.body, again.header.Get("Idempotent-Replayed"))
	}
	wantProblem(t, viaA.do("POST", "/api/v2/payments", fmt.Sprintf(validPayment, "Order idem-2"), "Idempotency-Key", "idem-key-1"), 422, "IDEMPOTENCY_KEY_REUSED")
	wantProblem(t, viaA.do("POST", "/api/v2/payments", body, "Idempotency-Key", "bad key with spaces"), 400, "IDEMPOTENCY_KEY_INVALID")
	// The same key for another user is that user's own.
	other := a.app(a.browser().login("ivo"))
	if r := other.do("POST", "/api/v2/payments", body, "Idempotency-Key", "idem-key-1"); r.status != 201 || r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("another user's first use: got %d replayed=%q", r.status, r.header.Get("Idempotent-Replayed"))
	}
	// A payment the upstream refused before acting (bank down) frees the key.
	down := strings.Replace(fmt.Sprintf(validPayment, "Order idem-3"), "demobank-sandbox", "unavailable-bank-sandbox", 1)
	wantProblem(t, viaA.do("POST", "/api/v2/payments", down, "Idempotency-Key", "idem-key-3"), 503, "PROVIDER_UNAVAILABLE")
	r := viaA.do("POST", "/api/v2/payments", down, "Idempotency-Key", "idem-key-3")
	if r.header.Get("Idempotent-Replayed") != "" {
		t.Fatal("a released key was replayed instead of run again")
	}
}

func TestIdempotencyKeyRequired(t *testing.T) {
	t.Parallel()
	e := start(t, options{})
	app := e.app(e.browser().login("req"))
	wantProblem(t, app.do("POST", "/api/v2/payments", fmt.Sprintf(validPayment, "x")), 400, "IDEMPOTENCY_KEY_REQUIRED")
	if r := app.do("POST", "/api/v2/payments", fmt.Sprintf(validPayment, "x"), "Idempotency-Key", "k-1"); r.status != 201 {
		t.Fatalf("with a key: got %d %s", r.status, r.body)
	}
	// Other routes do not need one.
	if r := app.do("POST", "/api/v2/connections", `{"providerIds":["demobank-sandbox"]}`); r.status != 201 {
		t.Fatalf("connections: got %d %s", r.status, r.body)
	}
}

// Rotating redis.encryption_key: an instance with the new key and the old
// one among redis.decryption_keys replays a payment stored under the old
// key; one that was not given the old key cannot read the ledger's stored
// answer and refuses the retry (503) rather than pay twice, and the
// upstream sees one payment throughout.
func TestIdempotencyAcrossEncryptionKeyRotation(t *testing.T) {
	t.Parallel()
	before := start(t, options{})
	token := before.browser().login("rota")
	body := fmt.Sprintf(validPayment, "Order rotation-1")
	first := before.app(token).do("POST", "/api/v2/payments", body, "Idempotency-Key", "rotation-key-1")
	if first.status != 201 {
		t.Fatalf("first: got %d %s", first.status, first.body)
	}
	newKey := randomB64(32)
	rotated := before.another(options{env: map[string]string{
		"BFF_REDIS_ENCRYPTION_KEY": newKey, "BFF_REDIS_DECRYPTION_KEYS": "[" + before.encKey + "]",
	}})
	again := rotated.app(token).do("POST", "/api/v2/payments", body, "Idempotency-Key", "rotation-key-1")
	if again.status != 201 || string(again.body) != string(first.body) || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("after rotation: got %d %s replayed=%q, want the stored 201", again.status, again.body, again.header.Get("Idempotent-Replayed"))
	}
	forgot := before.another(options{env: map[string]string{"BFF_REDIS_ENCRYPTION_KEY": newKey}})
	wantProblem(t, forgot.app(token).do("POST", "/api/v2/payments", body, "Idempotency-Key", "rotation-key-1"), 503, "LEDGER_UNAVAILABLE")
	posts := 0
	for _, rq := range before.sim.Requests() {
		if rq.Method == "POST" && rq.Path == "/v2/payments" {
			posts++
		}
	}
	if posts != 1 {
		t.Fatalf("the upstream saw %d payment creations, want 1", posts)
	}
	if strings.Contains(forgot.logs.String(), newKey) || strings.Contains(rotated.logs.String(), before.encKey) {
		t.Fatal("an encryption key reached the logs")
	}
}
