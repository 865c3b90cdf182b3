//go:build integration

package edge

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fintech-bff/bff/internal/events"
	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/metrics"
	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/proxy"
	"github.com/fintech-bff/bff/internal/session"
	"github.com/fintech-bff/bff/internal/testing/poll"
)

// slowPosition delays reading a user's position: the window in which a
// stream is registered but has no connection yet. It calls signal, when
// set, as the window opens and as it closes.
type slowPosition struct {
	next   events.Changes
	d      time.Duration
	signal func(userID string)
}

func (s slowPosition) Changes(ctx context.Context, u string, after int64) ([]payments.Change, error) {
	return s.next.Changes(ctx, u, after)
}

func (s slowPosition) Position(ctx context.Context, u string) (int64, error) {
	if s.signal != nil {
		s.signal(u)
		defer s.signal(u)
	}
	// deliberate: a slow ledger is the point, and the window must last
	// through the pusher's heartbeat scans, which run on the wall clock.
	time.Sleep(s.d)
	return s.next.Position(ctx, u)
}

// hookBudget runs f when a request spends its budget: after the session's
// lookup, before the stream is registered.
type hookBudget struct{ f func(id string) }

func (b hookBudget) Allow(id string) (bool, time.Duration) { b.f(id); return true, 0 }

// streamsServer is an edge serving GET /bff/events over an in-process
// ledger, with a live session manager on the test Redis, on a real
// listener; ch wraps what it reads changes from.
func streamsServer(t testing.TB, ch func(events.Changes) events.Changes, budget SessionBudget, heartbeat time.Duration) (*httptest.Server, *session.Manager, *events.Hub) {
	return boundedStreamsServer(t, ch, budget, heartbeat, events.Limits{}, nil, prometheus.NewRegistry())
}

// boundedStreamsServer is streamsServer with the hub's bounds lim, the
// X-Forwarded-For of the trusted peers believed, and the metrics on reg.
func boundedStreamsServer(t testing.TB, ch func(events.Changes) events.Changes, budget SessionBudget, heartbeat time.Duration,
	lim events.Limits, trusted []netip.Prefix, reg prometheus.Registerer) (*httptest.Server, *session.Manager, *events.Hub) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	_, sessions, cookies := liveSessions(ctx, t)
	led, _ := ledger.NewMemory(nil, make([]byte, 32), nil)
	pay := payments.New(payments.Options{Ledger: led})
	hub := events.NewHub(lim)
	sessions.OnEnd(hub.SessionEnded)
	listened := make(chan struct{})
	go func() {
		defer close(listened)
		_ = led.Listen(ctx, hub.Changed, hub.Resync, slog.New(slog.DiscardHandler))
	}()
	pusher := events.NewPusher(hub, ch(pay), sessions, heartbeat)
	pushed := make(chan struct{})
	go func() {
		defer close(pushed)
		pusher.Run(ctx)
	}()
	// After the server's close (cleanups run last first): the pusher ends
	// the streams still open.
	t.Cleanup(func() { cancel(); <-pushed; <-listened })
	e := NewPublic(Deps{
		Observability: Observability{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Observe: metrics.New(reg).Edge},
		Sessions:      Sessions{Manager: sessions, Cookies: cookies},
		Clients:       Clients{PublicOrigin: "http://bff.local", TrustedProxies: trusted},
		Limits:        Limits{Budget: budget, IPv6Prefix: 64},
		API: API{Forwarder: proxy.New(proxy.Options{BaseURL: &url.URL{Scheme: "http", Host: "127.0.0.1:9"},
			Routes: proxy.NewRoutes(nil), Timeout: time.Second, MaxBodyBytes: 1 << 20})},
		Payments: PaymentRoutes{Records: pay, Streams: pusher},
	})
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return srv, sessions, hub
}

