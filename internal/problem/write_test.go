package problem

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	p := Wrap(CodeMethodNotAllowed, "use GET", errors.New("internal cause: dial 10.1.2.3 secret-xyz"))
	p.Allow = "GET, HEAD"
	p.RetryAfter = "30"
	rec := httptest.NewRecorder()
	Write(rec, p, "req-123")

	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("status: got %d, want %d", rec.Code, http.StatusMethodNotAllowed)
	}
	h := rec.Header()
	for k, want := range map[string]string{
		"Content-Type":           ContentType,
		"X-Request-Id":           "req-123",
		"Allow":                  "GET, HEAD",
		"Retry-After":            "30",
		"Cache-Control":          "no-store",
		"X-Content-Type-Options": "nosniff",
	} {
		if got := h.Get(k); got != want {
			t.Errorf("%s: got %q, want %q", k, got, want)
		}
	}
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("body: %v", err)
	}
	if body["requestId"] != h.Get("X-Request-Id") {
		t.Errorf("requestId: got %v, want the X-Request-Id header %q", body["requestId"], h.Get("X-Request-Id"))
	}
	for k, want := range map[string]any{
		"type": TypeURI(CodeMethodNotAllowed), "code": CodeMethodNotAllowed, "status": float64(405),
		"action": ActionFixRequest, "retryable": false, "detail": "use GET",
	} {
		if body[k] != want {
			t.Errorf("%s: got %v, want %v", k, body[k], want)
		}
	}
	raw := rec.Body.String()
	for _, leak := range []string{"internal cause", "secret-xyz", "10.1.2.3", "Allow", "GET, HEAD", "RetryAfter"} {
		if strings.Contains(raw, leak) {
			t.Errorf("body %s: contains %q", raw, leak)
		}
	}
	if p.RequestID != "" {
		t.Errorf("Write changed its argument: RequestID %q", p.RequestID)
	}
}

func TestWriteFromUpstream(t *testing.T) {
	p := FromUpstream(423, nil, []byte("Connection locked"))
	rec := httptest.NewRecorder()
	Write(rec, p, "r1")
	if got := rec.Header().Get("Retry-After"); got != "60" {
		t.Errorf("Retry-After: got %q, want %q", got, "60")
	}
	if strings.Contains(rec.Body.String(), "upstream replied") {
		t.Errorf("body %s: contains the internal cause", rec.Body.String())
	}
}

func TestWriteDefensive(t *testing.T) {
	tests := []struct {
		name       string
		p          *Problem
		wantStatus int
		wantCode   string
	}{
		{"nil problem", nil, 500, CodeInternal},
		{"zero status", &Problem{Code: CodeBadPath}, 500, CodeBadPath},
		{"no code", &Problem{Status: 400}, 400, CodeInternal},
		{"NaN cost", &Problem{Status: 402, Code: CodeInsufficientCredits, Cost: ptr(math.NaN())}, 500, CodeInternal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			Write(rec, tc.p, "rid")
			if rec.Code != tc.wantStatus {
				t.Errorf("status: got %d, want %d", rec.Code, tc.wantStatus)
			}
			var body Problem
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %q: %v", rec.Body.String(), err)
			}
			if body.Code != tc.wantCode || body.RequestID != "rid" {
				t.Errorf("body: got code %q requestId %q, want %q and %q", body.Code, body.RequestID, tc.wantCode, "rid")
			}
		})
	}
}

// CauseText keeps a cause's reason and drops the address and query a
// *url.Error carries.
func TestCauseText(t *testing.T) {
	uerr := &url.Error{Op: "Get", URL: "http://10.0.0.7:8080/v2/payments?iban=IL62", Err: errors.New("EOF")}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("dial tcp: refused"), "dial tcp: refused"},
		{uerr, "Get: EOF"},
		{fmt.Errorf("attempt 2: %w", uerr), "Get: EOF"},
	} {
		if got := CauseText(tc.err); got != tc.want {
			t.Errorf("CauseText(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
