package payments_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
)

// Attacks on payments the user approves, found by an adversarial review:
// each moved money over the threshold without an approval, or gave an
// answer that was not true, before its fix (docs/payments.md, "Payments
// the user approves").

// stepUpAttack is the simulator attack fixture with a Service that holds
// EUR payments of 100.00 or more for the user's approval.
func stepUpAttack(t *testing.T, routes ...string) *attack {
	t.Helper()
	a := newAttack(t)
	a.svc = payments.New(payments.Options{Upstream: a.fwd, Timeout: 2 * time.Second, MoneyRoutes: []string{"/v2/payments", "/v2/pay"}, Ledger: a.led,
		StepUp: &payments.StepUp{Routes: routes, Thresholds: map[string]string{"EUR": "100.00"}, ACRValues: []string{"urn:bff:acr:mfa"},
			MaxAge: 5 * time.Minute, HoldFor: time.Hour, URL: "https://app.example/auth/step-up"}})
	return a
}

const reviewBigInfo = `{"amount":"5000.00","currency":"EUR","creditorName":"Mallory Ltd","creditorAccount":{"iban":"DE89370400440532013000"}}`

// A creation (POST /v2/payments) that carries a "paymentId" member was read
// by an earlier version as "an init of an existing payment: creates
// nothing", so it was never held; but the upstream's POST /v2/payments
// ignores paymentId and makes the payment. 5,000 EUR left without any
// approval. A creation names no paymentId in the BFF's model: it is
// refused, naming the member, and nothing is held or sent.
func TestStepUpAttackPaymentIDOnACreationSkipsTheHold(t *testing.T) {
	// The control: the same payment without paymentId is held, none made.
	ctl := stepUpAttack(t)
	if w := ctl.post(t, "/v2/payments", `{"paymentInformation":`+reviewBigInfo+`,"providerIds":["demobank-sandbox"]}`, "CTL"); w.Code != http.StatusUnauthorized || ctl.payments() != 0 {
		t.Fatalf("control: got %d %s with %d payments made, want 401 STEP_UP_REQUIRED and none", w.Code, w.Body, ctl.payments())
	}
	for _, pid := range []string{`"01JANYTHING"`, `0`, `{}`, `[]`, `true`} {
		t.Run("paymentId "+pid, func(t *testing.T) {
			a := stepUpAttack(t)
			body := `{"paymentId":` + pid + `,"paymentInformation":` + reviewBigInfo + `,"providerIds":["demobank-sandbox"]}`
			w := a.post(t, "/v2/payments", body, "K-"+strings.Trim(pid, `"{}[]`))
			if n := a.payments(); n != 0 {
				t.Fatalf("the upstream made %d payment(s) of 5000.00 EUR without an approval (answer %d %s); want none", n, w.Code, w.Body)
			}
			if p := decodeProblem(t, w); w.Code != http.StatusBadRequest || p.Code != problem.CodeValidationError || len(p.Fields) != 1 || p.Fields[0].Field != "paymentId" {
				t.Fatalf("got %d %s, want 400 VALIDATION_ERROR naming paymentId", w.Code, w.Body)
			}
			if rec, _ := a.svc.Record(context.Background(), attackUser, "K-"+strings.Trim(pid, `"{}[]`)); rec.Key != "" {
				t.Fatalf("the refused body was recorded: %+v", rec)
			}
		})
	}
}

