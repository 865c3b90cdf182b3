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
		{"NaN cost", &Problem{Status: 402, Code: CodeInsufficientCredits, Ext: []Member{{"cost", math.NaN()}}}, 500, CodeInternal},
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

// The 402's extension members are written where docs/errors.md has them,
// byte for byte: after the standard members, cost before balance, and
// requestId last (api/openapi.yaml, docs/errors.md).
func TestWriteExtensionMembers(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"cost and balance", `{"status":"insufficient_credits","cost":20,"balance":5,"message":"Not enough credits"}`,
			`{"type":"urn:bff:problem:INSUFFICIENT_CREDITS","title":"Not enough credits","status":402,"detail":"Not enough credits","code":"INSUFFICIENT_CREDITS","action":"wait_for_credits","retryable":false,"cost":20,"balance":5,"requestId":"rid"}`},
		{"balance before cost upstream", `{"balance":0.5,"cost":"1e3"}`,
			`{"type":"urn:bff:problem:INSUFFICIENT_CREDITS","title":"Not enough credits","status":402,"code":"INSUFFICIENT_CREDITS","action":"wait_for_credits","retryable":false,"cost":1000,"balance":0.5,"requestId":"rid"}`},
		{"balance only", `{"balance":-0}`,
			`{"type":"urn:bff:problem:INSUFFICIENT_CREDITS","title":"Not enough credits","status":402,"code":"INSUFFICIENT_CREDITS","action":"wait_for_credits","retryable":false,"balance":-0,"requestId":"rid"}`},
		{"neither", `{"status":"insufficient_credits"}`,
			`{"type":"urn:bff:problem:INSUFFICIENT_CREDITS","title":"Not enough credits","status":402,"code":"INSUFFICIENT_CREDITS","action":"wait_for_credits","retryable":false,"requestId":"rid"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			Write(rec, FromUpstream(402, nil, []byte(tc.body)), "rid")
			if got := rec.Body.String(); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// An extension member never replaces a standard one: a standard member's
// name in any case, a name not of RFC 9457's form and a repeated name are
// left out, and the rest is written in order with its value as
// encoding/json writes it. A Problem marshalled by value or by pointer
// reads the same.
func TestExtensionMembersCannotReplaceStandardOnes(t *testing.T) {
	p := New(CodeInsufficientCredits, "d")
	p.Fields = []Field{{Field: "f", Message: "m"}}
	for _, name := range []string{"type", "title", "status", "detail", "instance", "code", "action", "retryable",
		"fields", "errors", "requestId", "Status", "CODE", "requestid", "RequestID", "Errors"} {
		p.Ext = append(p.Ext, Member{name, "forged"})
	}
	for _, name := range []string{"", "ab", "1abc", "_abc", "a-b-c", `co"st`, "cost ", "coût", "a\u0000bc"} {
		p.Ext = append(p.Ext, Member{name, "malformed"})
	}
	p.Ext = append(p.Ext, Member{"cost", 20}, Member{"Cost", "repeated"}, Member{"cost", 21},
		Member{"note_1", "<b>&</b>"}, Member{"limits", map[string]any{"b": []int{1, 2}, "a": nil}})
	rec := httptest.NewRecorder()
	Write(rec, p, "rid")
	want := `{"type":"urn:bff:problem:INSUFFICIENT_CREDITS","title":"Not enough credits","status":402,"detail":"d","code":"INSUFFICIENT_CREDITS","action":"wait_for_credits","retryable":false,` +
		`"fields":[{"field":"f","message":"m"}],"cost":20,"note_1":"\u003cb\u003e\u0026\u003c/b\u003e","limits":{"a":null,"b":[1,2]},"requestId":"rid"}`
	if got := rec.Body.String(); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if rec.Code != 402 || rec.Header().Get("X-Request-Id") != "rid" {
		t.Fatalf("got %d %q, want 402 and the request id", rec.Code, rec.Header().Get("X-Request-Id"))
	}
	byValue, err := json.Marshal(*p)
	if err != nil {
		t.Fatal(err)
	}
	byPointer, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(byValue) != string(byPointer) || !strings.Contains(string(byValue), `"cost":20`) {
		t.Fatalf("by value %s, by pointer %s: want the same, with the extension members", byValue, byPointer)
	}
}
