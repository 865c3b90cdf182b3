package payments_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/proxy"
)

// bank is an upstream that keeps payments and lists them newest first; a
// payment creation can be made to misbehave before or after it acted.
type bank struct {
	mu       sync.Mutex
	payments []map[string]any
	creates  atomic.Int64
	seen     counter
	// after, when set, replaces the reply to the next creation once the
	// payment exists: "hangup", "500", "502", "401" or "slow" (sleeps past
	// the timeout).
	after atomic.Value
	// refuse, when set, answers the next creation before acting: "hangup"
	// drops the connection, "500" is the upstream's typed error, "401" its
	// 401, anything else a 400 body.
	refuse atomic.Value
}

// add stores a new payment with the body's paymentInformation, as the
// upstream does whoever asks (the BFF, or the user through another
// channel).
func (b *bank) add(body map[string]any) string {
	n := b.creates.Add(1)
	id := fmt.Sprintf("01JPAY%04d", n)
	b.mu.Lock()
	b.payments = append([]map[string]any{{
		"id": id, "status": "INIT", "payUrl": "https://pay.example/" + id, "redirectUrl": body["redirectUrl"],
		"paymentInformation": body["paymentInformation"], "createdAt": time.Now().UTC().Format(time.RFC3339Nano),
	}}, b.payments...)
	b.mu.Unlock()
	return id
}

func hangUp(w http.ResponseWriter) {
	conn, _, _ := http.NewResponseController(w).Hijack()
	_ = conn.Close()
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func (b *bank) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.seen.add(r)
	switch {
	case r.Method == http.MethodPost && (r.URL.Path == "/v2/payments" || r.URL.Path == "/v2/pay/open-banking-init"):
		raw, _ := io.ReadAll(r.Body) // read whole: the request reached the upstream
		switch v, _ := b.refuse.Swap("").(string); v {
		case "":
		case "hangup":
			hangUp(w)
			return
		case "500":
			writeJSON(w, http.StatusInternalServerError, `{"type":"INTERNAL_ERROR","message":"PROVIDER_ERROR"}`)
			return
		case "401":
			writeJSON(w, http.StatusUnauthorized, `{"message":"Unauthorized"}`)
			return
		default:
			writeJSON(w, http.StatusBadRequest, v)
			return
		}
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		id := b.add(body)
		switch v, _ := b.after.Swap("").(string); v {
		case "hangup":
			hangUp(w)
			return
		case "500":
			writeJSON(w, http.StatusInternalServerError, `{"type":"INTERNAL_ERROR","message":"SERVER_ERROR"}`)
			return
		case "502":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, `<html>gateway</html>`)
			return
		case "401":
			writeJSON(w, http.StatusUnauthorized, `{"message":"Unauthorized"}`)
			return
		case "slow":
			time.Sleep(400 * time.Millisecond) // a fake latency: a slow upstream
		}
		if r.URL.Path == "/v2/pay/open-banking-init" {
			writeJSON(w, http.StatusOK, fmt.Sprintf(`{"paymentId":%q,"status":"PENDING","authorizationUrl":"https://pay.example/%s"}`, id, id))
			return
		}
		writeJSON(w, http.StatusCreated, fmt.Sprintf(`{"id":%q,"payUrl":"https://pay.example/%s"}`, id, id))
	case r.Method == http.MethodGet && r.URL.Path == "/v2/payments":
		b.mu.Lock()
		items := append([]map[string]any(nil), b.payments...)
		b.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"items": items, "nextPage": nil})
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// failingLedger is a ledger whose database does not answer.
type failingLedger struct{ payments.Ledger }

func (failingLedger) Claim(context.Context, ledger.Request, time.Duration) (*ledger.Claim, *ledger.Record, error) {
	return nil, nil, fmt.Errorf("%w: connection refused", ledger.ErrUnavailable)
}

type moneyFixture struct {
	bank   *bank
	events *events
	ledger payments.Ledger
	tokens *fakeTokens
	fwd    *proxy.Forwarder
	svc    *payments.Service
	srv    *httptest.Server
}