// The hold decision fails open: a creation body the BFF's decoder cannot
// read (creates() false) is forwarded unheld, trusting the upstream to
// refuse it too. Bodies a JSON parser other than Go's reads (a UTF-8 byte
// order mark, which Express's body-parser strips; a number beyond
// float64, which JavaScript reads as Infinity; nesting deeper than Go's
// 10,000 levels; UTF-16, which body-parser decodes by its charset; a
// form, which NestJS's default urlencoded parser reads into nested
// objects) reach the upstream with 5,000 EUR and no approval. The
// fake upstream counts every creation that reaches it.
func TestStepUpAttackUnreadableCreationIsForwardedUnheld(t *testing.T) {
	big := `{"paymentInformation":{"amount":"5000.00","currency":"EUR","creditorName":"Mallory Ltd","creditorAccount":{"iban":"DE89370400440532013000"}},"providerIds":["demobank-sandbox"]}`
	deep := strings.Repeat("[", 10001) + strings.Repeat("]", 10001)
	for name, tc := range map[string]struct{ body, contentType string }{
		"a byte order mark":            {"\ufeff" + big, "application/json"},
		"a number beyond float64":      {strings.Replace(big, `"currency":"EUR"`, `"currency":"EUR","x":1e400`, 1), "application/json"},
		"nesting deeper than Go reads": {strings.Replace(big, `"providerIds"`, `"x":`+deep+`,"providerIds"`, 1), "application/json"},
		"UTF-16":                       {utf16le(big), "application/json; charset=utf-16le"},
		// Express's urlencoded parser (extended, NestJS's default) reads
		// nested objects: {paymentInformation: {amount: "5000.00", ...}}.
		"a form": {"paymentInformation[amount]=5000.00&paymentInformation[currency]=EUR&paymentInformation[creditorName]=Mallory+Ltd" +
			"&paymentInformation[creditorAccount][iban]=DE89370400440532013000&providerIds[]=demobank-sandbox", "application/x-www-form-urlencoded"},
	} {
		t.Run(name, func(t *testing.T) {
			f := stepUpFixture(t)
			key := "unread-" + strings.ReplaceAll(name, " ", "-")
			r := httptest.NewRequest(http.MethodPost, "http://bff.local/api/v2/payments", strings.NewReader(tc.body))
			r.Header.Set("Content-Type", tc.contentType)
			r.Header.Set("Idempotency-Key", key)
			w := httptest.NewRecorder()
			serve(t, f.fwd, f.svc, w, r, proxy.Call{UserID: "alice", RequestID: "req-" + key, Path: "/v2/payments", SessionRef: "handle"})
			if n := f.bank.creates.Load(); n != 0 {
				t.Fatalf("a 5000.00 EUR creation (%s) reached the upstream without an approval (answer %d); want it held or refused before the upstream", tc.contentType, w.Code)
			}
		})
	}
}

// utf16le is s (ASCII) in UTF-16LE with its byte order mark, as a body
// sent with "Content-Type: application/json; charset=utf-16le", which
// body-parser decodes.
func utf16le(s string) string {
	b := []byte{0xff, 0xfe}
	for i := 0; i < len(s); i++ {
		b = append(b, s[i], 0)
	}
	return string(b)
}

// racingLedger is the in-process ledger where an approval from another
// tab wins the hold just before this decline is applied (the window
// between DeclineHold's read and its conditional update).
type racingLedger struct {
	*ledger.Memory
	once bool
}

func (l *racingLedger) Decline(ctx context.Context, id int64, ending string) (bool, error) {
	if !l.once {
		l.once = true
		if c, err := l.Memory.Approve(ctx, id, 10*time.Second, ledger.Approval{}); err != nil || c == nil {
			return false, err
		}
	}
	return l.Memory.Decline(ctx, id, ending)
}

