package problem

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

func ptr(f float64) *float64 { return &f }

// upstreamCase is one upstream reply and the envelope it must become.
type upstreamCase struct {
	name       string
	status     int
	header     http.Header
	body       string
	wantStatus int
	wantCode   string
	wantAction string
	wantRetry  bool
	wantFields []Field
	wantCost   *float64
	wantBal    *float64
	wantRA     string // Retry-After
	wantDetail string // checked when not "-"
}

// upstreamCases has a row per row of the error tables of docs/errors.md that involves the upstream, named after
// it, then the body shapes the upstream and its gateways produce. The fuzz
// tests are seeded from it.
var upstreamCases = []upstreamCase{
	// upstream 400 CLIENT_ERROR / 404 CLIENT_ERROR
	{
		name: "400 CLIENT_ERROR", status: 400,
		body:       `{"type":"CLIENT_ERROR","message":"Payment ID not valid"}`,
		wantStatus: 400, wantCode: CodeClientError, wantAction: ActionFixRequest,
		wantDetail: "Payment ID not valid",
	},
	{
		name: "400 CLIENT_ERROR with stringified list", status: 400,
		body:       `{"type":"CLIENT_ERROR","message":"[\"\\\"clientSecret\\\" is required\"]"}`,
		wantStatus: 400, wantCode: CodeClientError, wantAction: ActionFixRequest,
		wantFields: []Field{{Field: "clientSecret", Message: `"clientSecret" is required`}},
		wantDetail: `"clientSecret" is required`,
	},
	{
		name: "404 CLIENT_ERROR", status: 404,
		body:       `{"type":"CLIENT_ERROR","message":"No providers were found"}`,
		wantStatus: 404, wantCode: CodeClientError, wantAction: ActionFixRequest,
		wantDetail: "No providers were found",
	},
	// upstream 400 VALIDATION_ERROR
	{
		name: "400 VALIDATION_ERROR", status: 400,
		body:       `{"type":"VALIDATION_ERROR","message":"[\"paymentInformation should not be empty\",\"\\\"amount\\\" must be a number\"]"}`,
		wantStatus: 400, wantCode: CodeValidationError, wantAction: ActionFixRequest,
		wantFields: []Field{
			{Field: "paymentInformation", Message: "paymentInformation should not be empty"},
			{Field: "amount", Message: `"amount" must be a number`},
		},
		wantDetail: `paymentInformation should not be empty; "amount" must be a number`,
	},
	{
		name: "400 VALIDATION_ERROR plain sentence", status: 400,
		body:       `{"type":"VALIDATION_ERROR","message":"Neither a Merchant Id nor creditor info supplied"}`,
		wantStatus: 400, wantCode: CodeValidationError, wantAction: ActionFixRequest,
		wantDetail: "Neither a Merchant Id nor creditor info supplied",
	},
	// upstream 400 PROVIDER_UNAVAILABLE
	{
		name: "400 PROVIDER_UNAVAILABLE", status: 400,
		body:       `{"type":"PROVIDER_UNAVAILABLE","message":"Provider temporarily down"}`,
		wantStatus: 503, wantCode: CodeProviderUnavailable, wantAction: ActionRetryLater, wantRetry: true,
		wantDetail: "Provider temporarily down",
	},
	// upstream 402 insufficient_credits
	{
		name: "402 insufficient_credits", status: 402,
		body:       `{"status":"insufficient_credits","cost":20,"balance":5,"message":"Not enough credits"}`,
		wantStatus: 402, wantCode: CodeInsufficientCredits, wantAction: ActionWaitForCredits,
		wantCost: ptr(20), wantBal: ptr(5), wantDetail: "Not enough credits",
	},
	{
		name: "402 insufficient_credits without balance", status: 402,
		body:       `{"status":"insufficient_credits","cost":20,"message":"Not enough credits"}`,
		wantStatus: 402, wantCode: CodeInsufficientCredits, wantAction: ActionWaitForCredits,
		wantCost: ptr(20), wantDetail: "-",
	},
	{
		name: "402 without cost", status: 402,
		body:       `{"message":"Payment required"}`,
		wantStatus: 402, wantCode: CodeInsufficientCredits, wantAction: ActionWaitForCredits,
		wantDetail: "Payment required",
	},
	// upstream 403 NOT_AVAILABLE_ON_PLAN (in type, or alone in message)
	{
		name: "403 NOT_AVAILABLE_ON_PLAN in type", status: 403,
		body:       `{"type":"NOT_AVAILABLE_ON_PLAN","message":"Upgrade to use this endpoint"}`,
		wantStatus: 403, wantCode: CodeNotAvailableOnPlan, wantAction: ActionUpgradePlan,
		wantDetail: "Upgrade to use this endpoint",
	},
	{
		name: "403 NOT_AVAILABLE_ON_PLAN alone in message", status: 403,
		body:       `{"message":"NOT_AVAILABLE_ON_PLAN"}`,
		wantStatus: 403, wantCode: CodeNotAvailableOnPlan, wantAction: ActionUpgradePlan,
		wantDetail: "",
	},
	// upstream 403 ACCOUNT_LIMIT_REACHED
	{
		name: "403 ACCOUNT_LIMIT_REACHED", status: 403,
		body:       `{"type":"ACCOUNT_LIMIT_REACHED","message":"Corporate account cap reached"}`,
		wantStatus: 403, wantCode: CodeAccountLimitReached, wantAction: ActionContactSupport,
		wantDetail: "-",
	},
	// upstream 403 MCP_FORBIDDEN / MCP_NO_SERVICE_ORG
	{
		name: "403 MCP_FORBIDDEN", status: 403,
		body:       `{"type":"MCP_FORBIDDEN","message":"missing scope mcp:read"}`,
		wantStatus: 403, wantCode: CodeMCPForbidden, wantAction: ActionContactSupport,
		wantDetail: "-",
	},
	{
		name: "403 MCP_NO_SERVICE_ORG", status: 403,
		body:       `{"type":"MCP_NO_SERVICE_ORG","message":"no linked account"}`,
		wantStatus: 403, wantCode: CodeMCPNoServiceOrg, wantAction: ActionContactSupport,
		wantDetail: "-",
	},
	// upstream 403 with an empty body
	{
		name: "403 empty body", status: 403, body: "",
		wantStatus: 403, wantCode: CodeForbidden, wantAction: ActionContactSupport,
		wantDetail: "",
	},
	{
		name: "403 whitespace-only body", status: 403, body: " \r\n\t ",
		wantStatus: 403, wantCode: CodeForbidden, wantAction: ActionContactSupport,
		wantDetail: "",
	},
	{
		name: "403 gateway HTML", status: 403,
		body:       `<html><head><title>403 Forbidden</title></head><body><h1>Forbidden</h1><script>x()</script></body></html>`,
		wantStatus: 403, wantCode: CodeForbidden, wantAction: ActionContactSupport,
		wantDetail: "403 Forbidden",
	},
	{
		name: "403 other type", status: 403,
		body:       `{"type":"SCOPE_DENIED","message":"nope"}`,
		wantStatus: 403, wantCode: "SCOPE_DENIED", wantAction: ActionFixRequest,
		wantDetail: "nope",
	},
	// upstream 409 no_refreshable_connections
	{
		name: "409 no_refreshable_connections", status: 409,
		body:       `{"status":"no_refreshable_connections","message":"Connect a bank first"}`,
		wantStatus: 409, wantCode: CodeNoRefreshableConnections, wantAction: ActionReconnectBank,
		wantDetail: "Connect a bank first",
	},
	// upstream 423 (plain-text body)
	{
		name: "423 plain text", status: 423,
		header:     http.Header{"Content-Type": {"text/html"}},
		body:       "Connection is locked and cannot be deleted currently",
		wantStatus: 423, wantCode: CodeResourceLocked, wantAction: ActionRetryLater, wantRetry: true,
		wantRA: "60", wantDetail: "Connection is locked and cannot be deleted currently",
	},
	{
		name: "423 with Retry-After", status: 423,
		header:     http.Header{"Retry-After": {"120"}},
		body:       "locked",
		wantStatus: 423, wantCode: CodeResourceLocked, wantAction: ActionRetryLater, wantRetry: true,
		wantRA: "120", wantDetail: "locked",
	},
	{
		name: "423 with a Retry-After over an hour: an hour", status: 423,
		header:     http.Header{"Retry-After": {"36000"}},
		body:       "locked",
		wantStatus: 423, wantCode: CodeResourceLocked, wantAction: ActionRetryLater, wantRetry: true,
		wantRA: "3600", wantDetail: "locked",
	},
	{
		name: "503 with a Retry-After date in 9999: an hour", status: 503,
		header:     http.Header{"Retry-After": {"Fri, 31 Dec 9999 23:59:59 GMT"}},
		body:       "Service Unavailable",
		wantStatus: 503, wantCode: CodeUpstreamUnavailable, wantAction: ActionRetryLater, wantRetry: true,
		wantRA: "3600", wantDetail: "Service Unavailable",
	},
	{
		name: "423 JSON body", status: 423,
		body:       `{"message":"Connection locked"}`,
		wantStatus: 423, wantCode: CodeResourceLocked, wantAction: ActionRetryLater, wantRetry: true,
		wantRA: "60", wantDetail: "Connection locked",
	},
	// upstream 401 twice, or the token endpoint rejects the credentials
	{
		name: "401 {message}", status: 401,
		body:       `{"message":"Unauthorized"}`,
		wantStatus: 502, wantCode: CodeUpstreamAuthFailed, wantAction: ActionContactSupport,
		wantDetail: "Unauthorized",
	},
	{
		name: "401 {type, message} with stringified OAuth error", status: 401,
		body:       `{"type":"CLIENT_ERROR","message":"{\"error\":\"access_denied\",\"error_description\":\"Unauthorized\"}"}`,
		wantStatus: 502, wantCode: CodeUpstreamAuthFailed, wantAction: ActionContactSupport,
		wantDetail: "Unauthorized",
	},
	{
		name: "401 OAuth body", status: 401,
		body:       `{"error":"access_denied","error_description":"Unauthorized"}`,
		wantStatus: 502, wantCode: CodeUpstreamAuthFailed, wantAction: ActionContactSupport,
		wantDetail: "Unauthorized",
	},
	// upstream 500 INTERNAL_ERROR / INTERNAL_SERVER_ERROR
	{
		name: "500 INTERNAL_ERROR", status: 500,
		body:       `{"type":"INTERNAL_ERROR","message":"SERVER_ERROR"}`,
		wantStatus: 502, wantCode: CodeUpstreamError, wantAction: ActionRetryLater, wantRetry: true,
		wantDetail: "SERVER_ERROR",
	},
	{
		name: "500 INTERNAL_SERVER_ERROR", status: 500,
		body:       `{"type":"INTERNAL_SERVER_ERROR","message":"PROVIDER_ERROR"}`,
		wantStatus: 502, wantCode: CodeUpstreamError, wantAction: ActionRetryLater, wantRetry: true,
		wantDetail: "PROVIDER_ERROR",
	},
	{
		name: "500 garbage", status: 500, body: "\x00\xff\xfe{{{",
		wantStatus: 502, wantCode: CodeUpstreamError, wantAction: ActionRetryLater, wantRetry: true,
		wantDetail: "{{{",
	},
	// upstream 503 MCP_TEMPORARILY_UNAVAILABLE or plain 503
	{
		name: "503 MCP_TEMPORARILY_UNAVAILABLE", status: 503,
		body:       `{"type":"MCP_TEMPORARILY_UNAVAILABLE","message":"try again"}`,
		wantStatus: 503, wantCode: CodeMCPTemporarilyUnavail, wantAction: ActionRetryLater, wantRetry: true,
		wantDetail: "try again",
	},
	{
		name: "503 plain with Retry-After", status: 503,
		header:     http.Header{"Retry-After": {"Wed, 21 Oct 2015 07:28:00 GMT"}},
		body:       "Service Unavailable",
		wantStatus: 503, wantCode: CodeUpstreamUnavailable, wantAction: ActionRetryLater, wantRetry: true,
		wantRA: "0", wantDetail: "Service Unavailable", // a date gone by: retry now, in seconds
	},
	{
		name: "503 bad Retry-After dropped", status: 503,
		header:     http.Header{"Retry-After": {"soon\r\nX-Evil: 1"}},
		wantStatus: 503, wantCode: CodeUpstreamUnavailable, wantAction: ActionRetryLater, wantRetry: true,
		wantDetail: "",
	},
	// upstream unreachable / timed out: a gateway's 502 / 504
	{
		name: "502 from a gateway", status: 502,
		body:       "<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>",
		wantStatus: 502, wantCode: CodeUpstreamError, wantAction: ActionRetryLater, wantRetry: true,
		wantDetail: "502 Bad Gateway",
	},
	{
		name: "504 from a gateway", status: 504,
		body:       `{"message":"Endpoint request timed out"}`,
		wantStatus: 504, wantCode: CodeUpstreamTimeout, wantAction: ActionRetryLater, wantRetry: true,
		wantDetail: "Endpoint request timed out",
	},
	// any other upstream error
	{
		name: "other: 429 with type and Retry-After", status: 429,
		header:     http.Header{"Retry-After": {"7"}},
		body:       `{"type":"RATE_LIMITED","message":"slow down"}`,
		wantStatus: 429, wantCode: "RATE_LIMITED", wantAction: ActionRetryLater, wantRetry: true,
		wantRA: "7", wantDetail: "slow down",
	},
	{
		name: "other: 422 malformed type", status: 422,
		body:       `{"type":"https://example.com/probs/out-of-credit","message":"bad"}`,
		wantStatus: 422, wantCode: CodeUpstreamError, wantAction: ActionFixRequest,
		wantDetail: "bad",
	},
	{
		name: "other: 409 without a known status", status: 409,
		body:       `{"status":"conflict","message":"busy"}`,
		wantStatus: 409, wantCode: CodeUpstreamError, wantAction: ActionFixRequest,
		wantDetail: "busy",
	},
	{
		name: "other: 400 with a BFF-reserved type", status: 400,
		body:       `{"type":"SESSION_REQUIRED","message":"x"}`,
		wantStatus: 400, wantCode: CodeUpstreamError, wantAction: ActionFixRequest,
		wantDetail: "x",
	},
	{
		name: "other: 501", status: 501, body: "",
		wantStatus: 501, wantCode: CodeUpstreamError, wantAction: ActionRetryLater, wantRetry: true,
		wantDetail: "",
	},
	{
		name: "other: status below 400", status: 302, body: "moved",
		wantStatus: 502, wantCode: CodeUpstreamError, wantAction: ActionRetryLater, wantRetry: true,
		wantDetail: "",
	},
	// body shapes
	{
		name: "shape: message a number", status: 400,
		body:       `{"type":"CLIENT_ERROR","message":42}`,
		wantStatus: 400, wantCode: CodeClientError, wantAction: ActionFixRequest,
		wantDetail: "42",
	},
	{
		name: "shape: message an object", status: 400,
		body:       `{"type":"CLIENT_ERROR","message":{"reason":"bad","password":"hunter2"}}`,
		wantStatus: 400, wantCode: CodeClientError, wantAction: ActionFixRequest,
		wantDetail: `{"reason":"bad","password":"[redacted]"}`,
	},
	{
		name: "shape: message an array", status: 400,
		body:       `{"type":"VALIDATION_ERROR","message":["\"iban\" is invalid"]}`,
		wantStatus: 400, wantCode: CodeValidationError, wantAction: ActionFixRequest,
		wantFields: []Field{{Field: "iban", Message: `"iban" is invalid`}},
		wantDetail: `"iban" is invalid`,
	},
	{
		name: "shape: top-level array", status: 400,
		body:       `["items[0].amount must be positive"]`,
		wantStatus: 400, wantCode: CodeUpstreamError, wantAction: ActionFixRequest,
		wantDetail: "items[0].amount must be positive",
	},
	{
		name: "shape: null message", status: 404,
		body:       `{"type":"CLIENT_ERROR","message":null}`,
		wantStatus: 404, wantCode: CodeClientError, wantAction: ActionFixRequest,
		wantDetail: "",
	},
	{
		name: "shape: truncated JSON", status: 400,
		body:       `{"type":"CLIENT_ERROR","message":"abc`,
		wantStatus: 400, wantCode: CodeUpstreamError, wantAction: ActionFixRequest,
		wantDetail: "",
	},
	{
		name: "shape: invalid UTF-8 in message", status: 400,
		body:       "{\"type\":\"CLIENT_ERROR\",\"message\":\"caf\xe9 \xff bad\"}",
		wantStatus: 400, wantCode: CodeClientError, wantAction: ActionFixRequest,
		wantDetail: "-",
	},
	{
		name: "shape: secrets in message", status: 400,
		body:       `{"type":"CLIENT_ERROR","message":"Redirect url https://evil.example.com/cb?code=1 not allowed for Bearer abc.def"}`,
		wantStatus: 400, wantCode: CodeClientError, wantAction: ActionFixRequest,
		wantDetail: "Redirect url [url] not allowed for Bearer [redacted]",
	},
	{
		name: "shape: huge body", status: 400,
		body:       `{"type":"CLIENT_ERROR","message":"` + strings.Repeat("word ", 30000) + `"}`,
		wantStatus: 400, wantCode: CodeUpstreamError, wantAction: ActionFixRequest, // cut at 64 KiB: broken JSON
		wantDetail: "",
	},
}

