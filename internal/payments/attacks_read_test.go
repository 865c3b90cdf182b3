package payments_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/upstreamsim"
)

// The attacks an adversarial pass made on how the BFF read a money body
// (found against the version that sent the client's bytes and compared
// amounts through floating point), each an ordinary sequence of requests
// against the upstream simulator; each paid twice, answered a false
// "paid", or moved money without an approval, before the body was read
// once into the BFF's own model and sent re-encoded from it
// (internal/money).

// readInfo is a creditor and an amount (a JSON string) in EUR.
func readInfo(amount string) string {
	return `{"amount":"` + amount + `","currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}}`
}

func readCreation(info string) string {
	return `{"paymentInformation":` + info + `,"providerIds":["demobank-sandbox"]}`
}

// upstreamInternalError is the upstream's own typed 500.
const upstreamInternalError = `{"type":"INTERNAL_ERROR","message":"internal error"}`

// countMoneySends counts the money POSTs (creations and inits) that reach
// the upstream, whatever it then answers.
func countMoneySends(a *attack) *atomic.Int64 {
	var n atomic.Int64
	a.before = func(r *http.Request) {
		if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v2/pay") {
			n.Add(1)
		}
	}
	return &n
}

// refusedNaming fails t unless w is 400 VALIDATION_ERROR naming field.
func refusedNaming(t *testing.T, w *httptest.ResponseRecorder, field, what string) {
	t.Helper()
	if w.Code != http.StatusBadRequest {
		t.Fatalf("%s: got %d %s, want 400 VALIDATION_ERROR naming %s", what, w.Code, w.Body, field)
	}
	if p := decodeProblem(t, w); p.Code != problem.CodeValidationError || len(p.Fields) != 1 || p.Fields[0].Field != field {
		t.Fatalf("%s: got %d %s, want 400 VALIDATION_ERROR naming %s", what, w.Code, w.Body, field)
	}
}

// notRecorded fails t when the key was recorded.
func notRecorded(t *testing.T, a *attack, key string) {
	t.Helper()
	if rec, _ := a.svc.Record(context.Background(), attackUser, key); rec.Key != "" {
		t.Fatalf("the refused body was recorded: %+v", rec)
	}
}

// readStepUpAttack is the simulator attack fixture with a Service that
// holds payments at or over thresholds for the user's approval.
func readStepUpAttack(t *testing.T, thresholds map[string]string) *attack {
	t.Helper()
	a := newAttack(t)
	a.svc = payments.New(payments.Options{Upstream: a.fwd, Timeout: 2 * time.Second, MoneyRoutes: []string{"/v2/payments", "/v2/pay"}, Ledger: a.led,
		StepUp: &payments.StepUp{Thresholds: thresholds, ACRValues: []string{"urn:bff:acr:mfa"},
			MaxAge: 5 * time.Minute, HoldFor: time.Hour, URL: "https://app.example/auth/step-up"}})
	return a
}

// 1. One key, two payments from a twice-rounded string amount: the BFF
// read "10.0000000000000008881784197001262323389053" as 10 (through a
// 64-bit big.Float, then float64), the upstream as 10.000000000000002.
// The upstream acted and answered 401: settling found no payment similar
// to 10 and sent again; the upstream acted and answered its typed 500:
// settling found none again and gave the key back; the retry paid a third
// time. An amount with more decimals than its currency has is refused
// before anything is claimed or sent.
func TestAttackReadTwiceRoundedAmountPaysOnce(t *testing.T) {
	a := newAttack(t)
	sent := countMoneySends(a)
	a.sim.InjectFault(attackFault(upstreamsim.Fault{PathPrefix: "/v2/payments", AfterActing: true, Status: 401}))
	a.sim.InjectFault(attackFault(upstreamsim.Fault{PathPrefix: "/v2/payments", AfterActing: true, Status: 500, Body: upstreamInternalError}))
	body := readCreation(readInfo("10.0000000000000008881784197001262323389053"))
	first := a.post(t, "/v2/payments", body, "K1")
	again := a.post(t, "/v2/payments", body, "K1")
	if n := a.payments(); n > 1 {
		t.Fatalf("one key made %d payments (answers %d, then %d %s), want at most 1", n, first.Code, again.Code, again.Body)
	}
	refusedNaming(t, first, "paymentInformation.amount", "the twice-rounded amount")
	refusedNaming(t, again, "paymentInformation.amount", "its retry")
	if n := sent.Load(); n != 0 || a.payments() != 0 {
		t.Fatalf("the upstream received %d money requests and made %d payments, want none", n, a.payments())
	}
	notRecorded(t, a, "K1")
}

