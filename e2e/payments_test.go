//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fintech-bff/bff/internal/testing/pgtest"
	"github.com/fintech-bff/bff/internal/testing/redistest"
	"github.com/fintech-bff/bff/internal/upstreamsim"
)

// count returns how many times want occurs in list.
func count(list []string, want string) int {
	n := 0
	for _, s := range list {
		if s == want {
			n++
		}
	}
	return n
}

// paymentPosts counts the payment creations that reached the upstream.
func paymentPosts(sim *upstreamsim.Server) int {
	n := 0
	for _, rq := range sim.Requests() {
		if rq.Method == "POST" && rq.Path == "/v2/payments" {
			n++
		}
	}
	return n
}

// waitForPost waits until the upstream has received a payment creation
// and returns it.
func waitForPost(t *testing.T, sim *upstreamsim.Server) upstreamsim.SeenRequest {
	t.Helper()
	return waitForRequest(t, sim, "POST", "/v2/payments")
}

// retryUntilSettled repeats a payment with its key, as a client does after
// losing the answer, until the BFF stops answering 409 in progress (bounded
// by 40 s). It returns the final answer and how long it took.
func retryUntilSettled(t *testing.T, c *client, body, key string) (reply, time.Duration) {
	t.Helper()
	start := time.Now()
	for time.Since(start) < 40*time.Second {
		r, err := c.try("POST", "/api/v2/payments", body, "Idempotency-Key", key)
		if err == nil && r.status != http.StatusConflict && r.status < 500 || err == nil && r.status == http.StatusBadGateway && strings.Contains(string(r.body), "PAYMENT_OUTCOME_UNKNOWN") {
			return r, time.Since(start)
		}
		time.Sleep(250 * time.Millisecond) // a client's pace between retries
	}
	t.Fatal("the payment was still in progress after 40 s")
	return reply{}, 0
}

// ledgerRow reads a key's ledger row straight from PostgreSQL.
func ledgerRow(t *testing.T, e *env, key string) (state, ending, paymentID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, e.ledgerURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var pid *string
	if err := conn.QueryRow(ctx, "SELECT state, coalesce(ending, ''), payment_id FROM money_requests WHERE idem_key = $1", key).Scan(&state, &ending, &pid); err != nil {
		t.Fatal(err)
	}
	if pid != nil {
		paymentID = *pid
	}
	return state, ending, paymentID
}

// An instance is killed (SIGKILL) after the upstream made the payment and
// before the instance stored the answer. The same key on another instance
// is in progress until the dead owner's deadline, then settled from the
// upstream's payment list and replayed: one payment.
func TestPaymentSurvivesAnInstanceKilledAfterTheUpstreamActed(t *testing.T) {
	t.Parallel()
	a := start(t, options{upstream: "timeout: 2s"})
	b := a.another(options{upstream: "timeout: 2s"})
	token := a.browser().login("killed-owner")
	body := fmt.Sprintf(validPayment, "Order killed-1")
	a.sim.InjectFault(upstreamsim.Fault{Method: "POST", PathPrefix: "/v2/payments", AfterActing: true, Delay: time.Minute, Times: 1})

	lost := make(chan error, 1)
	go func() {
		_, err := a.app(token).try("POST", "/api/v2/payments", body, "Idempotency-Key", "killed-key-1")
		lost <- err
	}()
	waitForPost(t, a.sim)
	a.kill()
	if err := <-lost; err == nil {
		t.Fatal("the client got an answer from a killed instance")
	}
	killedAt := time.Now()
	r, took := retryUntilSettled(t, b.app(token), body, "killed-key-1")
	if r.status != 201 || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("after the owner died: got %d %s, want the settled 201, replayed", r.status, r.body)
	}
	var got struct{ ID string }
	_ = json.Unmarshal(r.body, &got)
	if n := count(a.sim.PaymentRemittances("killed-owner"), "Order killed-1"); n != 1 {
		t.Fatalf("the upstream holds %d payments for the key, want 1", n)
	}
	if n := paymentPosts(a.sim); n != 1 {
		t.Fatalf("the upstream received %d payment creations, want 1", n)
	}
	state, ending, pid := ledgerRow(t, a, "killed-key-1")
	if state != "done" || ending != "settled" || pid != got.ID {
		t.Fatalf("ledger: got %s/%s/%s, want done/settled/%s", state, ending, pid, got.ID)
	}
	again := b.app(token).do("POST", "/api/v2/payments", body, "Idempotency-Key", "killed-key-1")
	if again.status != 201 || string(again.body) != string(r.body) {
		t.Fatalf("a later repeat: got %d %s, want the same replay", again.status, again.body)
	}
	t.Logf("settled %v after the kill (%v of retries answered 409 until the owner's deadline)", time.Since(killedAt), took)
}

