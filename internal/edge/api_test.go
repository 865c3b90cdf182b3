package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
	"github.com/fintech-bff/bff/internal/session"
	"github.com/fintech-bff/bff/internal/syncbuf"
)

// The proxy's failures reach the client through the edge's one renderer:
// the envelope with the request id, the code in the access log, the
// failures an operator acts on logged once with a cause that names no
// address or query, and a replayed refusal logged with its code.
func TestAPIFailuresAreRenderedByTheEdge(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Query().Get("hangup") != "":
			c, _, _ := http.NewResponseController(w).Hijack()
			_ = c.Close()
		case r.Method == http.MethodPost:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			_, _ = io.WriteString(w, `{"type":"VALIDATION_ERROR","message":"[\"paymentInformation should not be empty\"]"}`)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(404)
			_, _ = io.WriteString(w, `{"type":"CLIENT_ERROR","message":"Payment ID not valid"}`)
		}
	}))
	defer upstream.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, sessions, cookies := liveSessions(ctx, t)
	led, err := ledger.NewMemory(time.Now, make([]byte, 32), nil)
	if err != nil {
		t.Fatal(err)
	}
	base, _ := url.Parse(upstream.URL)
	fwd := proxy.New(proxy.Options{
		BaseURL: base, Routes: proxy.NewRoutes([]proxy.Route{{Prefix: "/v2/payments", Methods: []string{"GET", "POST"}}}),
		Tokens: fixedToken{}, Timeout: 5 * time.Second, MaxBodyBytes: 1 << 20, Retry: proxy.Retry{MaxAttempts: 1},
	})
	pay := payments.New(payments.Options{Upstream: fwd, Timeout: 5 * time.Second, MoneyRoutes: []string{"/v2/payments"}, Ledger: led})
	var logs syncbuf.Buffer
	e := NewPublic(Deps{
		Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Metrics: NewMetrics(prometheus.NewRegistry()), Sessions: sessions,
		Cookies: cookies, Forwarder: fwd, Payments: pay, PublicOrigin: "http://bff.local", Tokens: noTokens{},
	})
	id, _, err := sessions.Create(ctx, session.New{UserID: "alice", Method: session.MethodDev})
	if err != nil {
		t.Fatal(err)
	}
	ck, _ := cookies.New(id)
	var out string // the log lines of the last request
	do := func(t *testing.T, method, target, key string) (*httptest.ResponseRecorder, problem.Problem, map[string]any) {
		t.Helper()
		from := len(logs.String())
		defer func() { out = logs.String()[from:] }()
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader(`{"paymentInformation":{}}`)
		}
		r := httptest.NewRequest(method, "http://bff.local"+target, body)
		r.AddCookie(ck)
		r.Header.Set("X-CSRF", "1")
		if key != "" {
			r.Header.Set("Idempotency-Key", key)
		}
		w := httptest.NewRecorder()
		e.ServeHTTP(w, r)
		var p problem.Problem
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Header().Get("Content-Type") != problem.ContentType {
			t.Fatalf("%s %s: got %d %q %s, want an envelope", method, target, w.Code, w.Header().Get("Content-Type"), w.Body)
		}
		if p.RequestID == "" || p.RequestID != w.Header().Get("X-Request-Id") {
			t.Fatalf("%s %s: requestId %q, header %q", method, target, p.RequestID, w.Header().Get("X-Request-Id"))
		}
		var access map[string]any
		for _, line := range bytes.Split(bytes.TrimSpace([]byte(logs.String()[from:])), []byte("\n")) {
			var m map[string]any
			if json.Unmarshal(line, &m) == nil && m["msg"] == "request" {
				access = m
			}
		}
		// A replay is the stored answer, the first request's id in it; the
		// access line is this request's.
		replayed := w.Header().Get("Idempotent-Replayed") == "true"
		if access == nil || access["code"] != p.Code || (access["requestId"] == p.RequestID) == replayed || access["route"] != "/api/v2/payments" {
			t.Fatalf("%s %s: access line %v, want code %s, the request id and the route", method, target, access, p.Code)
		}
		return w, p, access
	}

	t.Run("an upstream refusal: the envelope and the access log, no failure line", func(t *testing.T) {
		w, p, access := do(t, "GET", "/api/v2/payments/x", "")
		if w.Code != 404 || p.Code != problem.CodeClientError || access["upstreamStatus"] != float64(404) {
			t.Fatalf("got %d %+v, access %v", w.Code, p, access)
		}
		if strings.Contains(out, "request failed") {
			t.Fatalf("a client error was logged as a failure:\n%s", out)
		}
	})

	t.Run("an upstream hang-up: one warning with a cause that names no address or query", func(t *testing.T) {
		w, p, _ := do(t, "GET", "/api/v2/payments?hangup=secret-query-value", "")
		if w.Code != 502 || p.Code != problem.CodeUpstreamUnreachable {
			t.Fatalf("got %d %+v", w.Code, p)
		}
		if n := strings.Count(out, `"msg":"request failed"`); n != 1 || !strings.Contains(out, `"level":"WARN","msg":"request failed"`) || !strings.Contains(out, `"cause":`) {
			t.Fatalf("want one WARN failure line with its cause, got %d:\n%s", n, out)
		}
		if strings.Contains(out, "secret-query-value") || strings.Contains(out, base.Host) {
			t.Fatalf("the log names the upstream address or the query:\n%s", out)
		}
	})

	t.Run("a payment's stored refusal: the same bytes again, replayed with its code", func(t *testing.T) {
		first, p1, _ := do(t, "POST", "/api/v2/payments", "pay-1")
		if first.Code != 400 || p1.Code != problem.CodeValidationError || len(p1.Fields) == 0 {
			t.Fatalf("got %d %+v", first.Code, p1)
		}
		again, p2, _ := do(t, "POST", "/api/v2/payments", "pay-1")
		if again.Header().Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.Body.Bytes(), first.Body.Bytes()) || p2.Code != p1.Code {
			t.Fatalf("the repeat: %q %s, want the first answer replayed:\n%s", again.Header().Get("Idempotent-Replayed"), again.Body, first.Body)
		}
	})
}

type noTokens struct{}

func (noTokens) Invalidate(context.Context, string) error { return nil }

// fixedToken is a TokenSource with one token for everyone.
type fixedToken struct{ staticSource }

func (fixedToken) InvalidateToken(context.Context, string, string) error { return nil }