func newMoneyFixture(t *testing.T, led payments.Ledger) *moneyFixture {
	t.Helper()
	if led == nil {
		m, err := ledger.NewMemory(nil, make([]byte, 32), nil)
		if err != nil {
			t.Fatal(err)
		}
		led = m
	}
	f := &moneyFixture{bank: &bank{}, ledger: led, tokens: &fakeTokens{}, events: &events{}}
	f.srv = httptest.NewServer(f.bank)
	t.Cleanup(f.srv.Close)
	base, _ := url.Parse(f.srv.URL)
	timeout := 300 * time.Millisecond
	f.fwd = proxy.New(proxy.Options{
		BaseURL: base, Routes: proxy.NewRoutes(contractRoutes), Tokens: f.tokens,
		Timeout: timeout, MaxBodyBytes: 1 << 16,
		Retry: proxy.Retry{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond},
	})
	f.svc = payments.New(payments.Options{Upstream: f.fwd, Timeout: timeout, MoneyRoutes: []string{"/v2/payments", "/v2/pay"}, Ledger: led,
		Observe: f.events})
	return f
}

const payment = `{"paymentInformation":{"amount":"12.50","currency":"ILS","remittanceInformation":"Order 7","creditorAccount":{"iban":"IL62 0108 0000 0009 9999 999"}},"providerIds":["demobank-sandbox"]}`

func (f *moneyFixture) post(t *testing.T, path, body, key string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "http://bff.local/api"+path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	w := httptest.NewRecorder()
	serve(t, f.fwd, f.svc, w, r, proxy.Call{UserID: "alice", RequestID: "req-123", Path: path, ClientIP: "203.0.113.7", SessionRef: "handle"})
	return w
}

func (f *moneyFixture) pay(t *testing.T, body, key string) *httptest.ResponseRecorder {
	t.Helper()
	return f.post(t, "/v2/payments", body, key)
}

// A money request's key: required and well formed, a repeat replayed and
// another body refused, a refusal giving the key back, and an answer lost
// after the upstream acted settled, never sent again.
func TestMoneyMovingRequests(t *testing.T) {
	t.Run("a payment without a key is refused before the upstream", func(t *testing.T) {
		f := newMoneyFixture(t, nil)
		w := f.pay(t, payment, "")
		if p := decodeProblem(t, w); w.Code != 400 || p.Code != "IDEMPOTENCY_KEY_REQUIRED" || p.Action != "fix_request" || p.Retryable {
			t.Fatalf("got %d %+v, want 400 IDEMPOTENCY_KEY_REQUIRED fix_request", w.Code, p)
		}
		if w := f.pay(t, payment, "bad key"); decodeProblem(t, w).Code != "IDEMPOTENCY_KEY_INVALID" {
			t.Fatalf("a key with a space: got %s", w.Body)
		}
		if n := f.bank.creates.Load(); n != 0 {
			t.Fatalf("the upstream saw %d creations, want 0", n)
		}
	})

	t.Run("the first runs, a repeat replays, another body is refused", func(t *testing.T) {
		f := newMoneyFixture(t, nil)
		first := f.pay(t, payment, "k1")
		if first.Code != 201 || first.Header().Get("Idempotent-Replayed") != "" {
			t.Fatalf("first: got %d %s", first.Code, first.Body)
		}
		again := f.pay(t, payment, "k1")
		if again.Code != 201 || again.Body.String() != first.Body.String() || again.Header().Get("Idempotent-Replayed") != "true" {
			t.Fatalf("repeat: got %d %s replayed=%q", again.Code, again.Body, again.Header().Get("Idempotent-Replayed"))
		}
		if p := decodeProblem(t, f.pay(t, strings.Replace(payment, "12.50", "13", 1), "k1")); p.Code != "IDEMPOTENCY_KEY_REUSED" {
			t.Fatalf("another body: got %+v", p)
		}
		if n := f.bank.creates.Load(); n != 1 {
			t.Fatalf("the upstream created %d payments, want 1", n)
		}
	})

	t.Run("a refusal releases the key", func(t *testing.T) {
		f := newMoneyFixture(t, nil)
		f.bank.refuse.Store(`{"type":"PROVIDER_UNAVAILABLE","message":"the bank is down"}`)
		if w := f.pay(t, payment, "k2"); decodeProblem(t, w).Code != "PROVIDER_UNAVAILABLE" {
			t.Fatalf("got %d %s, want 503 PROVIDER_UNAVAILABLE", w.Code, w.Body)
		}
		if w := f.pay(t, payment, "k2"); w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "" {
			t.Fatalf("the retry after a refusal: got %d %s, want a fresh 201", w.Code, w.Body)
		}
	})

	for _, fault := range []string{"hangup", "500", "502", "slow"} {
		t.Run("after the upstream acted and its answer was lost ("+fault+"), the payment is settled, never repeated", func(t *testing.T) {
			f := newMoneyFixture(t, nil)
			f.bank.after.Store(fault)
			w := f.pay(t, payment, "k-"+fault)
			if w.Code != 201 {
				t.Fatalf("got %d %s, want the settled 201", w.Code, w.Body)
			}
			var got struct{ ID, PayURL string }
			_ = json.Unmarshal(w.Body.Bytes(), &got)
			if got.ID != "01JPAY0001" || got.PayURL != "https://pay.example/01JPAY0001" {
				t.Fatalf("got %s, want the payment the upstream made", w.Body)
			}
			again := f.pay(t, payment, "k-"+fault)
			if again.Code != 201 || again.Body.String() != w.Body.String() || again.Header().Get("Idempotent-Replayed") != "true" {
				t.Fatalf("repeat: got %d %s", again.Code, again.Body)
			}
			if n := f.bank.creates.Load(); n != 1 {
				t.Fatalf("the upstream created %d payments, want 1", n)
			}
		})
	}

}

