package upstreamsim

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The token endpoint and GET /v2/payments are the hot paths the BFF's load
// tests hit; these measure the handler without the network.

func BenchmarkTokenEndpoint(b *testing.B) {
	sim := New(Options{})
	body := `{"clientId":"dev-client","clientSecret":"dev-secret","userId":"bench"}`
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest("POST", "/oauth/token", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		sim.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("got %d, want 200", rec.Code)
		}
	}
}

func BenchmarkListPayments(b *testing.B) {
	sim := New(Options{})
	tok := sim.tokens.mint(claims{Sub: "bench", Kind: kindClient}, sim.Now(), sim.opts.TokenTTL)
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest("GET", "/v2/payments", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		rec := httptest.NewRecorder()
		sim.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("got %d, want 200", rec.Code)
		}
	}
}

// BenchmarkTransactionsPage10k reads one page of the busy persona's 10,000
// transactions (seeded by a first read outside the loop): the page read
// must not grow with the user's history.
func BenchmarkTransactionsPage10k(b *testing.B) {
	for _, q := range []string{"limit=50", "limit=500", "limit=50&sort=1", "limit=50&type=CARD"} {
		b.Run(q, func(b *testing.B) {
			sim := New(Options{})
			tok := sim.tokens.mint(claims{Sub: "persona-busy-bench", Kind: kindClient}, sim.Now(), sim.opts.TokenTTL)
			read := func() {
				req := httptest.NewRequest("GET", "/v2/data/transactions?"+q, nil)
				req.Header.Set("Authorization", "Bearer "+tok)
				rec := httptest.NewRecorder()
				sim.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("got %d, want 200", rec.Code)
				}
			}
			read()
			b.ReportAllocs()
			for b.Loop() {
				read()
			}
		})
	}
}

// BenchmarkSeedBusyPersona measures the one-off lazy seeding of 10,000
// transactions that a busy user's first transaction read pays.
func BenchmarkSeedBusyPersona(b *testing.B) {
	now := time.Date(2026, 7, 23, 4, 12, 9, 0, time.UTC)
	b.ReportAllocs()
	for b.Loop() {
		u := seedUser("persona-busy-bench", PersonaBusy, "", now)
		u.seedTransactions()
	}
}
