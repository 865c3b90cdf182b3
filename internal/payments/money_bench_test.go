//go:build integration

package payments_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/proxy"
	"github.com/fintech-bff/bff/internal/testing/pgtest"
)

// BenchmarkPayment measures what at-most-once costs a payment: the same
// POST through the same forwarder to the same upstream, as a plain POST
// (baseline: a route that moves no money), with the in-process ledger, and
// with the PostgreSQL ledger. A payment adds one upstream GET (the
// snapshot of the user's payments that settling needs) and three ledger
// writes, one round trip each (the claim, the send mark, the outcome).
// Compare the ns/op of the sub-benchmarks of one run.
func BenchmarkPayment(b *testing.B) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet { // the snapshot before each payment
			_, _ = w.Write([]byte(`{"items":[],"nextPage":null}`))
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"01JPAYMENT0000000000000000","payUrl":"https://pay.example/01JPAYMENT"}`))
	}))
	b.Cleanup(upstream.Close)
	base, _ := url.Parse(upstream.URL)
	pg, err := ledger.Open(context.Background(), ledger.Options{URL: pgtest.Database(b), EncryptionKey: make([]byte, 32)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pg.Close)
	mem, _ := ledger.NewMemory(nil, make([]byte, 32), nil)
	for _, bc := range []struct {
		name   string
		ledger payments.Ledger
		money  []string
	}{
		{"baseline-plain-post", nil, nil},
		{"ledger-memory", mem, []string{"/v2/payments"}},
		{"ledger-postgres", pg, []string{"/v2/payments"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			fwd := proxy.New(proxy.Options{
				BaseURL: base, Routes: proxy.NewRoutes(contractRoutes), Tokens: &fakeTokens{},
				Timeout: 5 * time.Second, MaxBodyBytes: 1 << 16, Retry: proxy.Retry{MaxAttempts: 1, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond},
			})
			svc := payments.New(payments.Options{Upstream: fwd, Timeout: 5 * time.Second, MoneyRoutes: bc.money, Ledger: bc.ledger})
			run := time.Now().UnixNano() // fresh keys each run: a repeated key would replay
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				r := httptest.NewRequest(http.MethodPost, "http://bff.local/api/v2/payments", strings.NewReader(payment))
				r.Header.Set("Idempotency-Key", fmt.Sprintf("%d-%d", run, i))
				w := httptest.NewRecorder()
				serve(b, fwd, svc, w, r, proxy.Call{UserID: "bench", RequestID: "r", Path: "/v2/payments", SessionRef: "h", ClientIP: "203.0.113.7"})
				if w.Code != http.StatusCreated {
					b.Fatalf("got %d %s", w.Code, w.Body)
				}
			}
		})
	}
}
