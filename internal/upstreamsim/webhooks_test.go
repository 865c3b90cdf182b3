package upstreamsim

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fintech-bff/bff/internal/webhooks"
)

// testWebhookSecret signs the webhooks of these tests (32 bytes of key).
const testWebhookSecret = "whsec_dGVzdCB3ZWJob29rIHNlY3JldCwgMzIgYnl0ZXMh"

// hook is one webhook a receiver got.
type hook struct {
	header http.Header
	body   []byte
}

// receiver serves, on an in-memory network, webhooks to the returned URL,
// answering the n-th (from 1) with answer(n) and handing each to the
// returned channel; h's simulator posts its webhooks there.
func (h *harness) receiver(answer func(n int) int) (string, <-chan hook) {
	h.t.Helper()
	got := make(chan hook, 100)
	var n atomic.Int32
	h.sim.hooks.client.Transport = servePipe(h.t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- hook{r.Header.Clone(), b}
		w.WriteHeader(answer(int(n.Add(1))))
	}))
	return "http://receiver.test/hooks", got
}

func always(status int) func(int) int { return func(int) int { return status } }

// next waits (boundedly, on the bubble's clock) for the next webhook.
func next(t *testing.T, got <-chan hook) hook {
	t.Helper()
	select {
	case h := <-got:
		return h
	case <-time.After(10 * time.Second):
		t.Fatal("no webhook within 10s")
		return hook{}
	}
}

// quiet is how long none lets the bubble's clock run: past every retry of
// a delivery (webhookBackoff doubling over webhookTries, 7.5 s) and its
// timeouts, and past a settlement's timer.
const quiet = time.Minute

// none checks that no further webhook arrives, ever: it lets the
// simulator run for quiet on the bubble's clock until every goroutine
// waits, and finds none posted. It runs in a synctest bubble.
func none(t *testing.T, got <-chan hook) {
	t.Helper()
	time.Sleep(quiet)
	synctest.Wait()
	select {
	case h := <-got:
		t.Errorf("got an extra webhook %s, want none", h.body)
	default:
	}
}

// verified checks h with internal/webhooks (the BFF's verifier, another
// implementation than the simulator's signer) at now and returns its news.
func verified(t *testing.T, h hook, now time.Time) (webhooks.Message, webhooks.PaymentStatus) {
	t.Helper()
	v, err := webhooks.NewVerifier([]string{testWebhookSecret}, webhooks.DefaultTolerance)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := v.Verify(h.header, h.body, now)
	if err != nil {
		t.Fatalf("webhook %s: got %v, want it verified", h.body, err)
	}
	ps, err := webhooks.ParsePaymentStatus(h.body)
	if err != nil {
		t.Fatalf("webhook %s: got %v, want a payment.status_changed", h.body, err)
	}
	return msg, ps
}

// hooked is a harness in a synctest bubble whose webhooks go to a
// receiver answering answer.
func hooked(t *testing.T, opts Options, answer func(int) int) (*harness, <-chan hook) {
	t.Helper()
	opts.Control, opts.WebhookURL, opts.WebhookSecret = true, "http://receiver.test/hooks", testWebhookSecret
	h := newBubbleHarness(t, opts)
	_, got := h.receiver(answer)
	return h, got
}

// Every way a payment's status changes posts exactly one webhook, with the
// status and updatedAt a read then gives, signed so the BFF's verifier
// accepts it.
func TestWebhookOnEveryStatusChange(t *testing.T) { synctest.Test(t, webhookOnEveryStatusChange) }

