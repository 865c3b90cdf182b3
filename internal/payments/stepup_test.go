package payments_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
	"github.com/fintech-bff/bff/internal/testing/poll"
)

// stepUpFixture is a money fixture whose Service holds EUR payments of
// 100.00 or more (and every payment in a currency it does not list) for
// the user's approval.
func stepUpFixture(t *testing.T) *moneyFixture {
	t.Helper()
	f := newMoneyFixture(t, nil)
	f.svc = payments.New(payments.Options{Upstream: f.fwd, Timeout: 300 * time.Millisecond,
		MoneyRoutes: []string{"/v2/payments", "/v2/pay"}, Ledger: f.ledger, Observe: f.events,
		StepUp: &payments.StepUp{Thresholds: map[string]string{"EUR": "100.00"}, ACRValues: []string{"urn:bff:acr:mfa"},
			MaxAge: 5 * time.Minute, HoldFor: time.Hour, URL: "https://app.example/auth/step-up"}})
	return f
}

const (
	bigPayment   = `{"paymentInformation":{"amount":"1000.00","currency":"EUR","creditorName":"Jane Doe","creditorAccount":{"iban":"FR7630006000011234567890189"},"remittanceInformation":"Invoice 42"},"providerIds":["demobank-sandbox"]}`
	smallPayment = `{"paymentInformation":{"amount":"10.00","currency":"EUR","creditorName":"Jane Doe","creditorAccount":{"iban":"FR7630006000011234567890189"},"remittanceInformation":"Invoice 42"},"providerIds":["demobank-sandbox"]}`
)

// heldRef checks a STEP_UP_REQUIRED answer and returns its reference.
func heldRef(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	if w.Code != http.StatusUnauthorized {
		t.Fatalf("got %d %s, want 401 STEP_UP_REQUIRED", w.Code, w.Body)
	}
	p := decodeProblem(t, w)
	if p.Code != problem.CodeStepUpRequired || p.Action != problem.ActionStepUp || p.Retryable {
		t.Fatalf("got %s/%s/%v, want STEP_UP_REQUIRED/step_up/false", p.Code, p.Action, p.Retryable)
	}
	ch := w.Header().Get("WWW-Authenticate")
	for _, want := range []string{`error="insufficient_user_authentication"`, `acr_values="urn:bff:acr:mfa"`, "max_age=300"} {
		if !strings.Contains(ch, want) {
			t.Fatalf("WWW-Authenticate %q lacks %s", ch, want)
		}
	}
	var body struct {
		StepUpURL string `json:"stepUpUrl"`
	}
	_ = json.Unmarshal(w.Body.Bytes(), &body)
	u, err := url.Parse(body.StepUpURL)
	if err != nil || !strings.HasPrefix(body.StepUpURL, "https://app.example/auth/step-up?payment=") {
		t.Fatalf("stepUpUrl %q is not the step-up endpoint", body.StepUpURL)
	}
	return u.Query().Get("payment")
}

// approvalOf is what a provider that showed hold's details and had the
// user approve them with a second factor would prove.
func approvalOf(t *testing.T, f *moneyFixture, ref string) payments.Approval {
	t.Helper()
	hold, p := f.svc.HeldPayment(context.Background(), ref)
	if p != nil {
		t.Fatalf("HeldPayment: %v", p)
	}
	return payments.Approval{UserID: "alice", ACR: "urn:bff:acr:mfa", AuthTime: time.Now(), Details: hold.Details, RequestID: "req-approve"}
}

