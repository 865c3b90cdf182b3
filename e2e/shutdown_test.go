//go:build integration

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/upstreamsim"
)

// SIGTERM: /readyz turns 503 at once, requests in flight (a slow upstream
// call) finish successfully, then the process exits 0 (checked by stop).
func TestGracefulShutdownFinishesInFlight(t *testing.T) {
	e := start(t, options{drainDelay: "500ms"})
	b := e.browser()
	b.login("drain")
	b.do("GET", "/api/v2/providers", "") // token cached
	e.sim.InjectFault(upstreamsim.Fault{PathPrefix: "/v2/data/accounts", Delay: 1500 * time.Millisecond})
	done := make(chan reply, 1)
	go func() { done <- b.do("GET", "/api/v2/data/accounts", "") }()
	waitForRequest(t, e.sim, "GET", "/v2/data/accounts") // the request is now waiting on the upstream
	e.terminate()
	eventually(t, 2*time.Second, func() error {
		resp, err := http.Get(e.admin + "/readyz")
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 503 {
			return fmt.Errorf("/readyz answers %d after SIGTERM, want 503", resp.StatusCode)
		}
		return nil
	})
	select {
	case r := <-done:
		if r.status != 200 {
			t.Fatalf("the in-flight request got %d %s, want 200", r.status, r.body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the in-flight request did not finish")
	}
	waitLog(t, e, `"msg":"stopped"`)
}
