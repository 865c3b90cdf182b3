//go:build integration

package e2e

import (
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/testing/redistest"
)

// revocationSessions is how many sessions TestRevocationWinsOnEveryInstance
// ends (BFF_REVOCATION_SESSIONS; make chaos runs 1,000).
func revocationSessions(t *testing.T) int {
	if v := os.Getenv("BFF_REVOCATION_SESSIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 3 {
			t.Fatalf("BFF_REVOCATION_SESSIONS=%q: want a number of at least 3", v)
		}
		return n
	}
	return 150
}

// Revocation wins at once on every instance: three instances under read
// load, each session warmed on all three (so each holds a local copy),
// ended on one of them (logout, logout everywhere, the operator's
// revocation, in turn), then used on the other two the moment the
// revocation answered: never served. Also with one instance frozen
// (SIGSTOP) while another revokes: the revocation waits for that instance's
// lease, and the frozen instance, once woken, does not serve it.
func TestRevocationWinsOnEveryInstance(t *testing.T) {
	a := start(t, options{})
	b, c := a.another(options{}), a.another(options{})
	instances := []*env{a, b, c}
	n := revocationSessions(t)

	tokens := make([]string, n)
	for i := range tokens {
		tokens[i] = instances[i%3].browser().login(fmt.Sprintf("rev-%d", i))
	}
	status := func(e *env, token string) int {
		r, err := e.app(token).try("GET", "/auth/session", "")
		if err != nil {
			t.Fatal(err)
		}
		return r.status
	}
	for i, tok := range tokens {
		for _, e := range instances {
			for k := 0; k < 2; k++ { // the second is served from the local copy
				if s := status(e, tok); s != 200 {
					t.Fatalf("warming session %d: got %d", i, s)
				}
			}
		}
	}

	// Read load on every instance meanwhile, with sessions of their own.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads atomic.Int64
	for k := 0; k < 4; k++ {
		tok := a.browser().login(fmt.Sprintf("reader-%d", k))
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_ = status(instances[k%3], tok)
				reads.Add(1)
			}
		})
	}

	var latencies []time.Duration
	served := 0
	for i, tok := range tokens {
		by := instances[i%3]
		others := []*env{instances[(i+1)%3], instances[(i+2)%3]}
		start := time.Now()
		switch i % 3 {
		case 0:
			if r := by.app(tok).do("POST", "/auth/logout", ""); r.status != 204 {
				t.Fatalf("logout: got %d %s", r.status, r.body)
			}
		case 1:
			if r := by.app(tok).do("DELETE", "/auth/sessions", ""); r.status != 204 {
				t.Fatalf("logout everywhere: got %d %s", r.status, r.body)
			}
		case 2:
			resp := by.adminDo("DELETE", fmt.Sprintf("/users/rev-%d/sessions", i))
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("operator revocation: got %d", resp.StatusCode)
			}
		}
		latencies = append(latencies, time.Since(start))
		var mu sync.Mutex
		var checks sync.WaitGroup
		for _, e := range others {
			checks.Go(func() {
				if s := status(e, tok); s != 401 {
					mu.Lock()
					served++
					mu.Unlock()
					t.Errorf("session %d, ended on one instance, was answered %d by another right after", i, s)
				}
			})
		}
		checks.Wait()
	}
	close(stop)
	wg.Wait()
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	t.Logf("%d sessions ended on one of 3 instances under %d concurrent reads: %d served afterwards by another; revocation latency p50 %v, p99 %v, max %v",
		n, reads.Load(), served, latencies[len(latencies)/2], latencies[len(latencies)*99/100], latencies[len(latencies)-1])

	t.Run("one instance frozen while another revokes", func(t *testing.T) {
		tok := a.browser().login("frozen-victim")
		for k := 0; k < 2; k++ {
			if s := status(c, tok); s != 200 {
				t.Fatalf("warming: got %d", s)
			}
		}
		if err := c.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		r := a.app(tok).do("POST", "/auth/logout", "")
		took := time.Since(start)
		if err := c.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		if r.status != 204 {
			t.Fatalf("logout: got %d", r.status)
		}
		if s := status(c, tok); s != 401 {
			t.Fatalf("the frozen instance, woken after the logout answered, served the session: got %d", s)
		}
		t.Logf("logout with an instance frozen took %v (the frozen instance's lease)", took)
	})
}

// cutProxy forwards TCP connections to target until cut: then every
// connection through it is closed and new ones are refused, until mended.
type cutProxy struct {
	t      *testing.T
	addr   string
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	p := &cutProxy{t: t, target: target, conns: map[net.Conn]struct{}{}}
	p.listen("127.0.0.1:0")
	t.Cleanup(p.cut)
	return p
}

func (p *cutProxy) listen(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.relay(c)
		}
	}()
}

func (p *cutProxy) relay(c net.Conn) {
	up, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	go func() { _, _ = io.Copy(up, c); up.Close(); c.Close() }()
	_, _ = io.Copy(c, up)
	up.Close()
	c.Close()
}

// cut closes every connection and stops accepting.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
}

// mend accepts again on the same address.
func (p *cutProxy) mend() { p.listen(p.addr) }

// An instance cut off from Redis (its subscription, its tracking and its
// lease's renewal all gone) is waited for until its lease runs out, and
// then serves nothing from its copies: it answers 503 while Redis is out of
// its reach, and once back it has dropped its copies and refuses the
// revoked session.
func TestRevocationWithAnInstanceCutOffFromRedis(t *testing.T) {
	a := start(t, options{})
	proxy := startCutProxy(t, redistest.Addr())
	c := a.another(options{redisAddr: proxy.addr})
	tok := a.browser().login("cut-off")
	status := func(e *env) int {
		r, err := e.app(tok).try("GET", "/auth/session", "")
		if err != nil {
			t.Fatal(err)
		}
		return r.status
	}
	for k := 0; k < 2; k++ {
		if s := status(c); s != 200 {
			t.Fatalf("warming: got %d", s)
		}
	}
	proxy.cut()
	start := time.Now()
	if r := a.app(tok).do("POST", "/auth/logout", ""); r.status != 204 {
		t.Fatalf("logout: got %d", r.status)
	}
	took := time.Since(start)
	if s := status(c); s == 200 {
		t.Fatal("the cut-off instance served the session after the logout answered")
	}
	proxy.mend()
	eventually(t, 15*time.Second, func() error {
		switch s := status(c); s {
		case 401:
			return nil
		case 200:
			t.Fatal("the instance, back in reach of Redis, served the revoked session")
			return nil
		default:
			return fmt.Errorf("the instance still answers %d after Redis came back, want 401", s)
		}
	})
	t.Logf("logout with an instance cut off from Redis took %v", took)
}
