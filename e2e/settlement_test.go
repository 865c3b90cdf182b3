//go:build integration

package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/upstreamsim"
)

// waitForRequest waits (15 s at most) until the upstream has received a
// request with this method and path, and returns the first.
func waitForRequest(t *testing.T, sim *upstreamsim.Server, method, path string) upstreamsim.SeenRequest {
	t.Helper()
	var seen upstreamsim.SeenRequest
	eventually(t, 15*time.Second, func() error {
		for _, rq := range sim.Requests() {
			if rq.Method == method && rq.Path == path {
				seen = rq
				return nil
			}
		}
		return fmt.Errorf("%s %s never reached the upstream", method, path)
	})
	return seen
}

// An instance killed before it sent the payment (here while it reads the
// user's payments just before the send) provably sent nothing: its claim
// is given back at its deadline and the repeat on another instance runs
// the payment, once. Before the send mark, such a key stayed
// PAYMENT_OUTCOME_UNKNOWN for good.
func TestOwnerKilledBeforeItsSendRunsAgain(t *testing.T) {
	t.Parallel()
	a := start(t, options{upstream: "timeout: 2s"})
	b := a.another(options{upstream: "timeout: 2s"})
	token := a.browser().login("unsent-owner")
	body := fmt.Sprintf(validPayment, "Order unsent-1")
	a.sim.InjectFault(upstreamsim.Fault{Method: "GET", PathPrefix: "/v2/payments", Delay: time.Minute, Times: 1})
	lost := make(chan error, 1)
	go func() {
		_, err := a.app(token).try("POST", "/api/v2/payments", body, "Idempotency-Key", "unsent-key-1")
		lost <- err
	}()
	waitForRequest(t, a.sim, "GET", "/v2/payments")
	a.kill()
	if err := <-lost; err == nil {
		t.Fatal("the client got an answer from a killed instance")
	}
	if n := paymentPosts(a.sim); n != 0 {
		t.Fatalf("the upstream received %d payment creations before the kill, want 0", n)
	}
	r, _ := retryUntilSettled(t, b.app(token), body, "unsent-key-1")
	if r.status != 201 || r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("after the owner died unsent: got %d %s, want a fresh 201", r.status, r.body)
	}
	if n := count(a.sim.PaymentRemittances("unsent-owner"), "Order unsent-1"); n != 1 {
		t.Fatalf("the upstream holds %d payments for the key, want 1", n)
	}
	if state, ending, _ := ledgerRow(t, a, "unsent-key-1"); state != "done" || ending != "answered" {
		t.Fatalf("ledger: got %s/%s, want done/answered", state, ending)
	}
}

// A payment whose request reached the upstream, which hung up before
// making anything, is never reported made with another payment's id: not
// one the user made through the open-banking init, not one made outside
// the BFF a moment before.
func TestHungUpPaymentIsNeverAnotherPayment(t *testing.T) {
	t.Parallel()
	a := start(t, options{upstream: "timeout: 2s"})
	token := a.browser().login("hung-up")
	app := a.app(token)
	body := fmt.Sprintf(validPayment, "Order same")
	init := strings.Replace(body, `"providerIds":["demobank-sandbox"]`, `"providerId":"demobank-sandbox"`, 1)
	if r := app.do("POST", "/api/v2/pay/open-banking-init", init, "Idempotency-Key", "A-1"); r.status != 200 {
		t.Fatalf("A: got %d %s", r.status, r.body)
	}
	if _, err := a.sim.CreateDirectPayment("hung-up", []byte(body)); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"B-1", "B-2"} {
		a.sim.InjectFault(upstreamsim.Fault{Method: "POST", PathPrefix: "/v2/payments", HangUp: true, Times: 1})
		wantProblem(t, app.do("POST", "/api/v2/payments", body, "Idempotency-Key", key), 502, "PAYMENT_OUTCOME_UNKNOWN")
		wantProblem(t, app.do("POST", "/api/v2/payments", body, "Idempotency-Key", key), 502, "PAYMENT_OUTCOME_UNKNOWN")
		if state, _, pid := ledgerRow(t, a, key); state != "unknown" || pid != "" {
			t.Fatalf("%s in the ledger: got %s with payment %q, want unknown with none", key, state, pid)
		}
	}
	if n := count(a.sim.PaymentRemittances("hung-up"), "Order same"); n != 2 {
		t.Fatalf("the upstream holds %d payments, want 2 (A's and the outside one)", n)
	}
}