func dialStream(t *testing.T, addr, token string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "GET /bff/events HTTP/1.1\r\nHost: bff.local\r\nAuthorization: Bearer %s\r\n\r\n", token)
	return c, bufio.NewReader(c)
}

// A stream signalled while it opens (its user's payments change as it is
// registered and again as its connection comes, and a slow ledger keeps
// it between the two for 2.5 s, through heartbeat scans) opens, and
// nothing writes to it before it has a connection (found in review: a
// worker wrote to a nil connection and the process died).
func TestStreamSignalledWhileOpening(t *testing.T) {
	var hub atomic.Pointer[events.Hub] // set before any stream opens
	changed := func(userID string) { hub.Load().Changed(userID) }
	srv, sessions, h := streamsServer(t, func(p events.Changes) events.Changes {
		return slowPosition{next: p, d: 2500 * time.Millisecond, signal: changed}
	}, nil, 2*time.Second)
	hub.Store(h)
	id, _, err := sessions.Create(context.Background(), session.New{UserID: "opening", Method: session.MethodDev})
	if err != nil {
		t.Fatal(err)
	}
	c, r := dialStream(t, srv.Listener.Addr().String(), id)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Fatalf("got %q, %v; want HTTP/1.1 200", line, err)
	}
}

// A session revoked after its lookup and before its stream is registered
// gets no stream: 401, nothing left open (found in review: the stream
// lived until the session's idle timeout).
func TestStreamOfASessionRevokedWhileOpening(t *testing.T) {
	var sessions *session.Manager
	budget := hookBudget{f: func(id string) {
		if err := sessions.Delete(context.Background(), id); err != nil {
			panic(err)
		}
	}}
	srv, s, hub := streamsServer(t, func(p events.Changes) events.Changes { return p }, budget, 2*time.Second)
	sessions = s
	id, _, err := sessions.Create(context.Background(), session.New{UserID: "revoked-opening", Method: session.MethodDev})
	if err != nil {
		t.Fatal(err)
	}
	c, r := dialStream(t, srv.Listener.Addr().String(), id)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 401") {
		t.Fatalf("got %q, %v; want HTTP/1.1 401", line, err)
	}
	if n := hub.Count(); n != 0 {
		t.Fatalf("%d streams open, want 0", n)
	}
}

// A revocation cuts the stream before it returns: the client reads the
// end of the stream at once after Delete, and nothing after it.
func TestStreamCutBeforeTheRevocationReturns(t *testing.T) {
	srv, sessions, hub := streamsServer(t, func(p events.Changes) events.Changes { return p }, nil, 2*time.Second)
	id, _, err := sessions.Create(context.Background(), session.New{UserID: "cut", Method: session.MethodDev})
	if err != nil {
		t.Fatal(err)
	}
	c, r := dialStream(t, srv.Listener.Addr().String(), id)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for { // the headers and the retry hint
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "retry:") {
			break
		}
	}
	poll.Until(t, 10*time.Second, "the stream registered", func() bool { return hub.Count() == 1 })
	// The stream is the pusher's now (bare on Linux): signal changes while
	// the revocation runs.
	var stop atomic.Bool
	defer stop.Store(true)
	go func() {
		for !stop.Load() {
			hub.Changed("cut")
		}
	}()
	if err := sessions.Delete(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	rest, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("the stream did not end within 200 ms of the revocation's answer: %v (read %q)", err, rest)
	}
	if strings.Contains(string(rest), "event:") {
		t.Fatalf("an event after the revocation: %q", rest)
	}
}

// openFrom opens GET /bff/events on a connection of its own as the
// session token, from the client address from (X-Forwarded-For; "" for
// the peer's own), and returns the connection and the answer's head (the
// whole body when it is not a stream).
func openFrom(t *testing.T, addr, token, from string) (net.Conn, *http.Response, []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	xff := ""
	if from != "" {
		xff = "X-Forwarded-For: " + from + "\r\n"
	}
	fmt.Fprintf(c, "GET /bff/events HTTP/1.1\r\nHost: bff.local\r\nAuthorization: Bearer %s\r\n%s\r\n", token, xff)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET /bff/events from %q: %v", from, err)
	}
	var body []byte
	if resp.StatusCode != http.StatusOK {
		body, _ = io.ReadAll(resp.Body)
	}
	return c, resp, body
}

