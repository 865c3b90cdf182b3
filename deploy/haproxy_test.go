//go:build integration

// The checks that run haproxy itself: the shipped configuration is valid,
// and, run in front of fake instances, it answers the failures a client
// sees as problem+json and keeps a kept-alive client's connection. They
// need the haproxy binary and fail without it, as the e2e load-balancer
// tests do; the checks of haproxy.cfg's text stay in deploy_test.go.

package deploy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/testing/poll"
	"github.com/fintech-bff/bff/internal/testing/syncbuf"
)

// haproxyBin is the haproxy binary. The tests fail without it, as the e2e
// load-balancer tests do: apt-get install -y haproxy.
func haproxyBin(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("haproxy"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/sbin/haproxy", "/usr/local/sbin/haproxy"} {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	t.Fatal("haproxy is needed to check " + haproxyFile + ": apt-get install -y haproxy")
	return ""
}

func TestHAProxyConfigIsValid(t *testing.T) {
	bin := haproxyBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "-c", "-f", haproxyFile).CombinedOutput()
	if err != nil {
		t.Fatalf("haproxy -c -f %s: %v\n%s", haproxyFile, err, out)
	}
	// The compose service names (bff1, bff2) resolve only inside the
	// compose network; init-addr none lets HAProxy start without them. Any
	// other warning is a defect.
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "[WARNING]") && !strings.Contains(line, "could not resolve address") {
			t.Errorf("haproxy -c: %s", line)
		}
	}
}

// freeLocalAddrs returns n distinct 127.0.0.1 addresses nothing listens on:
// all are held open until all are chosen, so no two are the same port.
func freeLocalAddrs(t *testing.T, n int) []string {
	t.Helper()
	addrs := make([]string, n)
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		addrs[i] = ln.Addr().String()
	}
	return addrs
}

func portOf(addr string) string { return addr[strings.LastIndex(addr, ":")+1:] }

// isSocketAddr reports whether an HAProxy address is a UNIX socket (a path,
// unix@ or abns@), which HAProxy uses between its own proxies.
func isSocketAddr(addr string) bool {
	return strings.HasPrefix(addr, "/") || strings.HasPrefix(addr, "unix@") || strings.HasPrefix(addr, "abns@")
}

