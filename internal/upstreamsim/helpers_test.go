package upstreamsim

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// testEpoch is the fixed start of the injected clock.
var testEpoch = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

// fixedClock returns an injected clock frozen at testEpoch.
func fixedClock() func() time.Time { return func() time.Time { return testEpoch } }

// harness is a simulator behind a real HTTP server: on a loopback
// listener (newHarness) or on an in-memory one (newBubbleHarness).
type harness struct {
	t   *testing.T
	sim *Server
	url string
	tr  *http.Transport // the in-memory network's; nil: the loopback's
}

// newBubbleHarness is newHarness for a test in a synctest bubble: the
// server listens on an in-memory network, so that the bubble's clock
// moves when the test waits (a goroutine waiting on a loopback socket is
// not durably blocked, one waiting on a net.Pipe is).
func newBubbleHarness(t *testing.T, opts Options) *harness {
	t.Helper()
	if opts.Now == nil {
		opts.Now = fixedClock()
	}
	sim := New(opts)
	tr := servePipe(t, sim)
	t.Cleanup(sim.Close) // first: no webhook goes out to a closed receiver
	return &harness{t: t, sim: sim, url: "http://upstream.test", tr: tr}
}

// client is the harness's HTTP client; with follow false it shows
// redirects instead of following them.
func (h *harness) client(follow bool) *http.Client {
	c := &http.Client{}
	if h.tr != nil {
		c.Transport = h.tr
	}
	if !follow {
		c.CheckRedirect = noFollow.CheckRedirect
	}
	return c
}

// pipeListener is a net.Listener of net.Pipe connections, which its
// dial makes.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	server, client := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// servePipe serves handler with net/http on an in-memory network until t
// ends, and returns a transport whose every connection reaches it,
// whatever the URL's host.
func servePipe(t *testing.T, handler http.Handler) *http.Transport {
	t.Helper()
	l := &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(l)
	}()
	tr := &http.Transport{DialContext: l.dial}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		_ = srv.Close()
		<-served
	})
	return tr
}

func newHarness(t *testing.T, opts Options) *harness {
	t.Helper()
	if opts.Now == nil {
		opts.Now = fixedClock()
	}
	sim := New(opts)
	ts := httptest.NewServer(sim)
	t.Cleanup(ts.Close)
	t.Cleanup(sim.Close) // first: no webhook goes out to a closed receiver
	return &harness{t: t, sim: sim, url: ts.URL}
}

// reply is a received HTTP reply.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("reply body %q is not a JSON object: %v", r.body, err)
	}
	return m
}

// do sends method path with an optional bearer token and JSON body (a
// string is sent as is; anything else is marshalled).
func (h *harness) do(method, path, token string, body any) reply {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, h.url+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := h.client(true).Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return reply{status: res.StatusCode, header: res.Header, body: b}
}

// token mints a token for user with the default credentials.
func (h *harness) token(user string) string {
	h.t.Helper()
	r := h.do("POST", "/oauth/token", "", map[string]any{"clientId": "dev-client", "clientSecret": "dev-secret", "userId": user})
	if r.status != http.StatusOK {
		h.t.Fatalf("token for %s: got status %d, want 200 (body %s)", user, r.status, r.body)
	}
	return r.json(h.t)["accessToken"].(string)
}

// wantError checks status, type and (if non-empty) message of an error reply,
// and that the body has no other fields.
func wantError(t *testing.T, r reply, status int, typ, msg string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("got status %d, want %d (body %s)", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("got Content-Type %q, want application/json", ct)
	}
	m := r.json(t)
	if got, _ := m["type"].(string); got != typ {
		t.Errorf("got type %q, want %q (body %s)", got, typ, r.body)
	}
	if msg != "" {
		if got, _ := m["message"].(string); got != msg {
			t.Errorf("got message %q, want %q", got, msg)
		}
	}
	wantKeys := 2
	if typ == "" {
		wantKeys = 1
	}
	if len(m) != wantKeys {
		t.Errorf("got body fields %v, want only type and message (or message alone for 401)", m)
	}
}

// messageList decodes a stringified-list message.
func messageList(t *testing.T, r reply) []string {
	t.Helper()
	var list []string
	msg, _ := r.json(t)["message"].(string)
	if err := json.Unmarshal([]byte(msg), &list); err != nil {
		t.Fatalf("message %q is not a stringified JSON list: %v", msg, err)
	}
	return list
}

// paymentBody is a valid POST /v2/payments body with the sandbox provider.
func paymentBody(remittance string) map[string]any {
	return map[string]any{
		"paymentInformation": map[string]any{
			"amount": 12.5, "currency": "EUR", "remittanceInformation": remittance,
			"creditorName": "Jane", "creditorAccount": map[string]any{"iban": "FR7630006000011234567890189"},
			"debtorAccount": map[string]any{"iban": "DE89370400440532013000"},
		},
		"providerIds": []string{ProviderSandbox},
		"redirectUrl": "https://app.example.com/payment-done",
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