func TestStepUpHoldsAndReleasesOnce(t *testing.T) {
	ctx := context.Background()
	f := stepUpFixture(t)

	t.Run("below the threshold nothing changes", func(t *testing.T) {
		if w := f.pay(t, smallPayment, "small-1"); w.Code != http.StatusCreated {
			t.Fatalf("got %d %s, want 201", w.Code, w.Body)
		}
	})
	sent := f.bank.creates.Load()

	ref := heldRef(t, f.pay(t, bigPayment, "big-1"))
	t.Run("a held payment is not sent, and a repeat gets the same answer", func(t *testing.T) {
		if ref2 := heldRef(t, f.pay(t, bigPayment, "big-1")); ref2 == "" {
			t.Fatal("no reference on the repeat")
		}
		if n := f.bank.creates.Load(); n != sent {
			t.Fatalf("the upstream made %d payments while the payment was held, want none", n-sent)
		}
		rec, err := f.svc.Record(ctx, "alice", "big-1")
		if err != nil || rec.State != string(ledger.StateAwaiting) || rec.Status != 401 || rec.StepUpURL == "" {
			t.Fatalf("record: got %+v, %v; want awaiting_approval, 401, a stepUpUrl", rec, err)
		}
	})

	t.Run("the provider is shown exactly the payment", func(t *testing.T) {
		hold, p := f.svc.HeldPayment(ctx, ref)
		if p != nil {
			t.Fatal(p)
		}
		want := `[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"1000.00"},"creditorName":"Jane Doe","creditorAccount":{"iban":"FR7630006000011234567890189"},"remittanceInformationUnstructured":"Invoice 42"}]`
		if string(hold.Details) != want {
			t.Fatalf("authorization_details:\n got %s\nwant %s", hold.Details, want)
		}
	})

	t.Run("another session's approval does not release it, and it stays held", func(t *testing.T) {
		if _, p := f.svc.Approve(ctx, ref, "alice", "another-session", approvalOf(t, f, ref)); p == nil || p.Code != problem.CodeNotFound {
			t.Fatalf("got %v, want 404 NOT_FOUND", p)
		}
		if n := f.bank.creates.Load(); n != sent {
			t.Fatal("another session's approval sent the payment")
		}
	})

	t.Run("a matching approval sends it once, and a replay sends nothing", func(t *testing.T) {
		a := approvalOf(t, f, ref)
		rec, p := f.svc.Approve(ctx, ref, "alice", "handle", a)
		if p != nil || rec.State != string(ledger.StateDone) || rec.Status != http.StatusCreated || rec.PaymentID == "" {
			t.Fatalf("approve: got %+v, %v; want done 201 with a payment id", rec, p)
		}
		if n := f.bank.creates.Load(); n != sent+1 {
			t.Fatalf("the upstream made %d payments, want exactly 1", n-sent)
		}
		if _, p := f.svc.Approve(ctx, ref, "alice", "handle", a); p == nil {
			t.Fatal("a replayed approval was accepted")
		}
		w := f.pay(t, bigPayment, "big-1")
		if w.Code != http.StatusCreated || w.Header().Get("Idempotent-Replayed") != "true" {
			t.Fatalf("repeat after approval: got %d %v, want the stored 201 replayed", w.Code, w.Header())
		}
		if n := f.bank.creates.Load(); n != sent+1 {
			t.Fatalf("the upstream made %d payments after replays, want exactly 1", n-sent)
		}
	})
}