// shippedHAProxy is deploy/haproxy.cfg made to run here: every frontend on
// a TCP address binds a free 127.0.0.1 port, a frontend on an abstract
// socket (abns@) binds one of this run's own name (the servers that name it
// follow), every other server is instance (an address), health checks go to
// checkAddr's port, and timeout server of defaults is timeoutServer if set.
// An empty instance or checkAddr is a closed port (connections are refused).
// Everything else, the retries, the relay, the request id and the error
// answers included, is the shipped text. It returns the config and the
// address of the frontend that clients reach (a TCP bind and a
// default_backend).
func shippedHAProxy(t *testing.T, instance, checkAddr, timeoutServer string) (cfg, public string) {
	t.Helper()
	ds := haproxyDirectives(t, haproxyFile)
	tcpBinds, withDefaultBackend, publicSection := map[string]bool{}, map[string]bool{}, ""
	binds := 0
	for _, d := range ds {
		switch d.fields[0] {
		case "default_backend":
			withDefaultBackend[d.section] = true
		case "bind":
			binds++
			if len(d.fields) > 1 && !isSocketAddr(d.fields[1]) {
				tcpBinds[d.section] = true
			}
		}
	}
	for sec := range withDefaultBackend {
		if tcpBinds[sec] {
			if publicSection != "" {
				t.Fatalf("%s: two frontends clients reach: %s and %s", haproxyFile, publicSection, sec)
			}
			publicSection = sec
		}
	}
	free := freeLocalAddrs(t, binds+1)
	closed, free := free[0], free[1:]
	if instance == "" {
		instance = closed
	}
	if checkAddr == "" {
		checkAddr = closed
	}
	b, err := os.ReadFile(haproxyFile)
	if err != nil {
		t.Fatal(err)
	}
	// A socket of this run: another haproxy (a parallel test) has its own.
	sockets := map[string]string{}
	for _, d := range ds {
		if d.fields[0] == "bind" && len(d.fields) > 1 && isSocketAddr(d.fields[1]) {
			if !strings.HasPrefix(d.fields[1], "abns@") {
				t.Fatalf("%s:%d: only abstract sockets (abns@) are handled here: %s", haproxyFile, d.line, d.code)
			}
			sockets[d.fields[1]] = d.fields[1] + "-" + portOf(free[0])
		}
	}
	lines := strings.Split(string(b), "\n")
	servers := 0
	for _, d := range ds {
		f := slices.Clone(d.fields)
		switch f[0] {
		case "bind":
			if len(f) < 2 {
				t.Fatalf("%s:%d: %s", haproxyFile, d.line, d.code)
			}
			if s, ok := sockets[f[1]]; ok {
				f = []string{"bind", s}
				break
			}
			addr := free[0]
			free = free[1:]
			if d.section == publicSection {
				public = addr
			}
			f = []string{"bind", addr}
		case "server", "default-server":
			if f[0] == "server" {
				if len(f) < 3 {
					t.Fatalf("%s:%d: %s", haproxyFile, d.line, d.code)
				}
				if s, ok := sockets[f[2]]; ok {
					f[2] = s
					break
				}
				f[2] = instance
				servers++
			}
			for i := 0; i+1 < len(f); i++ {
				if f[i] == "port" {
					f[i+1] = portOf(checkAddr)
				}
			}
		case "timeout":
			if len(f) >= 3 && f[1] == "server" && timeoutServer != "" && d.section == "defaults" {
				f = []string{"timeout", "server", timeoutServer}
			}
		default:
			continue
		}
		lines[d.line-1] = "    " + strings.Join(f, " ")
	}
	if public == "" || servers == 0 {
		t.Fatalf("%s: found no frontend with a TCP bind and a default_backend, or no server", haproxyFile)
	}
	return strings.Join(lines, "\n"), public
}

// runHAProxy runs haproxy with cfg until the test ends and waits until addr
// accepts connections.
func runHAProxy(t *testing.T, cfg, addr string) *syncbuf.Buffer {
	t.Helper()
	bin := haproxyBin(t)
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	cmd := exec.Command(bin, "-f", path, "-db")
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			t.Error("haproxy did not exit after SIGKILL")
		}
	})
	if !poll.Within(10*time.Second, func() bool {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("haproxy exited: %v\n%s", err, logs)
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	}) {
		t.Fatalf("haproxy not listening on %s after 10s:\n%s", addr, logs)
	}
	return logs
}

// failure is how a fake instance fails a request other than a GET.
type failure int

const (
	hangUp   failure = iota // closes the connection (FIN) after reading it: the process died
	reset                   // resets the connection (RST) after reading it: the process died
	stall                   // reads it and never answers: HAProxy's timeout server runs out
	gone                    // is gone before it: after its first GET it stops listening
	cutShort                // starts answering it (201, headers and part of the body), then dies
)

func (f failure) String() string {
	return [...]string{"hangs up after reading the request", "resets the connection after reading the request",
		"does not answer", "is gone before the request", "dies in the middle of its answer"}[f]
}

// fakeInstance is a BFF instance that answers a GET (200, keeping the
// connection alive, as the BFF does) and fails every other request as fail
// says. It records every request it received.
type fakeInstance struct {
	addr  string
	fail  failure
	ln    net.Listener
	conns sync.Map // net.Conn → true
	wg    sync.WaitGroup
	mu    sync.Mutex
	got   []*http.Request
}

func startFakeInstance(t *testing.T, fail failure) *fakeInstance {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeInstance{addr: ln.Addr().String(), fail: fail, ln: ln}
	t.Cleanup(func() {
		f.stop()
		f.wg.Wait()
	})
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.conns.Store(c, true)
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				defer c.Close()
				f.serve(c)
			}()
		}
	}()
	return f
}

