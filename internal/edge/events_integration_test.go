//go:build integration

package edge

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	eventhub "github.com/fintech-bff/bff/internal/events"
	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/metrics"
	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/proxy"
	"github.com/fintech-bff/bff/internal/session"
)

// slowPosition delays reading a user's position: the window in which a
// stream is registered but has no connection yet.
type slowPosition struct {
	PaymentChanges
	d time.Duration
}

func (s slowPosition) Position(ctx context.Context, u string) (int64, error) {
	time.Sleep(s.d)
	return s.PaymentChanges.Position(ctx, u)
}

// hookBudget runs f when a request spends its budget: after the session's
// lookup, before the stream is registered.
type hookBudget struct{ f func(id string) }

func (b hookBudget) Allow(id string) (bool, time.Duration) { b.f(id); return true, 0 }

// streamsServer is an edge serving GET /bff/events over an in-process
// ledger, with a live session manager on the test Redis, on a real
// listener; ch wraps what it reads changes from.
func streamsServer(t testing.TB, ch func(PaymentChanges) PaymentChanges, budget SessionBudget, heartbeat time.Duration) (*httptest.Server, *session.Manager, *eventhub.Hub) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	_, sessions, cookies := liveSessions(ctx, t)
	led, _ := ledger.NewMemory(nil, make([]byte, 32), nil)
	pay := payments.New(payments.Options{Ledger: led})
	hub := eventhub.NewHub(0)
	sessions.OnEnd(hub.SessionEnded)
	go func() { _ = led.Listen(ctx, hub.Changed, hub.Resync, slog.New(slog.DiscardHandler)) }()
	e := NewPublic(Deps{
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Observe: metrics.New(prometheus.NewRegistry()).Edge,
		Sessions: sessions, Cookies: cookies, PublicOrigin: "http://bff.local", PaymentRecords: pay, Budget: budget,
		Forwarder: proxy.New(proxy.Options{BaseURL: &url.URL{Scheme: "http", Host: "127.0.0.1:9"}, Routes: proxy.NewRoutes(nil), Timeout: time.Second, MaxBodyBytes: 1 << 20}),
		Streams:   &Streams{Hub: hub, Changes: ch(pay), Heartbeat: heartbeat},
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

// A stream signalled while it opens (its user's payments change without
// pause, and a slow ledger keeps it between its registration and its
// connection for 2.5 s, through heartbeat scans) opens, and nothing writes
// to it before it has a connection (found in review: a worker wrote to a
// nil connection and the process died).
func TestStreamSignalledWhileOpening(t *testing.T) {
	srv, sessions, hub := streamsServer(t, func(p PaymentChanges) PaymentChanges { return slowPosition{p, 2500 * time.Millisecond} }, nil, 2*time.Second)
	id, _, err := sessions.Create(context.Background(), session.New{UserID: "opening", Method: session.MethodDev})
	if err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	defer stop.Store(true)
	go func() {
		for !stop.Load() {
			hub.Changed("opening")
			time.Sleep(time.Millisecond)
		}
	}()
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
	srv, s, hub := streamsServer(t, func(p PaymentChanges) PaymentChanges { return p }, budget, 2*time.Second)
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
	srv, sessions, hub := streamsServer(t, func(p PaymentChanges) PaymentChanges { return p }, nil, 2*time.Second)
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
	for hub.Count() != 1 {
		time.Sleep(time.Millisecond)
	}
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