// A money request whose outcome nobody can settle, the upstream's own
// failure, and a ledger that does not answer: each answered as the
// contract says, and nothing sent twice.
func TestMoneyMovingRequestsUnsettled(t *testing.T) {
	t.Run("an outcome nobody can settle is PAYMENT_OUTCOME_UNKNOWN and never sent again", func(t *testing.T) {
		f := newMoneyFixture(t, nil)
		f.bank.refuse.Store("hangup") // reached the upstream, which made nothing: nothing can tell
		w := f.pay(t, payment, "lost")
		p := decodeProblem(t, w)
		if w.Code != 502 || p.Code != "PAYMENT_OUTCOME_UNKNOWN" || p.Action != "check_status" || p.Retryable {
			t.Fatalf("got %d %+v, want 502 PAYMENT_OUTCOME_UNKNOWN check_status, not retryable", w.Code, p)
		}
		if p := decodeProblem(t, f.pay(t, payment, "lost")); p.Code != "PAYMENT_OUTCOME_UNKNOWN" {
			t.Fatalf("repeat: got %+v", p)
		}
		if n := f.bank.seen.get("POST /v2/payments"); n != 1 {
			t.Fatalf("the upstream got %d POSTs, want 1: an unknown key is never sent again", n)
		}
	})

	t.Run("the upstream's own 500 with no payment made releases the key", func(t *testing.T) {
		f := newMoneyFixture(t, nil)
		f.bank.refuse.Store("500")
		w := f.pay(t, payment, "k-500")
		if p := decodeProblem(t, w); w.Code != 502 || p.Code != "UPSTREAM_ERROR" || !p.Retryable {
			t.Fatalf("got %d %+v, want 502 UPSTREAM_ERROR retryable", w.Code, p)
		}
		if w := f.pay(t, payment, "k-500"); w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "" {
			t.Fatalf("the retry: got %d %s, want a fresh 201", w.Code, w.Body)
		}
		if n := f.bank.creates.Load(); n != 1 {
			t.Fatalf("the upstream created %d payments, want 1", n)
		}
	})

	t.Run("another unknown payment of the user of another amount does not block settling", func(t *testing.T) {
		f := newMoneyFixture(t, nil)
		f.bank.refuse.Store("hangup") // never made, and nothing can tell: unknown
		if p := decodeProblem(t, f.pay(t, strings.Replace(payment, "12.50", "12.49", 1), "lost-before")); p.Code != "PAYMENT_OUTCOME_UNKNOWN" {
			t.Fatalf("got %+v, want PAYMENT_OUTCOME_UNKNOWN", p)
		}
		f.bank.after.Store("hangup")
		if w := f.pay(t, payment, "lost-after"); w.Code != 201 {
			t.Fatalf("got %d %s, want the payment settled", w.Code, w.Body)
		}
		// Similar content is confusable: a second lost payment like the
		// first unknown one (the upstream would have made the same payment
		// of both) is left unknown, whatever its remittance text.
		f.bank.after.Store("hangup")
		if p := decodeProblem(t, f.pay(t, strings.Replace(strings.Replace(payment, "12.50", "12.49", 1), "Order 7", "Order 8", 1), "lost-again")); p.Code != "PAYMENT_OUTCOME_UNKNOWN" {
			t.Fatalf("got %+v, want PAYMENT_OUTCOME_UNKNOWN while a request like it is unknown", p)
		}
	})

	t.Run("a ledger that does not answer sends nothing", func(t *testing.T) {
		f := newMoneyFixture(t, failingLedger{})
		w := f.pay(t, payment, "k3")
		if p := decodeProblem(t, w); w.Code != 503 || p.Code != "LEDGER_UNAVAILABLE" || !p.Retryable {
			t.Fatalf("got %d %+v, want 503 LEDGER_UNAVAILABLE retryable", w.Code, p)
		}
		if n := f.bank.creates.Load(); n != 0 {
			t.Fatalf("the upstream saw %d creations, want 0", n)
		}
	})

	t.Run("reads are not money-moving", func(t *testing.T) {
		f := newMoneyFixture(t, failingLedger{})
		r := httptest.NewRequest(http.MethodGet, "http://bff.local/api/v2/payments", nil)
		w := httptest.NewRecorder()
		serve(t, f.fwd, f.svc, w, r, proxy.Call{UserID: "alice", RequestID: "req-123", Path: "/v2/payments"})
		if w.Code != 200 {
			t.Fatalf("GET: got %d %s, want 200 without the ledger", w.Code, w.Body)
		}
	})
}

