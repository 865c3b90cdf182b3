package payments_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/testing/poll"
	"github.com/fintech-bff/bff/internal/upstreamsim"
)

// A payment's status moves at an upstream that sends only what the API
// documents (no updatedAt on a payment): the follower dates the status it
// polled by the ledger's clock when it stores it, so the record (and every
// stream) learns the new status, and a final one ends the following.
func TestFollowerNeedsNoUpdatedAt(t *testing.T) {
	a := newAttack(t)
	documented := upstreamsim.ProfileDocumented
	if _, err := a.sim.UpdateSettings(upstreamsim.SettingsPatch{ReplyProfile: &documented}); err != nil {
		t.Fatal(err)
	}
	a.svc = payments.New(payments.Options{Upstream: a.fwd, Timeout: 2 * time.Second, MoneyRoutes: []string{"/v2/payments", "/v2/pay"}, Ledger: a.led,
		Follow: payments.Follow{Interval: 20 * time.Millisecond, MaxInterval: 40 * time.Millisecond, For: time.Hour, Batch: 10}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.svc.RunFollow(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	w := a.post(t, "/v2/payments", attackPayment, "FOLLOW")
	if w.Code != http.StatusCreated {
		t.Fatalf("the payment: got %d %s", w.Code, w.Body)
	}
	id := paidIDOf(w)
	status := func() string {
		a.clock.Advance(50 * time.Millisecond) // the ledger's clock, which the polls are due by
		rec, err := a.svc.Record(context.Background(), attackUser, "FOLLOW")
		if err != nil {
			t.Fatal(err)
		}
		if rec.PaymentStatus == nil {
			return ""
		}
		return *rec.PaymentStatus
	}
	poll.Until(t, 10*time.Second, "the first status polled", func() bool { return status() == "INIT" })
	if err := a.sim.SetPaymentStatus(attackUser, id, "ACSP"); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "the bank's ACSP, polled without an updatedAt", func() bool { return status() == "ACSP" })
	if err := a.sim.SetPaymentStatus(attackUser, id, "ACSC"); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "the bank's ACSC, polled without an updatedAt", func() bool { return status() == "ACSC" })
	// Final is final: a later status the upstream reports is not stored.
	if err := a.sim.SetPaymentStatus(attackUser, id, "RJCT"); err == nil {
		time.Sleep(200 * time.Millisecond) // deliberate: polls that would store it, were it followed
		if got := status(); got != "ACSC" {
			t.Fatalf("after the final ACSC the record reads %s", got)
		}
	}
}
