package upstreamsim

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// FuzzVerify feeds arbitrary bearer tokens to the verifier: it must never
// panic and never accept a token it did not sign.
func FuzzVerify(f *testing.F) {
	iss := newTokenIssuer("c", "s")
	good := iss.mint(claims{Sub: "u", Kind: kindClient}, testEpoch, time.Hour)
	for _, s := range []string{good, "", "a.b.c", good + "x", strings.Replace(good, ".", "..", 1), jwtHeader + ".e30."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := iss.verify(tok, testEpoch)
		if err == nil && tok != good {
			t.Fatalf("accepted a token it did not sign: %q (%+v)", tok, c)
		}
	})
}

// FuzzTokenEndpoint feeds arbitrary bodies to /oauth/token: replies are
// 200, 400 or 401, never a panic or a 500.
func FuzzTokenEndpoint(f *testing.F) {
	sim := New(Options{})
	for _, s := range []string{`{}`, `{"clientId":"dev-client","clientSecret":"dev-secret","userId":"u"}`, `[`, `null`, `{"userId":1}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest("POST", "/oauth/token", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		sim.ServeHTTP(rec, req)
		if c := rec.Code; c != http.StatusOK && c != http.StatusBadRequest && c != http.StatusUnauthorized {
			t.Fatalf("got %d for %q, want 200, 400 or 401", c, body)
		}
	})
}

// FuzzCursor feeds arbitrary nextPage values to a list route: a bad cursor
// is a 400, never a panic.
func FuzzCursor(f *testing.F) {
	sim := New(Options{Now: fixedClock()})
	tok := sim.tokens.mint(claims{Sub: "u", Kind: kindClient}, sim.Now(), time.Hour)
	f.Add(encodeCursor(cursor{K: "01ARZ3NDEKTSV4RRFFQ69G5FAV", S: 1}))
	f.Add("!!")
	f.Add("")
	f.Fuzz(func(t *testing.T, cur string) {
		req := httptest.NewRequest("GET", "/v2/payments", nil)
		q := req.URL.Query()
		q.Set("nextPage", cur)
		req.URL.RawQuery = q.Encode()
		req.Header.Set("Authorization", "Bearer "+tok)
		rec := httptest.NewRecorder()
		sim.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK && rec.Code != http.StatusBadRequest {
			t.Fatalf("got %d for cursor %q, want 200 or 400", rec.Code, cur)
		}
	})
}
