//go:build integration

// Package e2e runs the real bff binary against the upstream simulator and a
// real Redis, the way an operator runs it.
package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/testing/pgtest"
	testpoll "github.com/fintech-bff/bff/internal/testing/poll"
	"github.com/fintech-bff/bff/internal/testing/redistest"
	"github.com/fintech-bff/bff/internal/testing/syncbuf"
	"github.com/fintech-bff/bff/internal/upstreamsim"
)

var bffBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "bff-e2e-")
	if err != nil {
		panic(err)
	}
	bffBin = filepath.Join(dir, "bff")
	// The race detector's build, but for a run that measures the
	// product's timing (make chaos's ledger pause: BFF_E2E_PRODUCT_BUILD),
	// which the detector's 5-20x slower code would make meaningless.
	args := []string{"build", "-race", "-o", bffBin, "../cmd/bff"}
	if os.Getenv("BFF_E2E_PRODUCT_BUILD") != "" {
		args = slices.Delete(args, 1, 2)
	}
	build := exec.Command("go", args...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building bff:", err)
		os.Exit(1)
	}
	// Requests that do not go through a client below (http.Get,
	// http.DefaultClient) are checked too; their mismatches fail the run.
	http.DefaultTransport = validate(nil, baseTransport)
	code := m.Run()
	if reportStrays() != 0 && code == 0 {
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// handedOut holds the ports freeAddr gave this process's tests.
var handedOut sync.Map

// freeAddr returns a free 127.0.0.1 address for a server a test starts
// later. The port is below the kernel's ephemeral range (32768 and up on
// Linux), so no outgoing connection of this machine can take it between
// now and the server's bind (one did in a clean-clone run: an OIDC test's
// BFF, whose port the provider already had as its redirect URI, could not
// listen), and it is never handed out twice.
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 200 {
		p := 20000 + mathrand.IntN(12000)
		if _, taken := handedOut.LoadOrStore(p, true); taken {
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		ln.Close()
		return ln.Addr().String()
	}
	t.Fatal("no free port below the ephemeral range after 200 tries")
	return ""
}

func randomB64(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// env is one running deployment: simulator, Redis namespace, BFF instance.
type env struct {
	t         *testing.T
	sim       *upstreamsim.Server
	simURL    string
	bearers   *bearerTap // the tokens the BFF sent the simulator
	public    string     // http://host:port
	admin     string
	logs      *syncbuf.Buffer
	prefix    string
	secret    string
	encKey    string
	cookieKey string
	ledgerURL string // the deployment's PostgreSQL database
	adminTok  string // the admin listener's bearer token (admin_token_file)
	cmd       *exec.Cmd
	exited    chan error
	termSent  bool
	opts      options // as launched, for relaunch
}

// kill ends the instance with SIGKILL (no drain, no last writes), as a
// crashed or OOM-killed process ends, and waits until it is gone.
func (e *env) kill() {
	e.t.Helper()
	if e.cmd == nil {
		return
	}
	_ = e.cmd.Process.Kill()
	select {
	case <-e.exited:
	case <-time.After(10 * time.Second):
		e.t.Fatal("a killed instance did not exit")
	}
	e.cmd = nil
}

// relaunch starts a killed instance again on its own addresses, so a load
// balancer's configuration still names it.
func (e *env) relaunch() {
	e.t.Helper()
	o := e.opts
	o.publicAddr, o.adminAddr = strings.TrimPrefix(e.public, "http://"), strings.TrimPrefix(e.admin, "http://")
	e.termSent = false
	if err := e.launchOn(o, o.publicAddr, o.adminAddr); err != nil {
		e.t.Fatal(err)
	}
}

// terminate sends SIGTERM once; stop then waits for the exit.
func (e *env) terminate() {
	if e.cmd != nil && !e.termSent {
		e.termSent = true
		_ = e.cmd.Process.Signal(syscall.SIGTERM)
	}
}

type options struct {
	sim        upstreamsim.Options
	extraYAML  string
	secretFile string
	redisAddr  string              // default: the test Redis
	sentinel   *redistest.Sentinel // Redis through this Sentinel instead of redisAddr
	redisYAML  string              // the redis block's connection lines (url, cluster_addrs, username...) instead of either
	keyPrefix  string              // redis.key_prefix; default: a fresh one of the test's
	publicAddr string              // default: a free port
	adminAddr  string              // default: a free port
	authYAML   string              // default: auth: { mode: dev }
	upstream   string              // extra lines of the upstream block, e.g. "timeout: 2s"
	drainDelay string              // shutdown_delay; default 0s
	env        map[string]string   // BFF_* variables, over the file's values
	limitsYAML string              // default: every limit off
	// secureCookie sets session.secure_cookie: the cookies are then
	// Secure and named __Host-… (browsers take them from http://127.0.0.1).
	secureCookie bool
	// noAdminToken leaves admin_token_file unset: the admin listener's
	// mutating endpoints then do not exist.
	noAdminToken bool
	// ledgerURL is the ledger's database; default: a fresh database on the
	// test PostgreSQL.
	ledgerURL string
}

// adminDo sends a request to the admin listener with its bearer token.
func (e *env) adminDo(method, path string) *http.Response {
	e.t.Helper()
	req, _ := http.NewRequest(method, e.admin+path, nil)
	req.Header.Set("Authorization", "Bearer "+e.adminTok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp
}

const clientSecret = "e2e-client-secret-Xq9zV"

func start(t *testing.T, o options) *env {
	t.Helper()
	e := newEnv(t, &o)
	e.launch(o)
	return e
}

// startErr starts an instance that is expected not to start: it returns
// why the BFF exited (its log included), or nil if it did start.
func startErr(t *testing.T, o options) error {
	t.Helper()
	e := newEnv(t, &o)
	e.opts = o
	t.Cleanup(func() { e.stop() })
	pub, adm := o.publicAddr, o.adminAddr
	if pub == "" {
		pub = freeAddr(t)
	}
	if adm == "" {
		adm = freeAddr(t)
	}
	return e.launchOn(o, pub, adm)
}

// newEnv makes a deployment's simulator, Redis namespace and ledger for an
// instance not yet started.
func newEnv(t *testing.T, o *options) *env {
	t.Helper()
	_, prefix := redistest.Client(t)
	if o.keyPrefix != "" {
		prefix = o.keyPrefix
	}
	if o.sim.ClientID == "" {
		o.sim.ClientID, o.sim.ClientSecret = "e2e-client", clientSecret
	}
	sim := upstreamsim.New(o.sim)
	bearers := &bearerTap{next: sim}
	srv := httptest.NewServer(bearers)
	t.Cleanup(srv.Close)
	// Its webhook retries stop with the test: the BFF they were for is gone,
	// and its port may be another test's BFF by then.
	t.Cleanup(sim.Close)
	e := &env{t: t, sim: sim, simURL: srv.URL, bearers: bearers, prefix: prefix, secret: o.sim.ClientSecret,
		encKey: randomB64(32), cookieKey: randomB64(32), ledgerURL: o.ledgerURL, adminTok: randomB64(24)}
	if e.ledgerURL == "" {
		e.ledgerURL = pgtest.Database(t)
	}
	return e
}

// bearerTap records the Bearer tokens the BFF sends the simulator. The
// simulator's request log keeps only their fingerprints; the secret scans
// need the tokens themselves to look for them in the BFF's logs and Redis.
// It is safe for concurrent use.
type bearerTap struct {
	next   http.Handler
	mu     sync.Mutex
	tokens []string
	traces []string // the traceparents of the API calls
	// after, when set, runs after the simulator served a request (a test
	// acts between two requests of the BFF's).
	after func(*http.Request)
}

func (b *bearerTap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	after := b.after
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		b.tokens = append(b.tokens, tok)
		if tp := r.Header.Get("Traceparent"); tp != "" {
			b.traces = append(b.traces, tp)
		}
	}
	b.mu.Unlock()
	b.next.ServeHTTP(w, r)
	if after != nil {
		after(r)
	}
}

// setAfter sets (nil: clears) what runs after each request is served.
func (b *bearerTap) setAfter(f func(*http.Request)) {
	b.mu.Lock()
	b.after = f
	b.mu.Unlock()
}

// traceparents returns the traceparents the API calls carried, in order.
func (b *bearerTap) traceparents() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.traces)
}