func TestFromUpstream(t *testing.T) {
	for _, tc := range upstreamCases {
		t.Run(tc.name, func(t *testing.T) {
			p := FromUpstream(tc.status, tc.header, []byte(tc.body))
			if p == nil {
				t.Fatal("got nil, want a problem")
			}
			if p.Status != tc.wantStatus {
				t.Errorf("status: got %d, want %d", p.Status, tc.wantStatus)
			}
			if p.Code != tc.wantCode {
				t.Errorf("code: got %q, want %q", p.Code, tc.wantCode)
			}
			if p.Action != tc.wantAction {
				t.Errorf("action: got %q, want %q", p.Action, tc.wantAction)
			}
			if p.Retryable != tc.wantRetry {
				t.Errorf("retryable: got %v, want %v", p.Retryable, tc.wantRetry)
			}
			if !reflect.DeepEqual(p.Fields, tc.wantFields) {
				t.Errorf("fields: got %#v, want %#v", p.Fields, tc.wantFields)
			}
			if got := number(t, p, "cost"); !reflect.DeepEqual(got, tc.wantCost) {
				t.Errorf("cost: got %v, want %v", fmtPtr(got), fmtPtr(tc.wantCost))
			}
			if got := number(t, p, "balance"); !reflect.DeepEqual(got, tc.wantBal) {
				t.Errorf("balance: got %v, want %v", fmtPtr(got), fmtPtr(tc.wantBal))
			}
			if len(p.Ext) > 0 && p.Code != CodeInsufficientCredits {
				t.Errorf("extension members %v on %s, want them on INSUFFICIENT_CREDITS only", p.Ext, p.Code)
			}
			if p.RetryAfter != tc.wantRA {
				t.Errorf("Retry-After: got %q, want %q", p.RetryAfter, tc.wantRA)
			}
			if tc.wantDetail != "-" && p.Detail != tc.wantDetail {
				t.Errorf("detail: got %q, want %q", p.Detail, tc.wantDetail)
			}
			if p.Type != TypeURI(p.Code) {
				t.Errorf("type: got %q, want %q", p.Type, TypeURI(p.Code))
			}
			if p.Title == "" {
				t.Error("title: got empty, want one")
			}
			var ue *UpstreamError
			if !errors.As(p, &ue) || ue.Status != tc.status {
				t.Errorf("Err: got %v, want an *UpstreamError with status %d", p.Err, tc.status)
			}
			checkEnvelope(t, p, tc.body)
		})
	}
}