// A cancel (or a mismatched approval) that loses the race to a matching
// approval still answers STEP_UP_DECLINED ("this payment was not sent"),
// and the callback redirects with stepUp=declined, while the payment was
// released for its send: decline's result is ignored.
func TestStepUpAttackDeclineThatLostTheRaceSaysDeclined(t *testing.T) {
	ctx := context.Background()
	f := stepUpFixture(t)
	mem, err := ledger.NewMemory(nil, make([]byte, 32), nil)
	if err != nil {
		t.Fatal(err)
	}
	led := &racingLedger{Memory: mem}
	f.ledger = led
	f.svc = payments.New(payments.Options{Upstream: f.fwd, Timeout: 300 * time.Millisecond,
		MoneyRoutes: []string{"/v2/payments", "/v2/pay"}, Ledger: led, Observe: f.events,
		StepUp: &payments.StepUp{Thresholds: map[string]string{"EUR": "100.00"}, ACRValues: []string{"urn:bff:acr:mfa"},
			MaxAge: 5 * time.Minute, HoldFor: time.Hour, URL: "https://app.example/auth/step-up"}})
	ref := heldRef(t, f.pay(t, bigPayment, "race-1"))
	d, err := f.svc.DeclineHold(ctx, ref, "alice", "handle")
	rec, rerr := f.svc.Record(ctx, "alice", "race-1")
	if rerr != nil {
		t.Fatal(rerr)
	}
	if err == nil && rec.State != string(ledger.StateDeclined) {
		t.Fatalf("DeclineHold answered declined (%s) while the payment is %s (approved for its send): the answer is not true",
			d.Ending, rec.State)
	}
}

// A money POST with "Content-Encoding: gzip" (a header the proxy passes
// upstream) is opaque to the BFF: no content, so no hold, no duplicate-key
// check and no settlement content; an upstream that inflates request
// bodies, as Express's body-parser does by default, reads and makes the
// 1,000 EUR payment. The upstream here inflates like that and counts the
// payments it read.
func TestStepUpAttackGzipBodySkipsTheHold(t *testing.T) {
	var mu sync.Mutex
	var amounts []string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rd io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			rd = zr
		}
		var body struct {
			PaymentInformation struct {
				Amount string `json:"amount"`
			} `json:"paymentInformation"`
		}
		if r.Method != http.MethodPost || json.NewDecoder(rd).Decode(&body) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		amounts = append(amounts, body.PaymentInformation.Amount)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"01JGZIP0001","payUrl":"https://pay.example/01JGZIP0001"}`)
	}))
	t.Cleanup(upstream.Close)
	base, _ := url.Parse(upstream.URL)
	fwd := proxy.New(proxy.Options{BaseURL: base, Routes: proxy.NewRoutes(contractRoutes), Tokens: &fakeTokens{},
		Timeout: time.Second, MaxBodyBytes: 1 << 16, Retry: proxy.Retry{MaxAttempts: 1}})
	led, err := ledger.NewMemory(nil, make([]byte, 32), nil)
	if err != nil {
		t.Fatal(err)
	}
	svc := payments.New(payments.Options{Upstream: fwd, Timeout: time.Second, MoneyRoutes: []string{"/v2/payments", "/v2/pay"}, Ledger: led,
		StepUp: &payments.StepUp{Thresholds: map[string]string{"EUR": "100.00"}, ACRValues: []string{"urn:bff:acr:mfa"},
			MaxAge: 5 * time.Minute, HoldFor: time.Hour, URL: "https://app.example/auth/step-up"}})
	send := func(body []byte, key string, gz bool) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "http://bff.local/api/v2/payments", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", key)
		if gz {
			r.Header.Set("Content-Encoding", "gzip")
		}
		w := httptest.NewRecorder()
		serve(t, fwd, svc, w, r, proxy.Call{UserID: "alice", RequestID: "req-" + key, Path: "/v2/payments", SessionRef: "handle"})
		return w
	}
	// The control: the plain body is held.
	if w := send([]byte(bigPayment), "plain", false); w.Code != http.StatusUnauthorized || len(amounts) != 0 {
		t.Fatalf("control: got %d %s, %d sent; want 401 STEP_UP_REQUIRED and nothing sent", w.Code, w.Body, len(amounts))
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write([]byte(bigPayment))
	_ = zw.Close()
	w := send(buf.Bytes(), "gzipped", true)
	mu.Lock()
	defer mu.Unlock()
	if len(amounts) != 0 {
		t.Fatalf("the upstream read and made payments of %q EUR without an approval (answer %d %s); want the payment held or refused before the upstream",
			amounts, w.Code, w.Body)
	}
}