// stop closes the listener (a connection is refused) and every connection.
func (f *fakeInstance) stop() {
	f.ln.Close()
	f.conns.Range(func(c, _ any) bool { c.(net.Conn).Close(); return true })
}

func (f *fakeInstance) serve(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(15 * time.Second))
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		f.mu.Lock()
		f.got = append(f.got, req)
		f.mu.Unlock()
		if req.Method == "GET" {
			if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"); err != nil {
				return
			}
			if f.fail == gone {
				f.stop()
				return
			}
			continue
		}
		switch f.fail {
		case reset:
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
		case stall:
			_, _ = io.Copy(io.Discard, c) // until HAProxy gives up
		case cutShort:
			_, _ = io.WriteString(c, "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 64\r\n\r\n{\"id\":")
			time.Sleep(50 * time.Millisecond) // a fake death: HAProxy sends the beginning on before the connection closes
		}
		return
	}
}

func (f *fakeInstance) requests() []*http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.got)
}

// posts are the requests other than GETs the instance received.
func (f *fakeInstance) posts() []*http.Request {
	return slices.DeleteFunc(f.requests(), func(r *http.Request) bool { return r.Method == "GET" })
}

// checkProblem checks an error answer of HAProxy against the BFF's envelope
// (internal/problem): RFC 9457 application/problem+json, with a requestId
// equal to the X-Request-Id header. It returns the request id.
func checkProblem(t *testing.T, resp *http.Response, body []byte, status int, code string) string {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("got %d, want %d; body %s", resp.StatusCode, status, body)
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || mt != "application/problem+json" {
		t.Errorf("Content-Type %q, want application/problem+json", resp.Header.Get("Content-Type"))
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q, want no-store", cc)
	}
	var p map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, body)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		t.Fatalf("data after the JSON object: %s", body)
	}
	keys := sortedKeys(p)
	if want := []string{"action", "code", "detail", "requestId", "retryable", "status", "title", "type"}; !slices.Equal(keys, want) {
		t.Errorf("envelope keys %v, want %v", keys, want)
	}
	if p["code"] != code || p["type"] != "urn:bff:problem:"+code {
		t.Errorf("code %v, type %v; want %s", p["code"], p["type"], code)
	}
	if p["status"] != float64(status) {
		t.Errorf("status %v in the body, want %d", p["status"], status)
	}
	if p["action"] != "retry_later" || p["retryable"] != true {
		t.Errorf("action %v, retryable %v; want retry_later, true", p["action"], p["retryable"])
	}
	for _, k := range []string{"title", "detail"} {
		if s, _ := p[k].(string); s == "" {
			t.Errorf("no %s", k)
		}
	}
	id, _ := p["requestId"].(string)
	if id == "" || id != resp.Header.Get("X-Request-Id") {
		t.Errorf("requestId %q, X-Request-Id %q: want the same non-empty id", id, resp.Header.Get("X-Request-Id"))
	}
	// The id the BFF accepts from a trusted proxy (internal/edge).
	if !regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`).MatchString(id) {
		t.Errorf("requestId %q is not one the BFF accepts", id)
	}
	return id
}

// TestHAProxyErrorsAreProblemJSON runs haproxy with the shipped config in
// front of failing instances: its own errors are the BFF's JSON envelope,
// and a request that reached an instance is never sent again.
func TestHAProxyErrorsAreProblemJSON(t *testing.T) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	do := func(t *testing.T, req *http.Request) (*http.Response, []byte) {
		t.Helper()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, body
	}
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer healthy.Close()
	payment := func(t *testing.T, url string) *http.Request {
		req, err := http.NewRequest("POST", url+"/api/v2/payments", strings.NewReader(`{"amount":"10.00"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "7c1d2b8e-4f7a-4d8e-9a51-0b6f3c2e1d90")
		req.Header.Set("X-Request-Id", "chosen-by-the-client")
		return req
	}
	sentOnce := func(t *testing.T, inst *fakeInstance, id, logs string) {
		t.Helper()
		got := inst.requests()
		if len(got) != 1 {
			t.Fatalf("the instance got the POST %d times, want once (HAProxy must not resend it):\n%s", len(got), logs)
		}
		if fwd := got[0].Header.Values("X-Request-Id"); len(fwd) != 1 || fwd[0] != id {
			t.Errorf("the instance got X-Request-Id %q, want only HAProxy's %q", fwd, id)
		}
	}

	t.Run("503 when no instance is up", func(t *testing.T) {
		cfg, public := shippedHAProxy(t, "", "", "") // nothing listens: connections are refused
		logs := runHAProxy(t, cfg, public)
		req, err := http.NewRequest("GET", "http://"+public+"/api/v2/providers", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, body := do(t, req)
		checkProblem(t, resp, body, 503, "UPSTREAM_UNAVAILABLE")
		if t.Failed() {
			t.Log(logs)
		}
	})

	t.Run("502 and sent once when the instance hangs up mid-request", func(t *testing.T) {
		inst := startFakeInstance(t, hangUp)
		cfg, public := shippedHAProxy(t, inst.addr, healthy.Listener.Addr().String(), "")
		logs := runHAProxy(t, cfg, public)
		resp, body := do(t, payment(t, "http://"+public))
		id := checkProblem(t, resp, body, 502, "UPSTREAM_UNREACHABLE")
		sentOnce(t, inst, id, logs.String())
	})

	t.Run("504 and sent once when the instance does not answer", func(t *testing.T) {
		inst := startFakeInstance(t, stall)
		cfg, public := shippedHAProxy(t, inst.addr, healthy.Listener.Addr().String(), "1s")
		logs := runHAProxy(t, cfg, public)
		resp, body := do(t, payment(t, "http://"+public))
		id := checkProblem(t, resp, body, 504, "UPSTREAM_TIMEOUT")
		sentOnce(t, inst, id, logs.String())
	})
}