// hangUpOnce is an upstream over raw TCP: it answers a first request on a
// connection (so the client keeps the connection for reuse), then reads the
// next request whole and closes the connection without an answer — a
// payment that reached the upstream and whose answer was lost. It counts
// the POSTs it read.
type hangUpOnce struct {
	ln    net.Listener
	posts atomic.Int64
	mu    sync.Mutex
	conns []net.Conn // closed with the test: a client's idle connection ends with it
}

func startHangUpOnce(t *testing.T) *hangUpOnce {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hangUpOnce{ln: ln}
	t.Cleanup(func() {
		ln.Close()
		h.mu.Lock()
		for _, c := range h.conns {
			c.Close()
		}
		h.mu.Unlock()
	})
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			h.conns = append(h.conns, conn)
			h.mu.Unlock()
			go h.serve(conn)
		}
	}()
	return h
}

func (h *hangUpOnce) serve(conn net.Conn) {
	defer conn.Close()
	br := bufio.NewReader(conn)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		if req.Method == http.MethodPost {
			h.posts.Add(1)
			return // hang up: the request arrived, no answer leaves
		}
		body := `{"items":[],"nextPage":null}`
		fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}
}

// TestTransportNeverReplaysAPayment: net/http's Transport sends a request
// again on a new connection when a reused connection closes without an
// answer and the request counts as replayable, which a POST carrying an
// Idempotency-Key header and a GetBody does. The BFF's payment must reach
// the upstream once.
func TestTransportNeverReplaysAPayment(t *testing.T) {
	t.Run("the hazard: a plain client replays a keyed POST", func(t *testing.T) {
		h := startHangUpOnce(t)
		c := &http.Client{Transport: &http.Transport{}}
		u := "http://" + h.ln.Addr().String() + "/v2/payments"
		resp, err := c.Get(u) // opens the connection that the POST reuses
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		req, _ := http.NewRequest(http.MethodPost, u, bytes.NewReader([]byte(payment)))
		req.Header.Set("Idempotency-Key", "k")
		if _, err := c.Do(req); err == nil {
			t.Fatal("got an answer from an upstream that hangs up")
		}
		if n := h.posts.Load(); n != 2 {
			t.Fatalf("the upstream read %d POSTs, want 2: without the replay this test would prove nothing", n)
		}
	})

	t.Run("the BFF sends a payment once", func(t *testing.T) {
		h := startHangUpOnce(t)
		base, _ := url.Parse("http://" + h.ln.Addr().String())
		fwd, svc := newService(t, base, nil, time.Second)
		get := httptest.NewRequest(http.MethodGet, "http://bff.local/api/v2/payments", nil)
		serve(t, fwd, svc, httptest.NewRecorder(), get, proxy.Call{UserID: "alice", RequestID: "r0", Path: "/v2/payments"})
		r := httptest.NewRequest(http.MethodPost, "http://bff.local/api/v2/payments", strings.NewReader(payment))
		r.Header.Set("Idempotency-Key", "k")
		r.Header.Set("X-Idempotency-Key", "k")
		w := httptest.NewRecorder()
		serve(t, fwd, svc, w, r, proxy.Call{UserID: "alice", RequestID: "r1", Path: "/v2/payments"})
		if n := h.posts.Load(); n != 1 {
			t.Fatalf("the upstream read %d POSTs, want 1", n)
		}
		var p struct{ Code string }
		_ = json.Unmarshal(w.Body.Bytes(), &p)
		if w.Code != 502 || p.Code != "PAYMENT_OUTCOME_UNKNOWN" {
			t.Fatalf("got %d %s, want 502 PAYMENT_OUTCOME_UNKNOWN", w.Code, w.Body)
		}
	})
}