func TestStepUpMismatchedApprovalsNeverSend(t *testing.T) {
	ctx := context.Background()
	f := stepUpFixture(t)
	small := heldRef(t, f.pay(t, strings.Replace(bigPayment, `"1000.00"`, `"100.00"`, 1), "small-held"))
	for _, tc := range []struct {
		name  string
		alter func(a *payments.Approval)
	}{
		{"an approval of another amount", func(a *payments.Approval) {
			a.Details = json.RawMessage(strings.Replace(string(a.Details), `"1000.00"`, `"10.00"`, 1))
		}},
		{"an approval of another held payment", func(a *payments.Approval) { a.Details = approvalOf(t, f, small).Details }},
		{"an approval of another payee", func(a *payments.Approval) {
			a.Details = json.RawMessage(strings.Replace(string(a.Details), "FR763", "DE893", 1))
		}},
		{"an approval with an extra field", func(a *payments.Approval) {
			a.Details = json.RawMessage(strings.Replace(string(a.Details), `"type"`, `"debtorAccount":{"iban":"X"},"type"`, 1))
		}},
		{"an approval of two payments", func(a *payments.Approval) {
			d := strings.TrimSuffix(strings.TrimPrefix(string(a.Details), "["), "]")
			a.Details = json.RawMessage("[" + d + "," + d + "]")
		}},
		{"no details granted", func(a *payments.Approval) { a.Details = json.RawMessage("null") }},
		{"another user's approval", func(a *payments.Approval) { a.UserID = "mallory" }},
		{"a weaker authentication", func(a *payments.Approval) { a.ACR = "urn:bff:acr:pwd" }},
		{"an authentication from before the payment", func(a *payments.Approval) { a.AuthTime = time.Now().Add(-time.Hour) }},
		{"no auth_time", func(a *payments.Approval) { a.AuthTime = time.Time{} }},
		{"an auth_time ten minutes ahead of the clock", func(a *payments.Approval) { a.AuthTime = time.Now().Add(10 * time.Minute) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "mismatch-" + strings.ReplaceAll(tc.name, " ", "-")
			ref := heldRef(t, f.pay(t, bigPayment, key))
			before := f.bank.creates.Load()
			a := approvalOf(t, f, ref)
			tc.alter(&a)
			if _, p := f.svc.Approve(ctx, ref, "alice", "handle", a); p == nil || p.Code != problem.CodeStepUpDeclined {
				t.Fatalf("got %v, want 403 STEP_UP_DECLINED", p)
			}
			// Declined: the right approval no longer releases it either.
			if _, p := f.svc.Approve(ctx, ref, "alice", "handle", approvalOf2(f, ref)); p == nil {
				t.Fatal("a declined payment was released by a later approval")
			}
			w := f.pay(t, bigPayment, key)
			if p := decodeProblem(t, w); w.Code != http.StatusForbidden || p.Code != problem.CodeStepUpDeclined {
				t.Fatalf("repeat: got %d %s, want 403 STEP_UP_DECLINED", w.Code, p.Code)
			}
			if n := f.bank.creates.Load(); n != before {
				t.Fatalf("the upstream made %d payments, want none", n-before)
			}
			rec, _ := f.svc.Record(ctx, "alice", key)
			if rec.State != string(ledger.StateDeclined) || rec.Declined != ledger.EndMismatch {
				t.Fatalf("record: got %+v, want declined (mismatch)", rec)
			}
		})
	}
}

// approvalOf2 is a matching approval made without the test's helpers
// (the hold may no longer open: then its details are empty).
func approvalOf2(f *moneyFixture, ref string) payments.Approval {
	hold, _ := f.svc.HeldPayment(context.Background(), ref)
	return payments.Approval{UserID: "alice", ACR: "urn:bff:acr:mfa", AuthTime: time.Now(), Details: hold.Details}
}

func TestStepUpCancelledAndExpiredNeverSend(t *testing.T) {
	ctx := context.Background()
	f := stepUpFixture(t)
	ref := heldRef(t, f.pay(t, bigPayment, "cancelled"))
	if d, err := f.svc.DeclineHold(ctx, ref, "alice", "handle"); err != nil || d.Ending != ledger.EndDenied || d.Answer().Code != problem.CodeStepUpDeclined {
		t.Fatalf("DeclineHold: got %+v, %v; want declined (denied), no error", d, err)
	}
	w := f.pay(t, bigPayment, "cancelled")
	if p := decodeProblem(t, w); w.Code != http.StatusForbidden || p.Code != problem.CodeStepUpDeclined || !strings.Contains(p.Detail, "new Idempotency-Key") {
		t.Fatalf("repeat after cancel: got %d %+v", w.Code, p)
	}

	// A hold past its time: a short hold on the same ledger.
	short := payments.New(payments.Options{Upstream: f.fwd, Timeout: 300 * time.Millisecond,
		MoneyRoutes: []string{"/v2/payments"}, Ledger: f.ledger,
		StepUp: &payments.StepUp{Always: true, ACRValues: []string{"urn:bff:acr:mfa"}, MaxAge: 5 * time.Minute, HoldFor: time.Millisecond, URL: "https://app.example/auth/step-up"}})
	f.svc = short
	ref = heldRef(t, f.pay(t, smallPayment, "expired"))
	var declined *problem.Problem
	poll.Until(t, 5*time.Second, "the hold expired", func() bool { // the hold's millisecond passes
		_, declined = f.svc.HeldPayment(ctx, ref)
		return declined != nil
	})
	if declined.Code != problem.CodeStepUpDeclined {
		t.Fatalf("an expired hold: got %v, want STEP_UP_DECLINED", declined)
	}
	if _, p := f.svc.Approve(ctx, ref, "alice", "handle", approvalOf2(f, ref)); p == nil {
		t.Fatal("an expired hold was released")
	}
	if f.bank.creates.Load() != 0 {
		t.Fatalf("the upstream made %d payments, want none", f.bank.creates.Load())
	}
	rec, _ := f.svc.Record(ctx, "alice", "expired")
	if rec.State != string(ledger.StateDeclined) || rec.Declined != ledger.EndExpired {
		t.Fatalf("record: got %+v, want declined (expired)", rec)
	}
}