// seen returns the tokens recorded so far, in order.
func (b *bearerTap) seen() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.tokens)
}

// another starts one more instance of the same deployment: same simulator,
// Redis namespace and keys, as a second instance behind a load balancer.
func (e *env) another(o options) *env {
	n := &env{t: e.t, sim: e.sim, simURL: e.simURL, bearers: e.bearers, prefix: e.prefix, secret: e.secret, encKey: e.encKey, cookieKey: e.cookieKey, ledgerURL: e.ledgerURL, adminTok: e.adminTok}
	if o.sim.ClientID == "" {
		o.sim.ClientID = "e2e-client"
	}
	n.launch(o)
	return n
}

// launch starts the instance and waits until it is ready. Ports are picked
// free and released before the BFF binds them, so another process may take
// one in between: then the BFF exits with "address already in use" and
// launch tries again on new ports (the public port only when it was not
// given).
func (e *env) launch(o options) {
	t := e.t
	e.opts = o
	t.Cleanup(func() { e.stop() })
	for attempt := 1; ; attempt++ {
		pub, adm := o.publicAddr, o.adminAddr
		if pub == "" {
			pub = freeAddr(t)
		}
		if adm == "" {
			adm = freeAddr(t)
		}
		err := e.launchOn(o, pub, adm)
		if err == nil {
			return
		}
		if attempt < 3 && strings.Contains(e.logs.String(), "address already in use") {
			t.Logf("retrying on new ports: %v", err)
			continue
		}
		t.Fatal(err)
	}
}