// number is p's extension member name, a float64, or nil when p has none.
func number(t *testing.T, p *Problem, name string) *float64 {
	t.Helper()
	for _, m := range p.Ext {
		if m.Name == name {
			f, ok := m.Value.(float64)
			if !ok {
				t.Fatalf("extension member %s is %T, want a float64", name, m.Value)
			}
			return &f
		}
	}
	return nil
}

func fmtPtr(f *float64) any {
	if f == nil {
		return nil
	}
	return *f
}

// checkEnvelope asserts what holds for every FromUpstream result.
func checkEnvelope(t *testing.T, p *Problem, body string) {
	t.Helper()
	if p.Status < 400 || p.Status > 599 {
		t.Errorf("status: got %d, want 400..599", p.Status)
	}
	if !reCode.MatchString(p.Code) {
		t.Errorf("code: got %q, want a well-formed code", p.Code)
	}
	if p.Action == "" || p.Title == "" {
		t.Errorf("action %q, title %q: want both set", p.Action, p.Title)
	}
	out, err := json.Marshal(p)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	if !json.Valid(out) {
		t.Fatalf("marshal: got invalid JSON %q", out)
	}
	if strings.Contains(string(out), "<html") || strings.Contains(string(out), "<script") || strings.Contains(string(out), `\u003chtml`) || strings.Contains(string(out), `\u003cscript`) {
		t.Errorf("body %q: markup leaked from %q", out, body)
	}
	if len([]rune(p.Detail)) > maxDetailRunes {
		t.Errorf("detail: got %d runes, want at most %d", len([]rune(p.Detail)), maxDetailRunes)
	}
}

