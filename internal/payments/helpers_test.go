package payments_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
	"github.com/fintech-bff/bff/internal/tokens"
)

var contractRoutes = []proxy.Route{
	{Prefix: "/v2/payments", Methods: []string{"GET", "POST", "DELETE"}},
	{Prefix: "/v2/pay", Methods: []string{"POST"}},
	{Prefix: "/v2/connections", Methods: []string{"GET", "POST", "DELETE"}},
	{Prefix: "/chat/chat/connections/refresh", Methods: []string{"POST"}},
	{Prefix: "/v2/merchants", Methods: []string{"GET", "POST", "PUT", "DELETE"}},
}

// fakeTokens hands out "tok-<user>-<generation>" and counts invalidations.
type fakeTokens struct {
	gen         atomic.Int64
	invalidated atomic.Int64
}

func (f *fakeTokens) Token(_ context.Context, userID string) (tokens.Token, error) {
	return tokens.Token{Value: fmt.Sprintf("tok-%s-%d", userID, f.gen.Load()), Expiry: time.Now().Add(time.Hour)}, nil
}

func (f *fakeTokens) InvalidateToken(context.Context, string, string) error {
	f.invalidated.Add(1)
	f.gen.Add(1)
	return nil
}

// serve dispatches a call as the edge does: the route, then payments for
// what it handles and the proxy for the rest, a failure rendered as the
// envelope. It fails the test when a call fails after writing.
func serve(t testing.TB, fwd *proxy.Forwarder, svc *payments.Service, w http.ResponseWriter, r *http.Request, c proxy.Call) {
	t.Helper()
	target, p := fwd.Target(c, r.Method)
	var err error
	switch {
	case p != nil:
		err = p
	case svc.Handles(target, r.Method):
		_, err = svc.Serve(w, r, c, target)
	default:
		_, err = fwd.Forward(w, r, c, target)
	}
	if err == nil {
		return
	}
	pr, ok := err.(*problem.Problem)
	if !ok {
		t.Fatalf("the call failed with %T %v, not a *problem.Problem", err, err)
	}
	if rec, ok := w.(*httptest.ResponseRecorder); ok && (len(rec.Header()) > 0 || rec.Body.Len() > 0) {
		t.Fatalf("the call wrote a response (%v) and failed with %v", rec.Header(), err)
	}
	problem.Write(w, pr, c.RequestID)
}

func decodeProblem(t *testing.T, w *httptest.ResponseRecorder) problem.Problem {
	t.Helper()
	if ct := w.Header().Get("Content-Type"); ct != problem.ContentType {
		t.Fatalf("got %d Content-Type %q, want %q (body %s)", w.Code, ct, problem.ContentType, w.Body)
	}
	var p problem.Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// counter counts upstream requests by method and path.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) add(r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[r.Method+" "+r.URL.Path]++
}

func (c *counter) get(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[k]
}

func newPaymentRequest() *http.Request {
	r := httptest.NewRequest(http.MethodPost, "http://bff.local/api/v2/payments", strings.NewReader(`{"paymentInformation":{"amount":1}}`))
	r.Header.Set("Content-Type", "application/json")
	return r
}

func httpRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }

func serveAlice(t *testing.T, f *moneyFixture, w http.ResponseWriter, r *http.Request) {
	t.Helper()
	serve(t, f.fwd, f.svc, w, r, proxy.Call{UserID: "alice", RequestID: "req-123", Path: strings.TrimPrefix(r.URL.Path, "/api")})
}