// keyedPayment is a payment as a client sends it: a POST with an
// Idempotency-Key and a body that can be sent again (GetBody is set).
func keyedPayment(t *testing.T, public string) *http.Request {
	t.Helper()
	req, err := http.NewRequest("POST", "http://"+public+"/api/v2/payments", strings.NewReader(`{"amount":"10.00"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "7c1d2b8e-4f7a-4d8e-9a51-0b6f3c2e1d90")
	return req
}

// secondOnAConnection sends a GET and then req on one connection to HAProxy,
// as a kept-alive client does, and returns HAProxy's answer to req (its
// body, and the error that cut the body short if one did), or nil when
// HAProxy closed the connection without one.
func secondOnAConnection(t *testing.T, public string, req *http.Request) (*http.Response, []byte, error) {
	t.Helper()
	c, err := net.DialTimeout("tcp", public, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	get, err := http.NewRequest("GET", "http://"+public+"/api/v2/providers", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range []*http.Request{get, req} {
		if err := r.Write(c); err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		resp, err := http.ReadResponse(br, r)
		if err != nil {
			if i == 0 {
				t.Fatalf("the GET: %v", err)
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("no answer and no close after 10s: %v", err)
			}
			t.Logf("the connection closed without an answer: %v", err)
			return nil, nil, nil
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if i == 0 {
			if err != nil || resp.StatusCode != 200 || resp.Close {
				t.Fatalf("the GET: %d (close %v, %v), want 200 on a kept-alive connection: %s", resp.StatusCode, resp.Close, err, body)
			}
			continue
		}
		return resp, body, err
	}
	panic("unreachable")
}

// TestHAProxyAnswersAKeptAliveClient: a request that is not the first of
// its client connection (a kept-alive HTTP/1.1 connection, or any HTTP/2
// stream) gets HAProxy's problem+json answer when its instance fails, never
// a connection closed (or a stream reset) without one. HAProxy 2.6 does
// that to a later request "so that the client retries", and clients do:
// Go's sends a POST that carries an Idempotency-Key again on a new
// connection, and over HTTP/2 any POST it can rewind, up to 7 more times.
// The shipped relay (frontend relayed) makes every request the first of its
// connection inside HAProxy. Only an answer the instance had begun cannot be
// replaced: the client gets it cut short, and sends nothing again.
func TestHAProxyAnswersAKeptAliveClient(t *testing.T) {
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer healthy.Close()
	cases := []struct {
		fail   failure
		status int
		code   string // "": the instance's own (cut) answer, not HAProxy's
		posts  int    // how many times the instance gets the POST
		// orStatus and orCode are an answer as good: an instance gone
		// between its GET's answer and the POST may leave HAProxy a
		// kept-alive connection to it whose close it has not read yet; the
		// POST goes out on it, the instance reads nothing, and HAProxy
		// answers 502, its problem+json all the same.
		orStatus int
		orCode   string
	}{
		{hangUp, 502, "UPSTREAM_UNREACHABLE", 1, 0, ""},
		{reset, 502, "UPSTREAM_UNREACHABLE", 1, 0, ""},
		{stall, 504, "UPSTREAM_TIMEOUT", 1, 0, ""},
		{gone, 503, "UPSTREAM_UNAVAILABLE", 0, 502, "UPSTREAM_UNREACHABLE"},
		{cutShort, 201, "", 1, 0, ""},
	}
	clients := []struct {
		name string
		// post sends a GET, then req on the same connection, and returns
		// the answer to req (nil: the connection or stream ended without
		// one), its body and the error that cut the body short.
		post func(t *testing.T, public string, req *http.Request) (*http.Response, []byte, error)
	}{
		{"HTTP/1.1, the second request of a connection", secondOnAConnection},
		{"Go's client, HTTP/1.1", func(t *testing.T, public string, req *http.Request) (*http.Response, []byte, error) {
			return goClientPost(t, public, req, false)
		}},
		{"Go's client, HTTP/2", func(t *testing.T, public string, req *http.Request) (*http.Response, []byte, error) {
			return goClientPost(t, public, req, true)
		}},
	}
	for _, c := range cases {
		t.Run("the instance "+c.fail.String(), func(t *testing.T) {
			for _, client := range clients {
				t.Run(client.name, func(t *testing.T) {
					inst := startFakeInstance(t, c.fail)
					cfg, public := shippedHAProxy(t, inst.addr, healthy.Listener.Addr().String(), "1s")
					logs := runHAProxy(t, cfg, public)
					resp, body, bodyErr := client.post(t, public, keyedPayment(t, public))
					if resp == nil {
						t.Fatalf("HAProxy ended the request without an answer, and clients send it again: the instance got the POST %d times:\n%s", len(inst.posts()), logs)
					}
					id := ""
					if c.code == "" {
						if resp.StatusCode != c.status || bodyErr == nil {
							t.Errorf("got %d %s (body error %v), want the instance's %d cut short", resp.StatusCode, body, bodyErr, c.status)
						}
					} else {
						if bodyErr != nil {
							t.Fatalf("reading HAProxy's answer: %v", bodyErr)
						}
						status, code := c.status, c.code
						if c.orStatus != 0 && resp.StatusCode == c.orStatus {
							status, code = c.orStatus, c.orCode
						}
						id = checkProblem(t, resp, body, status, code)
					}
					posts := inst.posts()
					if len(posts) != c.posts {
						t.Fatalf("the instance got the POST %d times, want %d (HAProxy or the client sent it again):\n%s", len(posts), c.posts, logs)
					}
					for _, p := range posts {
						if fwd := p.Header.Values("X-Request-Id"); len(fwd) != 1 || (id != "" && fwd[0] != id) {
							t.Errorf("the instance got X-Request-Id %q, want only that of HAProxy's answer, %q", fwd, id)
						}
					}
					// The relay hop adds no X-Forwarded-For of its own.
					for _, r := range inst.requests() {
						if xff := r.Header.Values("X-Forwarded-For"); len(xff) != 1 || xff[0] != "127.0.0.1" {
							t.Errorf("the instance got X-Forwarded-For %q, want only the client's address, 127.0.0.1", xff)
						}
					}
					if t.Failed() {
						t.Log(logs)
					}
				})
			}
		})
	}
}

// goClientPost sends a GET and then req with Go's client (one connection,
// kept alive; HTTP/2 without TLS if h2), and returns the answer to req. Go's
// client sends req again by itself when the connection it reused closes
// without an answer (HTTP/1.1: req carries an Idempotency-Key) or when
// the stream is refused (HTTP/2).
func goClientPost(t *testing.T, public string, req *http.Request, h2 bool) (*http.Response, []byte, error) {
	t.Helper()
	tr := &http.Transport{MaxConnsPerHost: 1}
	if h2 {
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	defer tr.CloseIdleConnections()
	// Bounded: over HTTP/2 Go's client resends a refused stream up to 6
	// times, waiting longer each time.
	client := &http.Client{Timeout: 8 * time.Second, Transport: tr}
	resp, err := client.Get("http://" + public + "/api/v2/providers")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("the GET: %d", resp.StatusCode)
	}
	if want := map[bool]int{false: 1, true: 2}[h2]; resp.ProtoMajor != want {
		t.Fatalf("the GET went over %s, want HTTP/%d", resp.Proto, want)
	}
	reused := false
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			if !reused {
				reused = info.Reused
			}
		},
	}))
	resp, err = client.Do(req)
	if !reused {
		t.Fatal("the POST did not go on the GET's connection: it tests nothing")
	}
	if err != nil {
		t.Logf("Go's client: %v", err)
		return nil, nil, nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

// TestHAProxyPassesAnEventStreamOn runs haproxy with the shipped config,
// its inactivity timeouts cut to 1s, in front of an instance that serves an
// event stream: the first event reaches the client while the instance waits
// (nothing holds it back), and heartbeats every 300 ms keep the stream open
// for 4 s, four times the timeouts.
func TestHAProxyPassesAnEventStreamOn(t *testing.T) {
	got := make(chan struct{})
	inst := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/bff/events" {
			return // a health check
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Accel-Buffering", "no")
		fl := w.(http.Flusher)
		_, _ = io.WriteString(w, "retry: 2000\nevent: payment\nid: 1\ndata: {\"paymentStatus\":\"PENDING\"}\n\n")
		fl.Flush()
		select {
		case <-got: // the client read it before anything else was sent
		case <-time.After(5 * time.Second):
			return
		}
		for end := time.Now().Add(4 * time.Second); time.Now().Before(end); {
			time.Sleep(300 * time.Millisecond) // deliberate: the heartbeats' pace, under HAProxy's 1 s timeouts
			if _, err := io.WriteString(w, ": heartbeat\n\n"); err != nil {
				return
			}
			fl.Flush()
		}
		_, _ = io.WriteString(w, "event: payment\nid: 2\ndata: {\"paymentStatus\":\"ACSC\"}\n\n")
	}))
	defer inst.Close()
	cfg, public := shippedHAProxy(t, inst.Listener.Addr().String(), inst.Listener.Addr().String(), "1s")
	cfg = regexp.MustCompile(`(?m)^(\s*timeout client)\s+\S+`).ReplaceAllString(cfg, "${1} 1s")
	logs := runHAProxy(t, cfg, public)

	req, err := http.NewRequest("GET", "http://"+public+"/bff/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := (&http.Client{Timeout: 15 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("Content-Encoding") != "" {
		t.Fatalf("got %d, Content-Type %q, Content-Encoding %q; want 200 text/event-stream, not encoded",
			resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Content-Encoding"))
	}
	br := bufio.NewReader(resp.Body)
	var ids []string
	heartbeats := 0
	for len(ids) < 2 {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended after events %v and %d heartbeats: %v\n%s", ids, heartbeats, err, logs)
		}
		switch {
		case strings.HasPrefix(line, "id: "):
			ids = append(ids, strings.TrimSpace(line[4:]))
			if len(ids) == 1 {
				close(got)
			}
		case strings.HasPrefix(line, ":"):
			heartbeats++
		}
	}
	if !slices.Equal(ids, []string{"1", "2"}) || heartbeats < 10 {
		t.Errorf("got events %v and %d heartbeats, want [1 2] and at least 10", ids, heartbeats)
	}
}