// The per-address bound counts one client's streams whatever their users
// (an IPv6 client by its /64) and answers 429 RATE_LIMITED, the instance
// bound answers 503 UPSTREAM_UNAVAILABLE, both with Retry-After; a client
// that leaves frees its places; each refusal is counted by its bound.
func TestStreamBounds(t *testing.T) {
	reg := prometheus.NewRegistry()
	lim := events.Limits{PerAddress: 2, PerInstance: 4}
	srv, sessions, hub := boundedStreamsServer(t, func(p events.Changes) events.Changes { return p }, nil, 2*time.Second,
		lim, []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, reg)
	addr := srv.Listener.Addr().String()
	n := 0
	token := func() string { // a user of its own for each stream: the per-user bound plays no part
		n++
		id, _, err := sessions.Create(context.Background(), session.New{UserID: fmt.Sprintf("bounded-%d", n), Method: session.MethodDev})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	open := func(from string, want int, code string) net.Conn {
		t.Helper()
		c, resp, body := openFrom(t, addr, token(), from)
		if resp.StatusCode != want {
			t.Fatalf("a stream from %s: got %d %s, want %d %s", from, resp.StatusCode, body, want, code)
		}
		if want == http.StatusOK {
			return c
		}
		var p struct{ Code string }
		if err := json.Unmarshal(body, &p); err != nil || p.Code != code || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("a stream from %s: got %s %s, want the problem envelope with %s", from, resp.Header.Get("Content-Type"), body, code)
		}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 {
			t.Fatalf("a stream from %s: Retry-After %q, want whole seconds", from, resp.Header.Get("Retry-After"))
		}
		return nil
	}
	waitOpen := func(want int) {
		t.Helper()
		// The server sees a client leave at its next look (every
		// peerCheckEvery); the bound only keeps a broken server from
		// hanging the test.
		if !poll.Within(30*time.Second, func() bool { return hub.Count() == want }) {
			t.Fatalf("%d streams open, want %d", hub.Count(), want)
		}
	}

	// One /64: two of its addresses fill its place, a third is refused.
	a1 := open("2001:db8:1:2::1", http.StatusOK, "")
	open("2001:db8:1:2:aaaa:bbbb:cccc:dddd", http.StatusOK, "")
	open("2001:db8:1:2::3", http.StatusTooManyRequests, "RATE_LIMITED")
	// Another /64 and an IPv4 address fill the instance.
	open("2001:db8:1:3::1", http.StatusOK, "")
	b1 := open("198.51.100.7", http.StatusOK, "")
	open("198.51.100.8", http.StatusServiceUnavailable, "UPSTREAM_UNAVAILABLE")
	// Refused by its address although the instance is full: the address
	// is checked first.
	open("2001:db8:1:2::4", http.StatusTooManyRequests, "RATE_LIMITED")
	waitOpen(4)

	b1.Close()
	waitOpen(3)
	open("198.51.100.8", http.StatusOK, "")
	open("198.51.100.9", http.StatusServiceUnavailable, "UPSTREAM_UNAVAILABLE")

	a1.Close()
	waitOpen(3)
	open("2001:db8:1:2::5", http.StatusOK, "")

	m, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range m {
		if f.GetName() != "bff_limit_refusals_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			got[s.GetLabel()[0].GetValue()] = s.GetCounter().GetValue()
		}
	}
	if got["streams_address"] != 2 || got["streams_instance"] != 2 {
		t.Fatalf("refusals counted %v, want streams_address 2 and streams_instance 2", got)
	}
}
