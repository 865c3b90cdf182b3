package edge

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/fintech-bff/bff/internal/problem"
)

// A panic in a handler is a logged 500 envelope with the request id, and
// the access log still records the request.
func TestPanicIsRecoveredAsEnvelope(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	e := echo.New()
	e.HTTPErrorHandler = errorHandler(log, false)
	e.Use(requestIDMiddleware(nil), recoverMiddleware(log), accessLog(log, nopObserver{}))
	e.GET("/boom", func(echo.Context) error { panic("kaboom") })
	w := httptest.NewRecorder()
	e.ServeHTTP(w, httptest.NewRequest("GET", "/boom", nil))
	var p problem.Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != 500 || p.Code != problem.CodeInternal {
		t.Fatalf("got %d %s, want a 500 INTERNAL envelope", w.Code, w.Body)
	}
	if p.RequestID == "" || p.RequestID != w.Header().Get("X-Request-Id") {
		t.Fatalf("got requestId %q and header %q", p.RequestID, w.Header().Get("X-Request-Id"))
	}
	if strings.Contains(w.Body.String(), "kaboom") || strings.Contains(w.Body.String(), "goroutine") {
		t.Fatal("the panic's text or stack reached the client")
	}
	if !strings.Contains(logs.String(), `"msg":"panic"`) || !strings.Contains(logs.String(), p.RequestID) || !strings.Contains(logs.String(), `"code":"INTERNAL"`) {
		t.Fatalf("logs lack the panic line with the request id or the access line's code:\n%s", logs.String())
	}
}

func TestCheckCSRF(t *testing.T) {
	a := &authn{publicOrigin: "https://app.example.com", allowedOrigins: []string{"https://spa.example.com"}}
	cases := []struct {
		method string
		hdr    map[string]string
		ok     bool
	}{
		{"GET", nil, true},
		{"HEAD", nil, true},
		{"POST", nil, false},
		{"POST", map[string]string{"X-CSRF": "1"}, true},
		{"PUT", map[string]string{"X-CSRF": "0"}, false},
		{"PATCH", map[string]string{"X-CSRF": "1", "Origin": "https://app.example.com"}, true},
		{"DELETE", map[string]string{"X-CSRF": "1", "Origin": "https://spa.example.com"}, true},
		{"DELETE", map[string]string{"X-CSRF": "1", "Origin": "https://app.example.com.evil"}, false},
		{"POST", map[string]string{"X-CSRF": "1", "Origin": "null"}, false},
		{"POST", map[string]string{"X-CSRF": "1", "Origin": "http://app.example.com"}, false},
	}
	for _, tc := range cases {
		r := httptest.NewRequest(tc.method, "/", nil)
		for k, v := range tc.hdr {
			r.Header.Set(k, v)
		}
		if got := a.checkCSRF(r) == nil; got != tc.ok {
			t.Errorf("%s %v: got ok=%v, want %v", tc.method, tc.hdr, got, tc.ok)
		}
	}
}

func TestValidRequestID(t *testing.T) {
	for s, want := range map[string]bool{
		"abc-123_X.y": true, "": false, strings.Repeat("a", 128): true, strings.Repeat("a", 129): false,
		"with space": false, "new\nline": false, "<script>": false,
	} {
		if got := validRequestID(s); got != want {
			t.Errorf("validRequestID(%q): got %v, want %v", s, got, want)
		}
	}
}

func TestCheckUserID(t *testing.T) {
	for s, ok := range map[string]bool{"alice": true, "": false, strings.Repeat("x", 257): false, "a\x00b": false, "\xff": false, "ünïcode": true} {
		if got := checkUserID(s) == ""; got != ok {
			t.Errorf("checkUserID(%q): got ok=%v, want %v", s, got, ok)
		}
	}
}

func TestSessionToken(t *testing.T) {
	for h, want := range map[string][2]string{
		"Bearer abc": {"abc", schemeBearer}, "bearer abc": {"abc", schemeBearer}, "DPoP abc": {"abc", schemeDPoP},
		"dpop  abc ": {"abc", schemeDPoP}, "Basic abc": {}, "Bearer ": {}, "DPoP ": {}, "DPoPabc": {}, "": {},
	} {
		r, _ := http.NewRequest("GET", "/", nil)
		if h != "" {
			r.Header.Set("Authorization", h)
		}
		if tok, scheme := sessionToken(r); tok != want[0] || scheme != want[1] {
			t.Errorf("sessionToken(%q): got %q %q, want %q %q", h, tok, scheme, want[0], want[1])
		}
	}
}