// 2. A false "made": A (10.01) is held at the upstream, which hangs up
// before acting. B asks for "10.009999999999998898658759571845711899757385254",
// which the BFF read as 10.009999999999998 and the upstream makes and lists
// as 10.01, then answers its typed 500: B's settling found no similar
// payment and gave B's key back, while A's settling found the payment equal
// to A's, that no other request "could have made", and answered A 201 with
// it. B's retry paid again. B is refused; A is never answered with a
// payment it did not make.
func TestAttackReadNoFalseMadeFromAnAmountListedAsAnother(t *testing.T) {
	a := newAttack(t)
	long := readCreation(readInfo("10.009999999999998898658759571845711899757385254"))
	held := a.sim.InjectFault(attackFault(upstreamsim.Fault{PathPrefix: "/v2/payments", Delay: 500 * time.Millisecond, HangUp: true}))
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- a.post(t, "/v2/payments", readCreation(readInfo("10.01")), "KA") }()
	a.waitTaken(t, held) // A is at the upstream, held before acting
	a.sim.InjectFault(attackFault(upstreamsim.Fault{PathPrefix: "/v2/payments", AfterActing: true, Status: 500, Body: upstreamInternalError}))
	b := a.post(t, "/v2/payments", long, "KB")
	w := <-done
	bAgain := a.post(t, "/v2/payments", long, "KB")
	made := a.madeBy()
	if n := made["req-KA"]; n != 0 {
		t.Fatalf("A made %d payments, want 0: its send never reached the upstream", n)
	}
	if w.Code == http.StatusCreated {
		t.Fatalf("A, which made nothing, was answered 201 with %s, made by %q (payments made by request: %v)",
			paidIDOf(w), a.sim.PaymentOrigins(attackUser)[paidIDOf(w)], made)
	}
	if n := a.payments(); n > 1 {
		t.Fatalf("B made %d payments (answers %d, then %d %s), want at most 1", n, b.Code, bAgain.Code, bAgain.Body)
	}
	refusedNaming(t, b, "paymentInformation.amount", "B")
	refusedNaming(t, bAgain, "paymentInformation.amount", "B's retry")
	if n := a.payments(); n != 0 {
		t.Fatalf("the upstream made %d payments, want 0", n)
	}
	notRecorded(t, a, "KB")
}

