//go:build integration

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

	"github.com/fintech-bff/bff/internal/testing/syncbuf"
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
	cfg := lbConfig(t, addr, relay, servers.String())
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
	if err := poll(10*time.Second, func() error {
		resp, err := http.Get(l.url + "/auth/session")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			return fmt.Errorf("GET /auth/session: got %d, want 401", resp.StatusCode)
		}
		return nil
	}); err != nil {
		t.Fatalf("haproxy not serving: %v\n%s", err, l.logs)
	}
	return l
}

// lbConfig is deploy/haproxy.cfg, the shipped configuration, with only
// what names the compose deployment replaced: the listening address, the
// relay's socket, the servers (checked every 100 ms, so a test does not
// wait seconds), and no Docker resolver or stats page. Every rule in it (the
// headers it sets and strips, retries, the relay, the problem+json
// errors) is the one tested. A replacement that no longer matches fails
// the test: the shipped file changed shape and this must follow.
func lbConfig(t *testing.T, addr, relay, servers string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "deploy", "haproxy.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(b)
	replace := func(old, new string, n int) {
		t.Helper()
		if got := strings.Count(cfg, old); got != n {
			t.Fatalf("deploy/haproxy.cfg holds %q %d times, want %d: update lbConfig", old, got, n)
		}
		cfg = strings.ReplaceAll(cfg, old, new)
	}
	cut := func(from, to string) {
		t.Helper()
		i := strings.Index(cfg, from)
		j := strings.Index(cfg[max(i, 0):], to)
		if i < 0 || j < 0 {
			t.Fatalf("deploy/haproxy.cfg has no %q ... %q: update lbConfig", from, to)
		}
		cfg = cfg[:i] + cfg[i+j+len(to):]
	}
	replace("    bind :8080\n", "    bind "+addr+"\n", 1)
	replace("abns@bff-relayed", "abns@"+relay, 2)
	cut("resolvers docker\n", "\n\n")
	cut("    default-server check port 9090", "\n")
	cut("    server bff1 bff1:8080\n", "    server bff2 bff2:8080\n")
	cut("frontend stats\n", "stats refresh 5s\n")
	replace("    log stdout format raw local0 info\n", "", 1)
	return cfg + "\n    # the test's instances\n" + servers
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
		// The load runs before an instance stops, and goes on after it
		// stopped (a failure ends the wait: it is reported below).
		served := func(more int64) {
			t.Helper()
			want := ok.Load() + more
			if err := poll(15*time.Second, func() error {
				if n := ok.Load(); n < want && failed.Load() == 0 {
					return fmt.Errorf("%d requests served, want %d", n, want)
				}
				return nil
			}); err != nil {
				t.Error(err)
			}
		}
		served(20)
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
		served(20)
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