func webhookOnEveryStatusChange(t *testing.T) {
	h, got := hooked(t, Options{ProductionAccess: true}, always(http.StatusNoContent))
	tok := h.token("alice")
	want := func(id, status string) {
		t.Helper()
		msg, ps := verified(t, next(t, got), testEpoch)
		if ps.PaymentID != id || ps.Status != status {
			t.Errorf("got webhook for %s %s, want %s %s", ps.PaymentID, ps.Status, id, status)
		}
		if msg.ID[:4] != "msg_" {
			t.Errorf("got webhook-id %q, want msg_...", msg.ID)
		}
		read := h.do("GET", "/v2/payments/"+id, tok, nil).json(t)
		if at, _ := time.Parse(time.RFC3339Nano, read["updatedAt"].(string)); read["status"] != status || !at.Equal(ps.UpdatedAt) {
			t.Errorf("got webhook updatedAt %s, read %v %v, want them equal", ps.UpdatedAt, read["status"], read["updatedAt"])
		}
		none(t, got)
	}

	id, payURL := h.createPayment(tok, paymentBody("created"))
	want(id, statusInit)
	if r := h.decide(payURL, "approve"); r.status != http.StatusSeeOther {
		t.Fatalf("consent: got %d, want 303", r.status)
	}
	want(id, statusACSC)

	id, _ = h.createPayment(tok, paymentBody("controlled"))
	want(id, statusInit)
	if r := h.do("POST", "/_sim/payments/"+id+"/status", "", map[string]any{"status": "RJCT"}); r.status != http.StatusNoContent {
		t.Fatalf("status control: got %d %s", r.status, r.body)
	}
	want(id, statusRJCT)
	h.do("POST", "/_sim/payments/"+id+"/status", "", map[string]any{"status": "RJCT"})
	none(t, got) // the same status again is no change

	id, _ = h.createPayment(tok, paymentBody("cancelled"))
	want(id, statusInit)
	if r := h.do("DELETE", "/v2/payments/"+id, tok, nil); r.status != http.StatusOK {
		t.Fatalf("cancel: got %d %s", r.status, r.body)
	}
	want(id, statusCANC)

	r := h.do("POST", "/v2/pay/open-banking-init", tok, map[string]any{
		"providerId": ProviderSandbox, "paymentInformation": paymentBody("")["paymentInformation"]})
	want(r.json(t)["paymentId"].(string), statusPending) // created and initiated at once: one change

	if err := h.sim.SetPaymentStatus("alice", id, statusERROR); err != nil {
		t.Fatal(err)
	}
	want(id, statusERROR)

	for _, d := range h.sim.Webhooks() {
		if !d.Delivered || d.Attempts != 1 || d.LastHTTPStatus != http.StatusNoContent {
			t.Errorf("got delivery %+v, want delivered at the first try", d)
		}
	}
}

// A receiver that fails gets the webhook again after a pause, with the same
// webhook-id and a fresh timestamp and signature, until it answers 2xx.
func TestWebhookRetries(t *testing.T) { synctest.Test(t, webhookRetries) }