func TestFromUpstreamNilHeaderAndBody(t *testing.T) {
	p := FromUpstream(400, nil, nil)
	if p == nil || p.Code != CodeUpstreamError || p.Status != 400 {
		t.Fatalf("got %+v, want 400 UPSTREAM_ERROR", p)
	}
}

// BenchmarkFromUpstream measures the common case: a 400 whose message is a
// stringified list of validation errors.
func BenchmarkFromUpstream(b *testing.B) {
	body := []byte(`{"type":"VALIDATION_ERROR","message":"[\"\\\"clientSecret\\\" is required\",\"paymentInformation should not be empty\"]"}`)
	b.ReportAllocs()
	for b.Loop() {
		p := FromUpstream(http.StatusBadRequest, nil, body)
		if len(p.Fields) != 2 {
			b.Fatalf("got %d fields, want 2", len(p.Fields))
		}
	}
}

func TestFromUpstreamNeverLeaks(t *testing.T) {
	const hex = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b"
	tests := []struct {
		name, body, secret string
	}{
		{"JWT in message", `{"type":"CLIENT_ERROR","message":"bad token ` + testJWT + `"}`, testJWT},
		{"JWT in a 401 OAuth body", `{"message":"{\"error\":\"invalid_token\",\"error_description\":\"token ` + testJWT + ` expired\"}"}`, testJWT},
		{"JWT as a quoted field", `{"type":"VALIDATION_ERROR","message":"[\"\\\"` + testJWT + `\\\" is invalid\"]"}`, testJWT},
		{"JWT split by a zero-width space", "{\"message\":\"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.\u200beyJzdWIiOiIxIn0.c2lnbmF0dXJl\"}", "eyJzdWIiOiIxIn0"},
		{"URL with escaped slashes", `{"message":"see http:\/\/10.0.0.7:8080\/admin"}`, "10.0.0.7"},
		{"URL in plain text, escaped slashes kept", `see http:\/\/internal.svc.cluster.local\/x`, "internal.svc"},
		{"URL in an HTML title", `<html><title>Error at https://gw.internal.example.com/x</title></html>`, "gw.internal"},
		{"HTML body text", `<html><body>secret page ` + hex + `</body></html>`, "secret page"},
		{"hex in type", `{"type":"A` + strings.ToUpper(hex) + `","message":"x"}`, strings.ToUpper(hex)},
		{"password in an object message", `{"message":{"password":"hunter2","why":"bad"}}`, "hunter2"},
		{"Bearer in Python list", `{"type":"CLIENT_ERROR","message":"['header is Bearer abc.def', 'amount is required']"}`, "abc.def"},
		{"secret in an unknown key", `{"message":"m","debug":"` + hex + `"}`, hex},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, status := range []int{400, 401, 403, 423, 500, 503} {
				p := FromUpstream(status, nil, []byte(tc.body))
				out, _ := json.Marshal(p)
				if strings.Contains(string(out), tc.secret) {
					t.Errorf("status %d: %s contains %q", status, out, tc.secret)
				}
			}
		})
	}
}

