package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/syncbuf"
)

// lb is HAProxy (Debian's package) in front of several BFF instances:
// round-robin, health-checked on each instance's /readyz.
type lb struct {
	url  string
	logs *syncbuf.Buffer
}

func startLB(t *testing.T, instances []*env) *lb {
	t.Helper()
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		t.Fatalf("haproxy is needed for the load-balancer tests: apt-get install -y haproxy")
	}
	addr := freeAddr(t)
	// The abstract socket's name is the machine's: one per load balancer.
	relay := "bff-relayed-" + strings.ReplaceAll(addr, ":", "-")
	var servers strings.Builder
	for i, e := range instances {
		adminPort := e.admin[strings.LastIndex(e.admin, ":")+1:]
		fmt.Fprintf(&servers, "    server bff%d %s check port %s inter 100ms fall 2 rise 2\n", i, strings.TrimPrefix(e.public, "http://"), adminPort)
	}
	cfg := fmt.Sprintf(`global
    maxconn 1024
defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s
    # Without it the whole check must answer within inter (100 ms), and a
    # loaded machine took healthy instances out. A draining instance
    # answers 503 at once, so fall 2 still takes it out in about 200 ms,
    # well inside its 1 s shutdown_delay.
    timeout check 2s
    retries 3
    option redispatch
    # As deploy/haproxy.cfg: retry only a request that never reached an
    # instance (a POST that reached one may have moved money), and answer
    # HAProxy's own errors in the BFF's problem+json envelope.
    retry-on conn-failure
    unique-id-format %%[uuid()]
    http-error status 502 content-type "application/problem+json" hdr Cache-Control "no-store" hdr X-Content-Type-Options "nosniff" hdr X-Request-Id "%%[unique-id]" lf-string '{"type":"urn:bff:problem:UPSTREAM_UNREACHABLE","title":"Bad gateway","status":502,"detail":"the instance failed while handling the request; a payment retried with the same Idempotency-Key is never run twice","code":"UPSTREAM_UNREACHABLE","action":"retry_later","retryable":true,"requestId":"%%[unique-id]"}'
    http-error status 503 content-type "application/problem+json" hdr Cache-Control "no-store" hdr X-Content-Type-Options "nosniff" hdr X-Request-Id "%%[unique-id]" lf-string '{"type":"urn:bff:problem:UPSTREAM_UNAVAILABLE","title":"Service temporarily unavailable","status":503,"detail":"no BFF instance is available; retry shortly","code":"UPSTREAM_UNAVAILABLE","action":"retry_later","retryable":true,"requestId":"%%[unique-id]"}'
    http-error status 504 content-type "application/problem+json" hdr Cache-Control "no-store" hdr X-Content-Type-Options "nosniff" hdr X-Request-Id "%%[unique-id]" lf-string '{"type":"urn:bff:problem:UPSTREAM_TIMEOUT","title":"Gateway timeout","status":504,"detail":"the instance did not answer in time; a payment retried with the same Idempotency-Key is never run twice","code":"UPSTREAM_TIMEOUT","action":"retry_later","retryable":true,"requestId":"%%[unique-id]"}'
frontend public
    bind %s
    http-request set-header X-Request-Id %%[unique-id]
    default_backend relay
# As deploy/haproxy.cfg: every request reaches an instance as the first of
# its own connection, so an instance that dies mid-request is answered with
# the 502 above, never a silent close that a client would resend.
backend relay
    server relayed abns@%s
    timeout server 90s
frontend relayed
    bind abns@%s
    option httpclose
    unique-id-format %%[req.hdr(X-Request-Id)]
    default_backend bff
backend bff
    balance roundrobin
    option httpchk GET /readyz
    http-check expect status 200
%s`, addr, relay, relay, servers.String())
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	l := &lb{url: "http://" + addr, logs: &syncbuf.Buffer{}}
	registerFront(t, l.url)
	cmd := exec.Command(bin, "-f", path, "-db")
	cmd.Stdout, cmd.Stderr = l.logs, l.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(l.url + "/auth/session")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 401 {
				return l
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("haproxy not serving after 10s:\n%s", l.logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// through returns a client of the deployment that goes through the LB.
func (l *lb) through(e *env) *env {
	c := *e
	c.public = l.url
	return &c
}

func TestBehindALoadBalancer(t *testing.T) {
	a := start(t, options{drainDelay: "1s"})
	instances := []*env{a, a.another(options{drainDelay: "1s"}), a.another(options{drainDelay: "1s"})}
	l := startLB(t, instances)
	front := l.through(a)

	t.Run("a session made through one instance works on all", func(t *testing.T) {
		b := front.browser()
		b.login("lb-user")
		for i := 0; i < 9; i++ {
			if r := b.do("GET", "/api/v2/providers", ""); r.status != 200 {
				t.Fatalf("call %d: got %d %s", i, r.status, r.body)
			}
		}
		for _, e := range instances { // each instance served some (its log is batched: wait)
			waitLog(t, e, `"route":"/api/v2/providers"`)
		}
	})

	t.Run("a fresh user's concurrent first requests mint once", func(t *testing.T) {
		token := front.browser().login("lb-fresh")
		var wg sync.WaitGroup
		var failed atomic.Int64
		for i := 0; i < 30; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if r := front.app(token).do("GET", "/api/v2/data/accounts", ""); r.status != 200 {
					failed.Add(1)
				}
			}()
		}
		wg.Wait()
		if failed.Load() != 0 || a.sim.Mints("lb-fresh") != 1 {
			t.Fatalf("got %d failures and %d mints, want 0 and 1", failed.Load(), a.sim.Mints("lb-fresh"))
		}
	})

	t.Run("an instance stopped under load loses no request", func(t *testing.T) {
		token := front.browser().login("lb-load")
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var ok, failed atomic.Int64
		var firstFailure atomic.Value
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := front.app(token)
				for i := 0; i < 2000; i++ {
					select {
					case <-stop:
						return
					default:
					}
					if r := c.do("GET", "/api/v2/providers", ""); r.status == 200 {
						ok.Add(1)
					} else {
						failed.Add(1)
						firstFailure.CompareAndSwap(nil, fmt.Sprintf("%d %s", r.status, r.body))
					}
				}
			}()
		}
		time.Sleep(500 * time.Millisecond)
		victim := instances[1]
		victim.terminate()
		select {
		case err := <-victim.exited:
			victim.cmd = nil
			if err != nil {
				t.Errorf("the stopped instance exited with %v, want 0", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("the stopped instance did not exit")
		}
		time.Sleep(500 * time.Millisecond)
		close(stop)
		wg.Wait()
		t.Logf("%d requests succeeded, %d failed while an instance drained and stopped", ok.Load(), failed.Load())
		if failed.Load() != 0 {
			t.Fatalf("%d requests failed (first: %v)", failed.Load(), firstFailure.Load())
		}
		if ok.Load() < 20 {
			t.Fatalf("only %d requests ran: the load checked nothing", ok.Load())
		}
	})
}
