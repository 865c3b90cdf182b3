package payments_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/testing/testclock"
)

func paidID(t *testing.T, body []byte) string {
	t.Helper()
	var v struct {
		ID, PaymentID string
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if v.ID != "" {
		return v.ID
	}
	return v.PaymentID
}

// What the BFF reports about money is true: a settled 201 names a payment
// this request made, never one made before it, by another key or route, or
// outside the BFF.
func TestSettlementNeverAdoptsAnotherPayment(t *testing.T) {
	t.Run("a payment made through the open-banking init is not a lost /v2/payments answer", func(t *testing.T) {
		f := newMoneyFixture(t, nil)
		a := f.post(t, "/v2/pay/open-banking-init", strings.Replace(payment, `"providerIds":["demobank-sandbox"]`, `"providerId":"demobank-sandbox"`, 1), "A-1")
		if a.Code != 200 {
			t.Fatalf("A: got %d %s", a.Code, a.Body)
		}
		f.bank.refuse.Store("hangup") // B reaches the upstream, which hangs up before making anything
		w := f.pay(t, payment, "B-1")
		if p := decodeProblem(t, w); w.Code != 502 || p.Code != "PAYMENT_OUTCOME_UNKNOWN" {
			t.Fatalf("B: got %d %s, want 502 PAYMENT_OUTCOME_UNKNOWN (never A's payment %s)", w.Code, w.Body, paidID(t, a.Body.Bytes()))
		}
		if p := decodeProblem(t, f.pay(t, payment, "B-1")); p.Code != "PAYMENT_OUTCOME_UNKNOWN" {
			t.Fatalf("B repeated: got %+v", p)
		}
	})

	t.Run("a payment made outside the BFF a moment before is not this request's", func(t *testing.T) {
		f := newMoneyFixture(t, nil)
		var body map[string]any
		_ = json.Unmarshal([]byte(payment), &body)
		outside := f.bank.add(body)
		f.bank.refuse.Store("hangup")
		w := f.pay(t, payment, "B-1")
		if p := decodeProblem(t, w); w.Code != 502 || p.Code != "PAYMENT_OUTCOME_UNKNOWN" {
			t.Fatalf("got %d %s, want 502 PAYMENT_OUTCOME_UNKNOWN (never the outside payment %s)", w.Code, w.Body, outside)
		}
	})

	t.Run("with an older payment of the same content, the lost answer settles to the new one", func(t *testing.T) {
		f := newMoneyFixture(t, nil)
		var body map[string]any
		_ = json.Unmarshal([]byte(payment), &body)
		older := f.bank.add(body)
		f.bank.after.Store("hangup")
		w := f.pay(t, payment, "B-1")
		if w.Code != 201 || paidID(t, w.Body.Bytes()) == older {
			t.Fatalf("got %d %s, want 201 with the payment this request made (not %s)", w.Code, w.Body, older)
		}
	})
}

// An upstream (or a gateway in front of it) that acts and still answers
// 401 does not get the payment twice: the BFF settles before anything is
// sent again.
func TestPaymentAfter401(t *testing.T) {
	t.Run("acted, then 401: one POST, the payment settled", func(t *testing.T) {
		f := newMoneyFixture(t, nil)
		f.bank.after.Store("401")
		w := f.pay(t, payment, "k401")
		if w.Code != 201 || paidID(t, w.Body.Bytes()) != "01JPAY0001" {
			t.Fatalf("got %d %s, want the settled 201 of the payment made", w.Code, w.Body)
		}
		if n := f.bank.seen.get("POST /v2/payments"); n != 1 {
			t.Fatalf("the upstream got %d POSTs, want 1", n)
		}
		if again := f.pay(t, payment, "k401"); again.Code != 201 || again.Header().Get("Idempotent-Replayed") != "true" {
			t.Fatalf("repeat: got %d %s", again.Code, again.Body)
		}
	})

	t.Run("refused with 401 before acting: sent once more with a new token", func(t *testing.T) {
		f := newMoneyFixture(t, nil)
		f.bank.refuse.Store("401")
		w := f.pay(t, payment, "k401b")
		if w.Code != 201 {
			t.Fatalf("got %d %s, want 201", w.Code, w.Body)
		}
		if n, c := f.bank.seen.get("POST /v2/payments"), f.bank.creates.Load(); n != 2 || c != 1 {
			t.Fatalf("got %d POSTs and %d payments, want 2 and 1", n, c)
		}
		if n := f.tokens.invalidated.Load(); n != 1 {
			t.Fatalf("got %d tokens dropped, want 1", n)
		}
	})

	t.Run("an open-banking init that creates a payment is settled as a creation", func(t *testing.T) {
		f := newMoneyFixture(t, nil)
		f.bank.after.Store("401")
		w := f.post(t, "/v2/pay/open-banking-init", strings.Replace(payment, `"providerIds":["demobank-sandbox"]`, `"providerId":"demobank-sandbox"`, 1), "k401c")
		var got struct{ PaymentID string }
		_ = json.Unmarshal(w.Body.Bytes(), &got)
		if w.Code != 200 || got.PaymentID != "01JPAY0001" {
			t.Fatalf("got %d %s, want the settled 200 of the payment the init made", w.Code, w.Body)
		}
		if n := f.bank.seen.get("POST /v2/pay/open-banking-init"); n != 1 {
			t.Fatalf("the upstream got %d POSTs, want 1", n)
		}
	})

	t.Run("an open-banking init of an existing payment, which settling cannot read, is never resent after a 401", func(t *testing.T) {
		f := newMoneyFixture(t, nil)
		f.bank.refuse.Store("401")
		w := f.post(t, "/v2/pay/open-banking-init", `{"paymentId":"01JPAY0009","providerId":"bank-sandbox"}`, "k401d")
		if p := decodeProblem(t, w); w.Code != 502 || p.Code != "PAYMENT_OUTCOME_UNKNOWN" {
			t.Fatalf("got %d %s, want 502 PAYMENT_OUTCOME_UNKNOWN", w.Code, w.Body)
		}
		if n := f.bank.seen.get("POST /v2/pay/open-banking-init"); n != 1 {
			t.Fatalf("the upstream got %d POSTs, want 1", n)
		}
	})
}

// deadOwner claims key for body as an owner that then died would have:
// marked (it may have sent) or not.
func deadOwner(t *testing.T, led *ledger.Memory, key, body string, marked bool) *ledger.Claim {
	t.Helper()
	req := ledger.Request{UserID: "alice", Route: "/v2/payments", Key: key,
		Fingerprint: payments.Fingerprint(http.MethodPost, "/v2/payments", "", []byte(body)),
		Content:     payments.PaymentContent([]byte(body)), SessionRef: "handle", ClientIP: "203.0.113.7", RequestID: "req-dead"}
	c, _, err := led.Claim(context.Background(), req, time.Second)
	if err != nil || c == nil {
		t.Fatalf("claim: %v, %v", c, err)
	}
	if marked {
		if ok, err := led.Sending(context.Background(), c, ledger.SendEvidence{Snapshot: true, WindowEnd: time.Now().Add(time.Minute)}); !ok || err != nil {
			t.Fatalf("mark: %v, %v", ok, err)
		}
	}
	return c
}

// An owner that died: before its send mark the request provably never
// left, and the key runs again; after it, the background settler looks
// for the payment and a repeat replays what it found, or the outcome stays
// unknown.
func TestDeadOwners(t *testing.T) {
	setup := func(t *testing.T) (*moneyFixture, *ledger.Memory, *testclock.Clock) {
		clock := testclock.New(time.Now())
		led, err := ledger.NewMemory(clock.Now, make([]byte, 32), nil)
		if err != nil {
			t.Fatal(err)
		}
		return newMoneyFixture(t, led), led, clock
	}

	t.Run("died before its mark: the repeat runs it", func(t *testing.T) {
		f, led, clock := setup(t)
		deadOwner(t, led, "dead-1", payment, false)
		if p := decodeProblem(t, f.pay(t, payment, "dead-1")); p.Code != "IDEMPOTENCY_IN_PROGRESS" {
			t.Fatalf("before the deadline: got %+v, want 409 IDEMPOTENCY_IN_PROGRESS", p)
		}
		clock.Advance(2 * time.Second)
		w := f.pay(t, payment, "dead-1")
		if w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "" {
			t.Fatalf("after the deadline: got %d %s, want a fresh 201", w.Code, w.Body)
		}
		if n := f.bank.creates.Load(); n != 1 {
			t.Fatalf("the upstream made %d payments, want 1", n)
		}
	})

	t.Run("died before its mark, nobody came back: the settler gives the key back", func(t *testing.T) {
		f, led, clock := setup(t)
		c := deadOwner(t, led, "dead-2", payment, false)
		clock.Advance(2 * time.Second)
		f.svc.SettleDue(context.Background())
		if ok, _ := led.Unknown(context.Background(), c, ledger.Outcome{}); ok {
			t.Fatal("the record was still in flight after the settler's look")
		}
		if w := f.pay(t, payment, "dead-2"); w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "" {
			t.Fatalf("got %d %s, want a fresh 201", w.Code, w.Body)
		}
	})

	t.Run("died after its mark, the payment was made: settled in the background", func(t *testing.T) {
		f, led, clock := setup(t)
		deadOwner(t, led, "dead-3", payment, true)
		var body map[string]any
		_ = json.Unmarshal([]byte(payment), &body)
		id := f.bank.add(body) // the dead owner's request reached the upstream
		clock.Advance(2 * time.Second)
		f.svc.SettleDue(context.Background())
		n, _, _ := led.Unknowns(context.Background())
		if n != 0 {
			t.Fatalf("got %d unknown outcomes after the settler's look, want 0", n)
		}
		w := f.pay(t, payment, "dead-3")
		if w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "true" || paidID(t, w.Body.Bytes()) != id {
			t.Fatalf("got %d %s, want the settled 201 of %s replayed", w.Code, w.Body, id)
		}
		if n := f.bank.seen.get("POST /v2/payments"); n != 0 {
			t.Fatalf("the BFF sent %d POSTs, want 0", n)
		}
	})

	t.Run("died after its mark, no payment: unknown, never sent", func(t *testing.T) {
		f, led, clock := setup(t)
		deadOwner(t, led, "dead-4", payment, true)
		clock.Advance(2 * time.Second)
		f.svc.SettleDue(context.Background())
		if n, _, _ := led.Unknowns(context.Background()); n != 1 {
			t.Fatalf("got %d unknown outcomes, want 1", n)
		}
		if p := decodeProblem(t, f.pay(t, payment, "dead-4")); p.Code != "PAYMENT_OUTCOME_UNKNOWN" {
			t.Fatalf("got %+v, want PAYMENT_OUTCOME_UNKNOWN", p)
		}
		if n := f.bank.seen.get("POST /v2/payments"); n != 0 {
			t.Fatalf("the BFF sent %d POSTs, want 0", n)
		}
	})
}

func TestIdempotencyKeyHeaders(t *testing.T) {
	f := newMoneyFixture(t, nil)
	for _, tc := range []struct {
		name   string
		values []string
	}{
		{"two headers", []string{"k1", "k2"}},
		{"two equal headers", []string{"k1", "k1"}},
		{"comma-joined", []string{"k1, k2"}},
		{"comma-joined without space", []string{"k1,k2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, w := newPaymentRequest(), httpRecorder()
			r.Header["Idempotency-Key"] = tc.values
			serveAlice(t, f, w, r)
			if p := decodeProblem(t, w); w.Code != 400 || p.Code != "IDEMPOTENCY_KEY_INVALID" {
				t.Fatalf("got %d %+v, want 400 IDEMPOTENCY_KEY_INVALID", w.Code, p)
			}
		})
	}
	if n := f.bank.seen.get("POST /v2/payments"); n != 0 {
		t.Fatalf("the upstream got %d POSTs, want 0", n)
	}
}