// In development the upstream's own message comes along as
// "upstreamMessage", its URLs' paths kept and their hosts not; the detail
// stays cleaned, and nothing else carries it.
func TestWithUpstreamMessage(t *testing.T) {
	body := []byte(`{"type":"CLIENT_ERROR","message":"Redirect url http://localhost:3000/payment-done is not allowed for this organization"}`)
	p := FromUpstream(400, http.Header{}, body)
	if strings.Contains(p.Detail, "localhost:3000") {
		t.Fatalf("the detail holds the URL: %q", p.Detail)
	}
	if strings.Contains(p.Err.Error(), "localhost") {
		t.Fatalf("the cause (logged) holds the message: %q", p.Err.Error())
	}
	dev := WithUpstreamMessage(p)
	rec := httptest.NewRecorder()
	Write(rec, dev, "req-1")
	var got map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got["upstreamMessage"] != "Redirect url [host]/payment-done is not allowed for this organization" {
		t.Fatalf("upstreamMessage = %v, want the path without the host", got["upstreamMessage"])
	}
	if len(p.Ext) != 0 {
		t.Fatal("WithUpstreamMessage changed the problem it was given")
	}
	if q := WithUpstreamMessage(New(CodeRouteNotFound, "no route")); len(q.Ext) != 0 {
		t.Fatal("a problem of the BFF's own got an upstream message")
	}
	secret := WithUpstreamMessage(FromUpstream(400, http.Header{}, []byte(`{"type":"CLIENT_ERROR","message":"Redirect url https://app.example/cb?code=s3cr3t-code not allowed for Bearer abc.def.ghi"}`)))
	if len(secret.Ext) != 1 {
		t.Fatalf("got %v, want the message with its URL", secret.Ext)
	}
	if msg := secret.Ext[0].Value.(string); !strings.Contains(msg, "[host]/cb?[redacted]") || strings.Contains(msg, "app.example") || strings.Contains(msg, "s3cr3t-code") || strings.Contains(msg, "abc.def.ghi") {
		t.Fatalf("upstreamMessage = %q, want the URL's path without its host and query, and no Bearer value", msg)
	}
	plain := FromUpstream(400, http.Header{}, []byte(`{"type":"CLIENT_ERROR","message":"Payment id \"x\" is not valid"}`))
	if q := WithUpstreamMessage(plain); len(q.Ext) != 0 {
		t.Fatal("a message cleaning left whole was repeated as upstreamMessage")
	}
}