// 3. A member the upstream drops: B, A's payment with one member more,
// made payment P and its answer was lost; A, held at the upstream, hung up
// before it acted. P (listed without the member) equalled A's content and
// not B's, so no other request "could have made" it: A, and A's repeat,
// were answered 201 with P. A member the BFF does not model is refused; an
// empty string and null are the canonical absence, so B is A's content and
// could have made P, and A is never answered with it.
func TestAttackReadMemberTheUpstreamDrops(t *testing.T) {
	for _, tc := range []struct {
		name, member string
		refused      string // the field B is refused naming; "" when B is A's content
	}{
		{"purposeCode", `"purposeCode":"OTHR"`, "paymentInformation.purposeCode"},
		{"endToEndId", `"endToEndId":"E2E-20261205-0001"`, "paymentInformation.endToEndId"},
		{"empty remittanceInformation", `"remittanceInformation":""`, ""},
		{"null debtorAccount", `"debtorAccount":null`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAttack(t)
			bBody := readCreation(strings.Replace(attackInfo, `"currency":"EUR"`, `"currency":"EUR",`+tc.member, 1))
			held := a.sim.InjectFault(attackFault(upstreamsim.Fault{PathPrefix: "/v2/payments", Delay: 500 * time.Millisecond, HangUp: true}))
			done := make(chan *httptest.ResponseRecorder)
			go func() { done <- a.post(t, "/v2/payments", attackPayment, "KA") }()
			a.waitTaken(t, held) // A is at the upstream, held before acting
			a.sim.InjectFault(attackFault(upstreamsim.Fault{PathPrefix: "/v2/payments", AfterActing: true, HangUp: true}))
			b := a.post(t, "/v2/payments", bBody, "KB")
			w := <-done
			again := a.post(t, "/v2/payments", attackPayment, "KA")
			made, origins := a.madeBy(), a.sim.PaymentOrigins(attackUser)
			if n := made["req-KA"]; n != 0 {
				t.Fatalf("A made %d payments, want 0: its send never reached the upstream", n)
			}
			for _, ans := range []struct {
				what string
				w    *httptest.ResponseRecorder
			}{{"A", w}, {"A's repeat", again}} {
				if ans.w.Code == http.StatusCreated {
					t.Fatalf("%s, which made nothing, was answered 201 with %s, made by %q (payments made by request: %v)",
						ans.what, paidIDOf(ans.w), origins[paidIDOf(ans.w)], made)
				}
			}
			if tc.refused != "" {
				refusedNaming(t, b, tc.refused, "B")
				if n := a.payments(); n != 0 {
					t.Fatalf("the upstream made %d payments, want 0", n)
				}
				notRecorded(t, a, "KB")
				return
			}
			if n := made["req-KB"]; n != 1 {
				t.Fatalf("B made %d payments (answer %d %s), want 1: the attack needs B's payment", n, b.Code, b.Body)
			}
			if b.Code == http.StatusBadRequest {
				t.Fatalf("B: got %d %s; an empty string or null is the member's absence, not a refusal", b.Code, b.Body)
			}
			if x, y := payments.PaymentContent([]byte(attackPayment)), payments.PaymentContent([]byte(bBody)); !bytes.Equal(x, y) {
				t.Fatalf("A's content %s and B's %s differ, want them the same", x, y)
			}
		})
	}
}

// 4. Step-up at the threshold: "99.989999999999987778664944926277803016662597656"
// USD was read by the BFF as 99.98999999999998, under the 99.99 threshold,
// and by the upstream as 99.99: a 99.99 USD payment was made without an
// approval. It is refused (more decimals than USD has); 99.99 exactly is
// held and 99.98 is not.
func TestAttackReadStepUpAtTheThreshold(t *testing.T) {
	usd := func(amount string) string {
		return readCreation(`{"amount":"` + amount + `","currency":"USD","creditorAccount":{"iban":"DE89370400440532013000"}}`)
	}
	thresholds := map[string]string{"USD": "99.99"}
	t.Run("just under by the BFF's old reading", func(t *testing.T) {
		a := readStepUpAttack(t, thresholds)
		w := a.post(t, "/v2/payments", usd("99.989999999999987778664944926277803016662597656"), "K1")
		if n := a.payments(); n != 0 {
			t.Fatalf("the upstream made %d payment(s) of 99.99 USD without an approval (answer %d %s); want none", n, w.Code, w.Body)
		}
		refusedNaming(t, w, "paymentInformation.amount", "the amount")
		notRecorded(t, a, "K1")
	})
	t.Run("99.99 is held", func(t *testing.T) {
		a := readStepUpAttack(t, thresholds)
		w := a.post(t, "/v2/payments", usd("99.99"), "K1")
		if p := decodeProblem(t, w); w.Code != http.StatusUnauthorized || p.Code != problem.CodeStepUpRequired || a.payments() != 0 {
			t.Fatalf("got %d %s with %d payments made, want 401 STEP_UP_REQUIRED and none", w.Code, w.Body, a.payments())
		}
	})
	t.Run("99.98 is not held", func(t *testing.T) {
		a := readStepUpAttack(t, thresholds)
		if w := a.post(t, "/v2/payments", usd("99.98"), "K1"); w.Code != http.StatusCreated || a.payments() != 1 {
			t.Fatalf("got %d %s with %d payments made, want 201 and 1", w.Code, w.Body, a.payments())
		}
	})
}