func TestIdempotencyKeyNeverGoesUpstream(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	base, _ := url.Parse(srv.URL)
	fwd, svc := newService(t, base, nil, time.Second)
	r := httptest.NewRequest(http.MethodPost, "http://bff.local/api/v2/payments", strings.NewReader(payment))
	r.Header.Set("Idempotency-Key", "k")
	r.Header.Set("X-Idempotency-Key", "k")
	serve(t, fwd, svc, httptest.NewRecorder(), r, proxy.Call{UserID: "alice", RequestID: "r1", Path: "/v2/payments"})
	if got == nil {
		t.Fatal("the upstream saw nothing")
	}
	for _, h := range []string{"Idempotency-Key", "X-Idempotency-Key"} {
		if v := got.Get(h); v != "" {
			t.Errorf("the upstream got %s: %q", h, v)
		}
	}
}

// A payment whose request was never written (the deadline passed while
// connecting, as for a process frozen past its deadline) is not an unknown
// outcome: the upstream cannot have acted, so the key is released.
func TestPaymentNeverWrittenIsReleased(t *testing.T) {
	base, _ := url.Parse("http://upstream.invalid")
	var dials atomic.Int64
	// net/http does not cancel a dial when its request ends: the dialer
	// also returns when the test does.
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	stuck := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		dials.Add(1)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-done:
			return nil, net.ErrClosed
		}
	}}
	fwd, svc := newService(t, base, stuck, 50*time.Millisecond)
	for i := 0; i < 2; i++ {
		r := httptest.NewRequest(http.MethodPost, "http://bff.local/api/v2/payments", strings.NewReader(payment))
		r.Header.Set("Idempotency-Key", "never-written")
		w := httptest.NewRecorder()
		serve(t, fwd, svc, w, r, proxy.Call{UserID: "alice", RequestID: "req-123", Path: "/v2/payments"})
		if p := decodeProblem(t, w); w.Code != 504 || p.Code != "UPSTREAM_TIMEOUT" {
			t.Fatalf("attempt %d: got %d %+v, want 504 UPSTREAM_TIMEOUT (released, not unknown)", i+1, w.Code, p)
		}
	}
	if n := dials.Load(); n != 2 {
		t.Fatalf("got %d connection attempts, want 2: the released key ran again", n)
	}
}

// newService is a forwarder to base (through transport, when set) and a
// payments service on it with an in-process ledger.
func newService(t testing.TB, base *url.URL, transport http.RoundTripper, timeout time.Duration) (*proxy.Forwarder, *payments.Service) {
	t.Helper()
	led, err := ledger.NewMemory(nil, make([]byte, 32), nil)
	if err != nil {
		t.Fatal(err)
	}
	fwd := proxy.New(proxy.Options{
		BaseURL: base, Routes: proxy.NewRoutes(contractRoutes), Tokens: &fakeTokens{}, Transport: transport,
		Timeout: timeout, MaxBodyBytes: 1 << 16, Retry: proxy.Retry{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond},
	})
	return fwd, payments.New(payments.Options{Upstream: fwd, Timeout: timeout, MoneyRoutes: []string{"/v2/payments", "/v2/pay"}, Ledger: led})
}