// Redis loses every key (FLUSHALL, then a restart without persistence)
// between a payment and its repeat: the user logs in again (sessions live
// in Redis), and the repeat replays from the ledger. One payment.
func TestPaymentReplaysAfterRedisLosesItsData(t *testing.T) {
	t.Parallel()
	rs := redistest.StartServer(t)
	e := start(t, options{redisAddr: rs.Addr})
	body := fmt.Sprintf(validPayment, "Order redis-loss-1")
	first := e.app(e.browser().login("redis-loss")).do("POST", "/api/v2/payments", body, "Idempotency-Key", "redis-loss-key")
	if first.status != 201 {
		t.Fatalf("first: got %d %s", first.status, first.body)
	}
	rc := rs.Client()
	defer rc.Close()
	if err := rc.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	afterFlush := e.app(e.browser().login("redis-loss")).do("POST", "/api/v2/payments", body, "Idempotency-Key", "redis-loss-key")
	if afterFlush.status != 201 || string(afterFlush.body) != string(first.body) || afterFlush.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("after FLUSHALL: got %d %s, want the first answer replayed", afterFlush.status, afterFlush.body)
	}
	rs.Restart(t)
	var afterRestart reply
	deadline := time.Now().Add(15 * time.Second)
	for { // the BFF reconnects; until then a login is 503 SESSION_STORE_UNAVAILABLE
		r := e.browser().do("POST", "/auth/dev/login", `{"userId":"redis-loss"}`)
		if r.status == 200 {
			var v struct{ SessionToken string }
			_ = json.Unmarshal(r.body, &v)
			afterRestart = e.app(v.SessionToken).do("POST", "/api/v2/payments", body, "Idempotency-Key", "redis-loss-key")
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no login 15 s after Redis restarted: %d %s", r.status, r.body)
		}
		time.Sleep(100 * time.Millisecond) // a client's pace between logins
	}
	if afterRestart.status != 201 || string(afterRestart.body) != string(first.body) || afterRestart.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("after the restart: got %d %s, want the first answer replayed", afterRestart.status, afterRestart.body)
	}
	if n := count(e.sim.PaymentRemittances("redis-loss"), "Order redis-loss-1"); n != 1 {
		t.Fatalf("the upstream holds %d payments, want 1", n)
	}
}

// A Sentinel failover while payments run: clients retry with their key on
// any failure; every key makes at most one payment, and each ends with a
// payment or a clear answer.
func TestPaymentsThroughASentinelFailover(t *testing.T) {
	t.Parallel()
	s := redistest.StartSentinel(t)
	a := start(t, options{sentinel: s})
	b := a.another(options{sentinel: s})
	instances := []*env{a, b}
	const users, perUser = 6, 6
	tokens := make([]string, users)
	for i := range tokens {
		tokens[i] = a.browser().login(fmt.Sprintf("failover-%d", i))
	}
	s.WaitReplicated(t)
	var wg sync.WaitGroup
	var created, replayed, unknown, retries atomic.Int64
	var failures sync.Map
	started := make(chan struct{})
	for u := 0; u < users; u++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := 0; p < perUser; p++ {
				if p == 2 && u == 0 {
					close(started)
				}
				key := fmt.Sprintf("failover-%d-%d", u, p)
				body := fmt.Sprintf(validPayment, key)
				deadline := time.Now().Add(30 * time.Second)
				for attempt := 0; ; attempt++ {
					c := instances[(u+p+attempt)%2].app(tokens[u])
					r, err := c.try("POST", "/api/v2/payments", body, "Idempotency-Key", key)
					switch {
					case err == nil && r.status == 201 && r.header.Get("Idempotent-Replayed") == "true":
						replayed.Add(1)
					case err == nil && r.status == 201:
						created.Add(1)
					case err == nil && strings.Contains(string(r.body), "PAYMENT_OUTCOME_UNKNOWN"):
						unknown.Add(1)
					case time.Now().After(deadline):
						failures.Store(key, fmt.Sprintf("%d %s %v", r.status, r.body, err))
					default: // 503 while the master is gone, 409 while another attempt runs
						retries.Add(1)
						time.Sleep(100 * time.Millisecond) // a client's pace between retries
						continue
					}
					break
				}
			}
		}()
	}
	<-started
	s.KillMaster(t)
	took := s.WaitFailover(t)
	wg.Wait()
	failures.Range(func(k, v any) bool { t.Errorf("payment %v never ended: %v", k, v); return true })
	for u := 0; u < users; u++ {
		have := a.sim.PaymentRemittances(fmt.Sprintf("failover-%d", u))
		for p := 0; p < perUser; p++ {
			if n := count(have, fmt.Sprintf("failover-%d-%d", u, p)); n > 1 {
				t.Errorf("key failover-%d-%d made %d payments", u, p, n)
			}
		}
	}
	if created.Load() == 0 {
		t.Fatal("no payment was created: the run proved nothing")
	}
	t.Logf("failover took %v; %d created, %d replayed, %d unknown, %d retries (503 or 409) on the way",
		took, created.Load(), replayed.Load(), unknown.Load(), retries.Load())
}