// 5. Non-finite and non-positive amounts reached the upstream: "NaN" and
// "Infinity" (which an upstream that reads strings as doubles takes as
// numbers), 1e999, 0 and -5, as strings and as numbers where JSON has
// them. Each is refused naming the amount, and the upstream sees nothing.
func TestAttackReadNonFiniteAndNonPositiveAmounts(t *testing.T) {
	const rest = `"currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}}`
	for _, amount := range []string{`"NaN"`, `"Infinity"`, `"-Infinity"`, `"1e999"`, `1e999`, `"0"`, `0`, `"0.00"`, `"-5"`, `-5`} {
		info := `{"amount":` + amount + `,` + rest
		for _, route := range []struct{ name, path, body string }{
			{"creation", "/v2/payments", readCreation(info)},
			{"init", "/v2/pay/open-banking-init", `{"providerId":"demobank-sandbox","paymentInformation":` + info + `}`},
		} {
			t.Run(route.name+" "+amount, func(t *testing.T) {
				a := newAttack(t)
				sent := countMoneySends(a)
				w := a.post(t, route.path, route.body, "K1")
				if n := sent.Load(); n != 0 {
					t.Fatalf("the amount %s reached the upstream (%d request(s); answer %d %s); want it refused before anything is sent", amount, n, w.Code, w.Body)
				}
				refusedNaming(t, w, "paymentInformation.amount", "the amount "+amount)
				notRecorded(t, a, "K1")
			})
		}
	}
}

// 7. An open-banking init naming a paymentId and carrying a
// paymentInformation was read as "an init of an existing payment: creates
// nothing": never held, and sent. It is refused naming paymentId, nothing
// sent, with step-up off and on.
func TestAttackReadInitWithPaymentIDAndInformation(t *testing.T) {
	for name, stepUp := range map[string]bool{"step-up off": false, "step-up on": true} {
		t.Run(name, func(t *testing.T) {
			var a *attack
			if stepUp {
				a = readStepUpAttack(t, map[string]string{"EUR": "100.00"})
			} else {
				a = newAttack(t)
			}
			var existing string
			for id := range a.sim.PaymentOrigins(attackUser) {
				existing = max(existing, id)
			}
			sent := countMoneySends(a)
			body := `{"providerId":"demobank-sandbox","paymentId":"` + existing + `","paymentInformation":` +
				`{"amount":"5000.00","currency":"EUR","creditorName":"Mallory Ltd","creditorAccount":{"iban":"DE89370400440532013000"}}}`
			w := a.post(t, "/v2/pay/open-banking-init", body, "K1")
			if n := sent.Load(); n != 0 {
				t.Fatalf("the init reached the upstream (%d request(s); answer %d %s, %d payments made); want it refused before anything is sent",
					n, w.Code, w.Body, a.payments())
			}
			refusedNaming(t, w, "paymentId", "the init")
			notRecorded(t, a, "K1")
		})
	}
}

// The upstream receives exactly the model's canonical bytes, never the
// client's: members in one order, the empty remittanceInformation left out
// (the canonical absence), the amount a JSON number with EUR's two
// decimals.
func TestAttackReadUpstreamReceivesTheCanonicalBytes(t *testing.T) {
	a := newAttack(t)
	var mu sync.Mutex
	var got [][]byte
	a.before = func(r *http.Request) {
		if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/v2/payments") {
			return
		}
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("reading the body the upstream received: %v", err)
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		mu.Lock()
		got = append(got, b)
		mu.Unlock()
	}
	body := `{"providerIds":["demobank-sandbox"],"paymentInformation":{"remittanceInformation":"","currency":"EUR","amount":"10.5","creditorAccount":{"iban":"DE89370400440532013000"}}}`
	want := `{"paymentInformation":{"amount":10.50,"currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}},"providerIds":["demobank-sandbox"]}`
	w := a.post(t, "/v2/payments", body, "K1")
	if w.Code != http.StatusCreated {
		t.Fatalf("got %d %s, want 201", w.Code, w.Body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || string(got[0]) != want {
		t.Fatalf("the upstream received %d creation(s):\n%q\nwant exactly one:\n%q", len(got), got, want)
	}
}