// An upstream that makes the payment and still answers 401 gets it once:
// the BFF settles it instead of resending.
func TestPaymentAfterAn401IsSentOnce(t *testing.T) {
	t.Parallel()
	a := start(t, options{upstream: "timeout: 2s"})
	token := a.browser().login("acted-401")
	body := fmt.Sprintf(validPayment, "Order 401")
	a.sim.InjectFault(upstreamsim.Fault{Method: "POST", PathPrefix: "/v2/payments", AfterActing: true, Status: 401, Times: 1})
	r := a.app(token).do("POST", "/api/v2/payments", body, "Idempotency-Key", "k-401")
	if r.status != 201 {
		t.Fatalf("got %d %s, want the settled 201", r.status, r.body)
	}
	var got struct{ ID string }
	_ = json.Unmarshal(r.body, &got)
	if n := paymentPosts(a.sim); n != 1 {
		t.Fatalf("the upstream received %d payment creations, want 1", n)
	}
	if n := count(a.sim.PaymentRemittances("acted-401"), "Order 401"); n != 1 {
		t.Fatalf("the upstream holds %d payments, want 1", n)
	}
	if state, ending, pid := ledgerRow(t, a, "k-401"); state != "done" || ending != "settled" || pid != got.ID {
		t.Fatalf("ledger: got %s/%s/%s, want done/settled/%s", state, ending, pid, got.ID)
	}
}

// refreshPosts counts the refreshes that reached the upstream.
func refreshPosts(sim *upstreamsim.Server) int {
	n := 0
	for _, rq := range sim.Requests() {
		if rq.Method == "POST" && strings.HasPrefix(rq.Path, "/chat/chat/connections/refresh") {
			n++
		}
	}
	return n
}

// The 20-credit refresh is guarded like money: clients that hang up do not
// free the hold (one upstream refresh for ten aborted clicks), every path
// under the route is held, and a refresh the upstream says it did not
// start (already_running) does not use the user's allowance.
func TestRefreshIsGuardedLikeMoney(t *testing.T) {
	a := start(t, options{limitsYAML: "limits: { requests_per_second: 0, auth_per_minute: 0, refresh_interval: 15m, sessions_per_user: 0 }"})
	token := a.browser().login("refresher")
	a.sim.InjectFault(upstreamsim.Fault{Method: "POST", PathPrefix: "/chat/chat/connections/refresh", Delay: 500 * time.Millisecond, Times: 1})
	impatient := a.app(token)
	impatient.http.Timeout = 100 * time.Millisecond
	for i := 0; i < 10; i++ {
		_, _ = impatient.try("POST", "/api/chat/chat/connections/refresh", "")
		time.Sleep(20 * time.Millisecond) // a person's pace between clicks
	}
	// The detached refresh ends: its click's access log line is written
	// once the upstream answered it, long after the client gave up.
	eventually(t, 5*time.Second, func() error {
		if !strings.Contains(a.logs.String(), `"route":"/api/chat/chat/connections/refresh","status":200`) {
			return errors.New("the detached refresh has not ended")
		}
		return nil
	})
	if n := refreshPosts(a.sim); n != 1 {
		t.Fatalf("ten aborted clicks sent %d refreshes upstream, want 1", n)
	}
	app := a.app(token)
	for _, path := range []string{"/api/chat/chat/connections/refresh", "/api/chat/chat/connections/refresh/", "/api/chat/chat/connections/refresh/x"} {
		wantProblem(t, app.do("POST", path, ""), 429, "REFRESH_TOO_SOON")
	}
	if n := refreshPosts(a.sim); n != 1 {
		t.Fatalf("the upstream got %d refreshes, want 1", n)
	}

	// The organization's refresh (started above) is still running: another
	// user's click is answered already_running, which spends nothing.
	other := a.app(a.browser().login("refresher-2"))
	for i := 0; i < 2; i++ {
		r := other.do("POST", "/api/chat/chat/connections/refresh", "")
		if v := r.json(t); r.status != 200 || v["status"] != "already_running" {
			t.Fatalf("click %d: got %d %s, want 200 already_running (not 429: the first spent no allowance)", i+1, r.status, r.body)
		}
	}
}