func webhookRetries(t *testing.T) {
	var clock atomic.Int64 // seconds after testEpoch; the receiver moves it
	now := func() time.Time { return testEpoch.Add(time.Duration(clock.Load()) * time.Second) }
	h, got := hooked(t, Options{Now: now}, func(n int) int {
		clock.Add(10)
		if n < 3 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	id, _ := h.createPayment(h.token("alice"), paymentBody("retried"))
	var ids, stamps []string
	for try := range 3 {
		hk := next(t, got)
		msg, ps := verified(t, hk, testEpoch.Add(time.Duration(10*try)*time.Second))
		if ps.PaymentID != id {
			t.Errorf("try %d: got payment %s, want %s", try+1, ps.PaymentID, id)
		}
		ids, stamps = append(ids, msg.ID), append(stamps, hk.header.Get("webhook-timestamp"))
	}
	none(t, got)
	if ids[0] != ids[1] || ids[1] != ids[2] {
		t.Errorf("got webhook-ids %v, want one id on every try", ids)
	}
	if stamps[0] == stamps[1] || stamps[1] == stamps[2] {
		t.Errorf("got timestamps %v, want a fresh one on every try", stamps)
	}
	if d := h.sim.Webhooks(); len(d) != 1 || d[0].Attempts != 3 || !d[0].Delivered || d[0].LastHTTPStatus != http.StatusOK || d[0].ID != ids[0] {
		t.Errorf("got deliveries %+v, want one delivered at the third try", d)
	}
}

// A receiver that never answers 2xx gets webhookTries tries, then no more.
func TestWebhookGivesUp(t *testing.T) { synctest.Test(t, webhookGivesUp) }

func webhookGivesUp(t *testing.T) {
	h, got := hooked(t, Options{}, always(http.StatusServiceUnavailable))
	h.createPayment(h.token("alice"), paymentBody("refused"))
	for range webhookTries {
		next(t, got)
	}
	none(t, got)
	if d := h.sim.Webhooks(); len(d) != 1 || d[0].Attempts != webhookTries || d[0].Delivered || d[0].LastHTTPStatus != http.StatusServiceUnavailable {
		t.Errorf("got deliveries %+v, want one given up after %d tries", d, webhookTries)
	}
}

// An initiated payment settles at its time, and its ACSC webhook goes out,
// with nobody reading it; a later read shows the same.
func TestWebhookTimedSettlementWithoutRead(t *testing.T) {
	synctest.Test(t, webhookTimedSettlementWithoutRead)
}

func webhookTimedSettlementWithoutRead(t *testing.T) {
	h, got := hooked(t, Options{ProductionAccess: true}, always(http.StatusOK))
	tok := h.token("alice")
	r := h.do("POST", "/v2/pay/open-banking-init", tok, map[string]any{
		"providerId": ProviderSandbox, "paymentInformation": paymentBody("")["paymentInformation"]})
	id := r.json(t)["paymentId"].(string)
	verified(t, next(t, got), testEpoch) // PENDING
	h.sim.ClearRequests()

	h.sim.Advance(settleAfter - time.Second)
	none(t, got)
	h.do("POST", "/_sim/clock/advance", "", map[string]any{"duration": "1s"})
	_, ps := verified(t, next(t, got), testEpoch)
	if want := testEpoch.Add(settleAfter); ps.PaymentID != id || ps.Status != statusACSC || !ps.UpdatedAt.Equal(want) {
		t.Errorf("got %+v, want %s ACSC at %s", ps, id, want)
	}
	if n := len(h.sim.Requests()); n != 0 {
		t.Errorf("got %d API requests before the webhook, want none: it must not wait for a read", n)
	}
	read := h.do("GET", "/v2/payments/"+id, tok, nil).json(t)
	if read["status"] != statusACSC || read["updatedAt"] != ps.UpdatedAt.Format(time.RFC3339) {
		t.Errorf("read after settlement: got %v %v, want ACSC at %s", read["status"], read["updatedAt"], ps.UpdatedAt)
	}
	none(t, got)
}

// Redeliver posts the stored webhook again byte for byte: the same body,
// id, timestamp and signature, even after the clock moved.
func TestWebhookRedeliver(t *testing.T) { synctest.Test(t, webhookRedeliver) }

func webhookRedeliver(t *testing.T) {
	var clock atomic.Int64
	now := func() time.Time { return testEpoch.Add(time.Duration(clock.Load()) * time.Second) }
	h, got := hooked(t, Options{Now: now}, always(http.StatusOK))
	h.createPayment(h.token("alice"), paymentBody("replayed"))
	first := next(t, got)
	msg, _ := verified(t, first, testEpoch)
	// The receiver hands the webhook over before it answers: once every
	// goroutine waits, the simulator has recorded the answer.
	synctest.Wait()
	if d := h.sim.Webhooks(); len(d) != 1 || d[0].Attempts != 1 {
		t.Fatalf("got deliveries %+v, want one, tried once", d)
	}
	clock.Add(600)

	r := h.do("POST", "/_sim/webhooks/"+msg.ID+"/redeliver", "", nil)
	if m := r.json(t); r.status != http.StatusOK || m["id"] != msg.ID || m["httpStatus"] != 200.0 {
		t.Fatalf("redeliver: got %d %s, want 200 with the receiver's 200", r.status, r.body)
	}
	again := next(t, got)
	if !bytes.Equal(again.body, first.body) {
		t.Errorf("got body %s, want %s", again.body, first.body)
	}
	for _, k := range []string{"webhook-id", "webhook-timestamp", "webhook-signature"} {
		if again.header.Get(k) != first.header.Get(k) {
			t.Errorf("%s: got %q, want the original %q", k, again.header.Get(k), first.header.Get(k))
		}
	}
	v, _ := webhooks.NewVerifier([]string{testWebhookSecret}, webhooks.DefaultTolerance)
	if _, err := v.Verify(again.header, again.body, now()); err == nil {
		t.Error("a replay 10 minutes late: got it verified, want ErrStale")
	}
	if d := h.sim.Webhooks(); len(d) != 1 || d[0].Attempts != 1 {
		t.Errorf("got deliveries %+v, want the one, its attempts unchanged by the replay", d)
	}
	wantError(t, h.do("POST", "/_sim/webhooks/msg_nope/redeliver", "", nil), http.StatusNotFound, typeClientError, `No webhook "msg_nope"`)
}

// With no webhookUrl nothing is posted or listed; setting one at run time
// turns webhooks on, and Reset turns them back off (the options' value).
func TestWebhooksOffWithoutURL(t *testing.T) { synctest.Test(t, webhooksOffWithoutURL) }

func webhooksOffWithoutURL(t *testing.T) {
	h := newBubbleHarness(t, Options{Control: true})
	url, got := h.receiver(always(http.StatusOK))
	tok := h.token("alice")
	id, _ := h.createPayment(tok, paymentBody("quiet"))
	h.do("POST", "/_sim/payments/"+id+"/status", "", map[string]any{"status": "ACSC"})
	none(t, got)
	if r := h.do("GET", "/_sim/webhooks", "", nil); r.status != http.StatusOK || string(bytes.TrimSpace(r.body)) != "[]" {
		t.Errorf("GET /_sim/webhooks: got %d %s, want 200 []", r.status, r.body)
	}

	r := h.do("PATCH", "/_sim/settings", "", map[string]any{"webhookUrl": url, "webhookSecret": testWebhookSecret})
	if m := r.json(t); r.status != http.StatusOK || m["webhookUrl"] != url || m["webhookSecret"] != Fingerprint(testWebhookSecret) {
		t.Fatalf("PATCH /_sim/settings: got %d %s, want the url and the secret's fingerprint", r.status, r.body)
	}
	if bytes.Contains(r.body, []byte(testWebhookSecret[6:])) {
		t.Errorf("PATCH /_sim/settings echoes the secret: %s", r.body)
	}
	id, _ = h.createPayment(tok, paymentBody("loud"))
	verified(t, next(t, got), testEpoch)
	h.sim.Reset()
	if n := len(h.sim.Webhooks()); n != 0 || h.sim.Settings().WebhookURL != "" {
		t.Errorf("after Reset: got %d deliveries and url %q, want none", n, h.sim.Settings().WebhookURL)
	}
	_ = id
}

// Reset and Close cancel a try in flight instead of waiting for its
// timeout, and nothing is posted after Close.
func TestWebhookStopsOnResetAndClose(t *testing.T) { synctest.Test(t, webhookStopsOnResetAndClose) }

func webhookStopsOnResetAndClose(t *testing.T) {
	h := newBubbleHarness(t, Options{Control: true, WebhookURL: "http://hanging.test/hooks"})
	release := make(chan struct{})
	h.sim.hooks.client.Transport = servePipe(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release) })
	tok := h.token("alice")
	for _, stop := range []func(){h.sim.Reset, h.sim.Close} {
		h.createPayment(tok, paymentBody("hanging"))
		synctest.Wait() // the try hangs at the receiver
		start := time.Now()
		stop()
		// On the bubble's clock, which moves only when every goroutine
		// waits: a stop that waited for the try's timeout took it.
		if took := time.Since(start); took > webhookTimeout/2 {
			t.Errorf("stopping took %s, want the try cancelled at once", took)
		}
	}
	h.createPayment(tok, paymentBody("after close"))
	if d := h.sim.Webhooks(); len(d) != 0 {
		t.Errorf("after Close: got deliveries %+v, want none", d)
	}
}