// launchOn starts the instance on the given listen addresses and waits
// until it is ready, or returns why not.
func (e *env) launchOn(o options, pub, adm string) error {
	t := e.t
	redisAddr := o.redisAddr
	if redisAddr == "" {
		redisAddr = redistest.Addr()
	}
	redisYAML := fmt.Sprintf("url: \"redis://%s/0\"", redisAddr)
	if o.sentinel != nil {
		redisYAML = fmt.Sprintf("url: \"\"\n  sentinel: { master: %q, addrs: [%q] }", o.sentinel.MasterName, o.sentinel.SentinelAddrs()[0])
	}
	if o.redisYAML != "" {
		redisYAML = o.redisYAML
	}
	drainDelay := o.drainDelay
	if drainDelay == "" {
		drainDelay = "0s"
	}
	// Every test comes from 127.0.0.1 and many log in often: the limits are
	// off unless a test sets them.
	limitsYAML := o.limitsYAML
	if limitsYAML == "" {
		limitsYAML = "limits: { requests_per_second: 0, auth_per_minute: 0, refresh_interval: 0s, sessions_per_user: 0, backchannel_per_minute: 0, pending_logins_per_address: 0 }"
	}
	authYAML := o.authYAML
	if authYAML == "" {
		authYAML = "auth:\n  mode: dev"
	}
	adminTokenFile := filepath.Join(t.TempDir(), "admin_token")
	if err := os.WriteFile(adminTokenFile, []byte(e.adminTok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	adminLine := fmt.Sprintf("admin_token_file: %q", adminTokenFile)
	if o.noAdminToken {
		adminLine = ""
	}
	secretLine := fmt.Sprintf("client_secret: %q", e.secret)
	if o.secretFile != "" {
		secretLine = fmt.Sprintf("client_secret_file: %q", o.secretFile)
	}
	cfg := fmt.Sprintf(`env: development
%s
listen: %q
admin_listen: %q
public_url: "http://%s"
shutdown_delay: %s
shutdown_timeout: 10s
upstream:
  base_url: %q
  client_id: %q
  %s
  retry: { max_attempts: 3, base_delay: 5ms, max_delay: 20ms }
  %s
redis:
  %s
  key_prefix: %q
  encryption_key: %q
session:
  secure_cookie: %t
  keys: [%q]
ledger:
  postgres_url: %q
%s
%s
%s`, adminLine, pub, adm, pub, drainDelay, e.simURL, o.sim.ClientID, secretLine, o.upstream, redisYAML, e.prefix, e.encKey, o.secureCookie, e.cookieKey, e.ledgerURL, limitsYAML, authYAML, o.extraYAML)
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	e.logs = &syncbuf.Buffer{}
	e.cmd = exec.Command(bffBin, "-config", path)
	e.cmd.Stdout, e.cmd.Stderr = e.logs, e.logs
	e.cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range o.env {
		e.cmd.Env = append(e.cmd.Env, k+"="+v)
	}
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The waiter keeps its own copies: a relaunch replaces e.cmd and
	// e.exited while this one may still be closing the old channel.
	cmd, exited := e.cmd, make(chan error, 1)
	e.exited = exited
	go func() { exited <- cmd.Wait(); close(exited) }()
	// A relaunch keeps its addresses: clients may be reading them.
	if e.public != "http://"+pub || e.admin != "http://"+adm {
		e.public, e.admin = "http://"+pub, "http://"+adm
	}
	registerFront(t, e.public)
	var (
		gone    bool
		exitErr error
	)
	ready := testpoll.Within(15*time.Second, func() bool { // an exit ends the wait at once
		resp, err := http.Get(e.admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return true
			}
		}
		select {
		case exitErr = <-e.exited:
			e.cmd, gone = nil, true
			return true
		default:
			return false
		}
	})
	switch {
	case gone:
		return fmt.Errorf("bff exited before it was ready (%v):\n%s", exitErr, e.logs)
	case !ready:
		return fmt.Errorf("bff not ready after 15s:\n%s", e.logs)
	}
	return nil
}

// stop sends SIGTERM and requires a clean exit 0.
func (e *env) stop() {
	if e.cmd == nil || e.cmd.Process == nil {
		return
	}
	e.terminate()
	select {
	case err := <-e.exited:
		if err != nil {
			e.t.Errorf("bff exited with %v after SIGTERM, want 0:\n%s", err, e.logs)
		}
	case <-time.After(20 * time.Second):
		_ = e.cmd.Process.Kill()
		e.t.Errorf("bff did not stop within 20s of SIGTERM")
	}
	e.cmd = nil
}

// client is a frontend: a cookie jar, or a session token.
type client struct {
	e     *env
	http  *http.Client
	token string // when set, sent as Authorization: Bearer and no cookies are kept
}

// browser and app check every answer against api/openapi.yaml
// (openapi_test.go): a mismatch fails the test.
func (e *env) browser() *client {
	jar, _ := cookiejar.New(nil)
	return &client{e: e, http: &http.Client{Jar: jar, Timeout: 30 * time.Second, Transport: validate(e.t, nil),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (e *env) app(token string) *client {
	return &client{e: e, http: &http.Client{Timeout: 30 * time.Second, Transport: validate(e.t, nil)}, token: token}
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) json(t *testing.T) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("body is not a JSON object: %v: %s", err, r.body)
	}
	return v
}

func (c *client) do(method, path, body string, hdr ...string) reply {
	c.e.t.Helper()
	r, err := c.try(method, path, body, hdr...)
	if err != nil {
		c.e.t.Fatal(err)
	}
	return r
}

// try is do for requests that may fail below HTTP (an instance killed
// under them): it returns the error instead of failing the test.
func (c *client) try(method, path, body string, hdr ...string) (reply, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, c.e.public+path, rd)
	if err != nil {
		return reply{}, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: b}, err
}

// login logs in through the dev login and returns the session token.
func (c *client) login(userID string) string {
	c.e.t.Helper()
	r := c.do("POST", "/auth/dev/login", fmt.Sprintf(`{"userId":%q}`, userID))
	if r.status != 200 {
		c.e.t.Fatalf("dev login: got %d %s, want 200", r.status, r.body)
	}
	v := r.json(c.e.t)
	tok, _ := v["sessionToken"].(string)
	if v["userId"] != userID || tok == "" || v["expiresAt"] == nil {
		c.e.t.Fatalf("dev login reply %s lacks userId, sessionToken or expiresAt", r.body)
	}
	return tok
}

// wantProblem checks a reply is the error envelope (docs/errors.md) with this status and code.
func wantProblem(t *testing.T, r reply, status int, code string) map[string]any {
	t.Helper()
	if r.status != status {
		t.Fatalf("got status %d (%s), want %d %s", r.status, r.body, status, code)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("got Content-Type %q, want application/problem+json", ct)
	}
	v := r.json(t)
	if v["code"] != code {
		t.Fatalf("got code %v, want %s (%s)", v["code"], code, r.body)
	}
	if int(v["status"].(float64)) != status {
		t.Fatalf("got body status %v, want %d", v["status"], status)
	}
	for _, k := range []string{"type", "title", "action", "retryable", "requestId"} {
		if _, ok := v[k]; !ok {
			t.Fatalf("envelope lacks %q: %s", k, r.body)
		}
	}
	if v["requestId"] != r.header.Get("X-Request-Id") || v["requestId"] == "" {
		t.Fatalf("got requestId %v, header %q; want the same non-empty value", v["requestId"], r.header.Get("X-Request-Id"))
	}
	return v
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
