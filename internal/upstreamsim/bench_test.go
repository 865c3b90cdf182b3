package upstreamsim

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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