// tampered is ref with its last two characters changed: never ref itself
// (setting them to a constant is a no-op for a reference that already ends
// in it).
func tampered(ref string) string {
	end := "AA"
	if strings.HasSuffix(ref, end) {
		end = "BB"
	}
	return ref[:len(ref)-2] + end
}

func TestStepUpReferencesAreSealed(t *testing.T) {
	f := stepUpFixture(t)
	ref := heldRef(t, f.pay(t, bigPayment, "sealed"))
	for _, bad := range []string{"", "x", tampered(ref), strings.Repeat("A", 2000)} {
		if _, p := f.svc.HeldPayment(context.Background(), bad); p == nil || p.Code != problem.CodeNotFound {
			t.Fatalf("reference %q: got %v, want NOT_FOUND", bad, p)
		}
	}
	// A service without step-up holds nothing and sends nothing held.
	plain := payments.New(payments.Options{Upstream: f.fwd, Timeout: 300 * time.Millisecond, MoneyRoutes: []string{"/v2/payments"}, Ledger: f.ledger})
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "http://bff.local/api/v2/payments", strings.NewReader(bigPayment))
	r.Header.Set("Idempotency-Key", "sealed")
	serve(t, f.fwd, plain, w, r, proxy.Call{UserID: "alice", RequestID: "r", Path: "/v2/payments", SessionRef: "handle"})
	if p := decodeProblem(t, w); p.Code != problem.CodeStepUpDeclined || f.bank.creates.Load() != 0 {
		t.Fatalf("a held key on an instance without step-up: got %s, %d sent", p.Code, f.bank.creates.Load())
	}
	if rec, _ := plain.Record(context.Background(), "alice", "sealed"); rec.State != string(ledger.StateDeclined) || rec.Declined != ledger.EndWithdrawn {
		t.Fatalf("a held key after step-up was turned off: got %+v, want declined (withdrawn)", rec)
	}
}

// An approved payment the upstream refuses before acting (its provider
// down) was not made: the approval answers the upstream's refusal, not a
// record it guessed, the key is given back, and a repeat holds it again
// for a new approval.
func TestStepUpApprovedButRefusedBeforeActing(t *testing.T) {
	ctx := context.Background()
	f := stepUpFixture(t)
	ref := heldRef(t, f.pay(t, bigPayment, "refused-1"))
	f.bank.refuse.Store(`{"type":"PROVIDER_UNAVAILABLE","message":"the bank is down"}`)
	rec, p := f.svc.Approve(ctx, ref, "alice", "handle", approvalOf(t, f, ref))
	if p == nil || p.Code != problem.CodeProviderUnavailable {
		t.Fatalf("approve: got %+v, %v; want the upstream's PROVIDER_UNAVAILABLE", rec, p)
	}
	if n := f.bank.creates.Load(); n != 0 {
		t.Fatalf("the upstream made %d payments, want none", n)
	}
	heldRef(t, f.pay(t, bigPayment, "refused-1")) // held again: a new approval is needed
}

// A payment held for the user's approval is reported "held" once, and
// each repeat that finds it waiting once more (bff_money_requests_total
// compares held with approved and declined).
func TestNewHoldIsObservedOnce(t *testing.T) {
	f := stepUpFixture(t)
	heldRef(t, f.pay(t, bigPayment, "held-once"))
	money, _ := f.events.get()
	if want := map[string]int{"held": 1}; !maps.Equal(money, want) {
		t.Fatalf("after one held payment the Observer heard %v, want %v", money, want)
	}
	heldRef(t, f.pay(t, bigPayment, "held-once"))
	money, _ = f.events.get()
	if want := map[string]int{"held": 2}; !maps.Equal(money, want) {
		t.Fatalf("after the held payment and one repeat the Observer heard %v, want %v", money, want)
	}
}
