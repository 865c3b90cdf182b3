//go:build integration

package edge

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/proxy"
	"github.com/fintech-bff/bff/internal/session"
	"github.com/fintech-bff/bff/internal/upstreamsim"
)

// An upstream error naming its own addresses reaches the client, through
// the real forwarder and the edge's renderer, without them in either env:
// development's upstreamMessage keeps the paths only (docs/errors.md).
func TestUpstreamAddressesStayOutOfBodies(t *testing.T) {
	sim := upstreamsim.New(upstreamsim.Options{})
	up := httptest.NewServer(sim)
	defer up.Close()
	sim.InjectFault(upstreamsim.Fault{PathPrefix: "/v2/providers", Status: 400,
		Body: `{"type":"CLIENT_ERROR","message":"Redirect url http://10.1.2.3:8080/x is not allowed, nor //internal.host/x"}`})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, sessions, cookies := liveSessions(ctx, t)
	id, _, err := sessions.Create(ctx, session.New{UserID: "alice", Method: session.MethodDev})
	if err != nil {
		t.Fatal(err)
	}
	ck, _ := cookies.New(id)
	base, _ := url.Parse(up.URL)
	for _, dev := range []bool{false, true} {
		fwd := proxy.New(proxy.Options{
			BaseURL: base, Routes: proxy.NewRoutes([]proxy.Route{{Prefix: "/v2/providers", Methods: []string{"GET"}}}),
			Tokens: fixedToken{}, Timeout: 5 * time.Second, MaxBodyBytes: 1 << 20, Retry: proxy.Retry{MaxAttempts: 1},
		})
		e := NewPublic(Deps{
			Observability: Observability{Logger: slog.New(slog.DiscardHandler)},
			Sessions:      Sessions{Manager: sessions, Cookies: cookies, Tokens: noTokens{}},
			Clients:       Clients{PublicOrigin: "http://bff.local"},
			API:           API{Forwarder: fwd, Development: dev},
		})
		r := httptest.NewRequest("GET", "http://bff.local/api/v2/providers", nil)
		r.AddCookie(ck)
		w := httptest.NewRecorder()
		e.ServeHTTP(w, r)
		var v map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil || w.Code != 400 || v["code"] != "CLIENT_ERROR" {
			t.Fatalf("development %v: got %d %s, want 400 CLIENT_ERROR", dev, w.Code, w.Body)
		}
		for _, host := range []string{"10.1.2.3", "internal.host", "8080"} {
			if strings.Contains(w.Body.String(), host) {
				t.Errorf("development %v: the body names %q: %s", dev, host, w.Body)
			}
		}
		if msg, _ := v["upstreamMessage"].(string); dev && msg != "Redirect url [host]/x is not allowed, nor [host]/x" {
			t.Errorf("upstreamMessage = %q, want the paths without their hosts", msg)
		}
	}
}