// No upstream address reaches a body in any env (docs/errors.md): the
// detail drops a URL whole, and development's upstreamMessage keeps only
// its path, whatever form the address takes.
func TestUpstreamMessageNamesNoHost(t *testing.T) {
	cases := []struct {
		name, message, wantDev string
		hosts                  []string
	}{
		{"IPv4 with port, and scheme-relative",
			"Redirect url http://10.1.2.3:8080/x is not allowed; nor is //internal.host/x",
			"Redirect url [host]/x is not allowed; nor is [host]/x", []string{"10.1.2.3", "internal.host", "8080"}},
		{"IPv6 literal", "callback http://[fd00::1]:8080/x refused",
			"callback [host]/x refused", []string{"fd00", "8080"}},
		{"userinfo", "cannot reach https://user:pa55@internal.host:8443/hook?sig=abc",
			"cannot reach [host]/hook?[redacted]", []string{"user", "pa55", "internal.host", "8443", "sig=abc"}},
		{"userinfo holding a slash", "cannot reach https://user:p/ss@internal.host/hook",
			"cannot reach [host]/hook", []string{"p/ss", "internal.host"}},
		{"scheme-relative with userinfo", "see //user:pw@internal.host/x",
			"see [host]/x", []string{"user:pw", "internal.host"}},
		{"scheme-relative IPv6", "see //[fd00::1]:8080/x", "see [host]/x", []string{"fd00", "8080"}},
		{"bare IPv6 literal", "dial [fd00::1]:8080 failed", "dial [host] failed", []string{"fd00", "8080"}},
		{"a URL inside the path", "redirect http://a.example/r/http://10.1.2.3:8080/x refused",
			"redirect [host]/r/[host]/x refused", []string{"a.example", "10.1.2.3"}},
		{"host and path without scheme", "POST internal.host:8080/v2/x failed",
			"POST [host]/v2/x failed", []string{"internal.host", "8080"}},
		{"localhost", "redirect localhost:3000/done refused", "redirect [host]/done refused", []string{"localhost", "3000"}},
		{"bare IPv4", "from 10.1.2.3 denied", "from [host] denied", []string{"10.1.2.3"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body, _ := json.Marshal(map[string]string{"type": "CLIENT_ERROR", "message": tc.message})
			p := FromUpstream(400, http.Header{}, body)
			for _, dev := range []bool{false, true} {
				q := p
				if dev {
					q = WithUpstreamMessage(p)
				}
				rec := httptest.NewRecorder()
				Write(rec, q, "req-1")
				for _, h := range tc.hosts {
					if strings.Contains(rec.Body.String(), h) {
						t.Errorf("development %v: the body names %q: %s", dev, h, rec.Body)
					}
				}
			}
			if got := cleanKeepingURLs(tc.message); got != tc.wantDev {
				t.Errorf("cleanKeepingURLs(%q) = %q, want %q", tc.message, got, tc.wantDev)
			}
		})
	}
}