// Webhook settings are checked like the others, and the secret is never
// shown: not in GET /_sim/settings, not in a refusal.
func TestWebhookSettingsValidation(t *testing.T) {
	h := newHarness(t, Options{Control: true})
	if got := h.sim.Settings().WebhookSecret; got != Fingerprint(DefaultWebhookSecret) {
		t.Errorf("default secret: got %q, want the fingerprint of DefaultWebhookSecret", got)
	}
	for _, tt := range []struct {
		key string
		bad any
	}{
		{"webhookUrl", "localhost:8080/hooks"},
		{"webhookUrl", "ftp://hooks.example/x"},
		{"webhookUrl", "http://user:pass@hooks.example/x"},
		{"webhookUrl", "http://hooks.example/x#frag"},
		{"webhookUrl", 5},
		{"webhookSecret", "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA=="},
		{"webhookSecret", "whsec_not base64 at all, not at all"},
		{"webhookSecret", "whsec_" + "c2hvcnQga2V5"},
		{"webhookSecret", ""},
	} {
		t.Run(tt.key+"="+strconv.Quote(toString(tt.bad)), func(t *testing.T) {
			r := h.do("PATCH", "/_sim/settings", "", map[string]any{tt.key: tt.bad})
			wantError(t, r, http.StatusBadRequest, typeClientError, "")
			if s, ok := tt.bad.(string); ok && len(s) > 8 && tt.key == "webhookSecret" && bytes.Contains(r.body, []byte(s[6:])) {
				t.Errorf("refusal quotes the secret: %s", r.body)
			}
		})
	}
	for _, o := range []Options{{WebhookURL: "nope"}, {WebhookSecret: "whsec_c2hvcnQ="}} {
		if err := o.Validate(); err == nil {
			t.Errorf("Options %+v: got nil, want an error", o)
		}
	}
}

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return "non-string"
}

// A test counts the BFF's polls of one payment with the request log (no
// counter of its own is needed): each GET /v2/payments/{id} is one entry.
func TestRequestLogCountsPaymentReads(t *testing.T) {
	h := newHarness(t, Options{Control: true})
	tok := h.token("alice")
	id, _ := h.createPayment(tok, paymentBody("polled"))
	other, _ := h.createPayment(tok, paymentBody("other"))
	for range 3 {
		h.do("GET", "/v2/payments/"+id, tok, nil)
	}
	h.do("GET", "/v2/payments/"+other, tok, nil)
	var seen []SeenRequest
	if err := jsonUnmarshal(h.do("GET", "/_sim/requests", "", nil).body, &seen); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range seen {
		if r.Method == http.MethodGet && r.Path == "/v2/payments/"+id {
			n++
		}
	}
	if n != 3 {
		t.Errorf("got %d reads of %s in the request log, want 3", n, id)
	}
}
