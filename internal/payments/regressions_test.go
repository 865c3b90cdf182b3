package payments_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/limits"
	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/proxy"
	"github.com/fintech-bff/bff/internal/testing/poll"
	"github.com/fintech-bff/bff/internal/tokens"
)

// The tests below are attacks an adversarial review of the settlement
// found to break the rules; each failed before its fix.

// brokenInvalidate is a token store that cannot drop a token (Redis down).
type brokenInvalidate struct{ fakeTokens }

func (b *brokenInvalidate) InvalidateToken(context.Context, string, string) error {
	return fmt.Errorf("%w: redis: connection refused", tokens.ErrStoreUnavailable)
}

// A 401 the upstream answered is a request that reached it, whatever
// happens to the token drop after it: the key (and the refresh's hold) is
// kept.
func TestAn401IsSentEvenWhenTheTokenCannotBeDropped(t *testing.T) {
	t.Run("payment", func(t *testing.T) {
		b := &bank{}
		srv := httptest.NewServer(b)
		t.Cleanup(srv.Close)
		base, _ := url.Parse(srv.URL)
		fwd := proxy.New(proxy.Options{BaseURL: base, Routes: proxy.NewRoutes(contractRoutes), Tokens: &brokenInvalidate{},
			Timeout: 300 * time.Millisecond, MaxBodyBytes: 1 << 16, Retry: proxy.Retry{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}})
		led, _ := ledger.NewMemory(nil, make([]byte, 32), nil)
		svc := payments.New(payments.Options{Upstream: fwd, Timeout: 300 * time.Millisecond, MoneyRoutes: []string{"/v2/payments"}, Ledger: led})
		b.after.Store("401") // made, then 401
		for i := 0; i < 2; i++ {
			r := httptest.NewRequest(http.MethodPost, "http://bff.local/api/v2/payments", strings.NewReader(payment))
			r.Header.Set("Idempotency-Key", "k-401")
			serve(t, fwd, svc, httptest.NewRecorder(), r, proxy.Call{UserID: "alice", RequestID: "r", Path: "/v2/payments"})
		}
		if n := b.seen.get("POST /v2/payments"); n != 1 {
			t.Fatalf("the upstream got %d POSTs for one key, want 1", n)
		}
	})
	t.Run("refresh", func(t *testing.T) {
		var calls atomic.Int64
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			writeJSON(w, http.StatusUnauthorized, `{"message":"Unauthorized"}`)
		}))
		t.Cleanup(up.Close)
		base, _ := url.Parse(up.URL)
		fwd := proxy.New(proxy.Options{BaseURL: base, Routes: proxy.NewRoutes(contractRoutes), Tokens: &brokenInvalidate{},
			Timeout: time.Second, MaxBodyBytes: 1024, Retry: proxy.Retry{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}})
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		svc := payments.New(payments.Options{Upstream: fwd, Timeout: time.Second,
			Refresh: limits.NewLocal(func() time.Time { return now }), RefreshEvery: 15 * time.Minute})
		for i := 0; i < 2; i++ {
			r := httptest.NewRequest(http.MethodPost, "http://bff.local/api/chat/chat/connections/refresh", nil)
			serve(t, fwd, svc, httptest.NewRecorder(), r, proxy.Call{UserID: "alice", RequestID: "r", Path: payments.RefreshPath})
		}
		if n := calls.Load(); n != 1 {
			t.Fatalf("the upstream got %d refreshes in one interval, want 1", n)
		}
	})
}

// A payment another open request made with the same fields and more (a
// remittance line, a redirect) matches this request's content field by
// field: it is never adopted.
func TestSettlementNeverAdoptsAnOpenRequestsPayment(t *testing.T) {
	f := newMoneyFixture(t, nil)
	bodyA := `{"paymentInformation":{"amount":"12.50","currency":"ILS","creditorAccount":{"iban":"IL620108000000099999999"}}}`
	bodyB := `{"paymentInformation":{"amount":"12.50","currency":"ILS","creditorAccount":{"iban":"IL620108000000099999999"},"remittanceInformation":"Order 9"}}`
	reqB := ledger.Request{UserID: "alice", Route: "/v2/payments", Key: "kB",
		Fingerprint: payments.Fingerprint("POST", "/v2/payments", "", []byte(bodyB)),
		Content:     payments.PaymentContent([]byte(bodyB)), SessionRef: "h", ClientIP: "203.0.113.7", RequestID: "rB"}
	cB, _, err := f.ledger.Claim(context.Background(), reqB, time.Minute)
	if err != nil || cB == nil {
		t.Fatal(err)
	}
	if ok, err := f.ledger.Sending(context.Background(), cB, ledger.SendEvidence{Snapshot: true}); !ok || err != nil {
		t.Fatal(ok, err)
	}
	var b map[string]any
	_ = json.Unmarshal([]byte(bodyB), &b)
	f.bank.refuse.Store("hangup") // A reaches the upstream, which makes nothing
	orig := f.srv.Config.Handler
	f.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			f.bank.add(b) // B's payment is made meanwhile
		}
		orig.ServeHTTP(w, r)
	})
	if w := f.pay(t, bodyA, "kA"); w.Code == http.StatusCreated {
		t.Fatalf("A was answered 201 %s with the payment B made", w.Body)
	}
}

// A gateway's 5xx, whatever its body, is not the upstream saying it
// failed: the key is not given back.
func TestAGatewaysProblemJSONKeepsTheKey(t *testing.T) {
	for _, tc := range []struct{ path, body string }{
		{"/v2/pay/open-banking-init", `{"paymentInformation":{"amount":1,"currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}},"providerId":"x"}`},
		{"/v2/payments", payment},
	} {
		t.Run(tc.path, func(t *testing.T) {
			f := newMoneyFixture(t, nil)
			orig := f.srv.Config.Handler
			var first atomic.Bool
			f.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost && first.CompareAndSwap(false, true) {
					var body map[string]any
					_ = json.NewDecoder(r.Body).Decode(&body)
					go func() { time.Sleep(30 * time.Millisecond); f.bank.add(body) }() // a fake latency: the upstream still acts after its gateway answered
					w.Header().Set("Content-Type", "application/problem+json")
					w.WriteHeader(http.StatusGatewayTimeout)
					_, _ = w.Write([]byte(`{"type":"about:blank","title":"Gateway Timeout","status":504}`))
					return
				}
				orig.ServeHTTP(w, r)
			})
			f.post(t, tc.path, tc.body, "gw-1")
			poll.Until(t, 5*time.Second, "the upstream made the payment", func() bool { return f.bank.creates.Load() != 0 })
			f.post(t, tc.path, tc.body, "gw-1")
			if n := f.bank.creates.Load(); n != 1 {
				t.Fatalf("one key made %d payments, want 1", n)
			}
		})
	}
}