// HAProxy in front of two instances; the instance holding a payment is
// killed mid-request. HAProxy does not send the POST again; the client's
// repeat with the key ends with the one payment.
func TestLoadBalancerNeverResendsAPayment(t *testing.T) {
	a := start(t, options{upstream: "timeout: 2s"})
	b := a.another(options{upstream: "timeout: 2s"})
	l := startLB(t, []*env{a, b})
	front := l.through(a)
	token := front.browser().login("lb-payer")
	// Which instance served a request shows in its X-Request-Id prefix.
	prefixOf := map[string]*env{}
	for _, e := range []*env{a, b} {
		id := e.browser().do("GET", "/auth/session", "").header.Get("X-Request-Id")
		prefixOf[id[:16]] = e
	}
	body := fmt.Sprintf(validPayment, "Order lb-1")
	a.sim.InjectFault(upstreamsim.Fault{Method: "POST", PathPrefix: "/v2/payments", AfterActing: true, Delay: time.Minute, Times: 1})
	answer := make(chan reply, 1)
	go func() {
		// A connection of its own: Go's client would itself resend a keyed
		// POST whose reused connection closed unanswered, and this test is
		// about the balancer.
		c := front.app(token)
		c.http = &http.Client{Timeout: 30 * time.Second, Transport: validate(t, &http.Transport{DisableKeepAlives: true})}
		r, err := c.try("POST", "/api/v2/payments", body, "Idempotency-Key", "lb-key-1")
		if err != nil {
			t.Error(err)
		}
		answer <- r
	}()
	seen := waitForPost(t, a.sim)
	owner := prefixOf[seen.Header.Get("X-Request-Id")[:16]]
	if owner == nil {
		t.Fatalf("no instance has request id %q", seen.Header.Get("X-Request-Id"))
	}
	owner.kill()
	r := <-answer
	if r.status != http.StatusBadGateway || r.header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("the client got %d %q %s, want the balancer's 502 as problem+json", r.status, r.header.Get("Content-Type"), r.body)
	}
	final, _ := retryUntilSettled(t, front.app(token), body, "lb-key-1")
	if final.status != 201 {
		t.Fatalf("the repeat: got %d %s, want the settled payment", final.status, final.body)
	}
	if n := paymentPosts(a.sim); n != 1 {
		t.Fatalf("the upstream received %d payment creations, want 1: the balancer resent the POST", n)
	}
}

// When the ledger's database is gone, a payment fails closed with 503
// LEDGER_UNAVAILABLE before anything is sent, reads still work, /readyz
// stays 200 and bff_ledger_up turns 0.
func TestLedgerOutageFailsClosed(t *testing.T) {
	t.Parallel()
	e := start(t, options{})
	app := e.app(e.browser().login("ledger-down"))
	if r := app.do("POST", "/api/v2/payments", fmt.Sprintf(validPayment, "Order before"), "Idempotency-Key", "before-outage"); r.status != 201 {
		t.Fatalf("before the outage: got %d %s", r.status, r.body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, pgtest.ServerURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	db := strings.TrimPrefix(mustURL(t, e.ledgerURL).Path, "/")
	if _, err := admin.Exec(ctx, "DROP DATABASE "+db+" WITH (FORCE)"); err != nil {
		t.Fatal(err)
	}
	posts := paymentPosts(e.sim)
	r := app.do("POST", "/api/v2/payments", fmt.Sprintf(validPayment, "Order during"), "Idempotency-Key", "during-outage")
	v := wantProblem(t, r, 503, "LEDGER_UNAVAILABLE")
	if v["retryable"] != true || v["action"] != "retry_later" {
		t.Fatalf("got %s, want retry_later, retryable", r.body)
	}
	if n := paymentPosts(e.sim); n != posts {
		t.Fatalf("the upstream received %d payment creations during the outage, want none", n-posts)
	}
	if r := app.do("GET", "/api/v2/payments", ""); r.status != 200 {
		t.Fatalf("a read during the outage: got %d %s, want 200", r.status, r.body)
	}
	if got := readyz(t, e); got != 200 {
		t.Fatalf("readyz during the outage: got %d, want 200", got)
	}
	if m := scrape(t, e); !strings.Contains(m, "\nbff_ledger_up 0\n") || !strings.Contains(m, `bff_money_requests_total{result="ledger_unavailable"} 1`) {
		t.Fatal("bff_ledger_up is not 0, or the refusal is not counted")
	}
	if strings.Contains(e.logs.String(), "postgres://") {
		t.Fatal("the ledger's URL reached the logs")
	}
}
