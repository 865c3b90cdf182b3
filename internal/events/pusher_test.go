package events

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/payments"
)

// changes is a user's changes in memory.
type changes struct {
	mu   sync.Mutex
	list []payments.Change
	err  error // Position's
}

func (c *changes) add(seq int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list = append(c.list, payments.Change{Seq: seq, Record: payments.Record{Key: "k"}})
}

func (c *changes) Changes(_ context.Context, _ string, after int64) ([]payments.Change, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []payments.Change
	for _, ch := range c.list {
		if ch.Seq > after {
			out = append(out, ch)
		}
	}
	return out, nil
}

func (c *changes) Position(context.Context, string) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	return int64(len(c.list)), nil
}

// sessions answers Alive with until and err.
type sessions struct {
	until time.Time
	err   error
}

func (s sessions) Alive(context.Context, string) (time.Time, error) { return s.until, s.err }
func (s sessions) Member() bool                                     { return true }

var live = sessions{until: time.Now().Add(time.Hour)}

// tcpPair is a connected pair of loopback TCP connections: the server's
// end (a socket, as the HTTP server's) and the client's.
func tcpPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return server, client
}

// run runs p until the test ends, and waits for it to return.
func run(t *testing.T, p *Pusher) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

// readUntil reads from r until a line starts with prefix, within 5 s.
func readUntil(t *testing.T, c net.Conn, r *bufio.Reader, prefix string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading for %q: %v", prefix, err)
		}
		if strings.HasPrefix(line, prefix) {
			return
		}
	}
}

// A stream opened on a taken connection gets its retry hint and its
// catch-up, then the changes it is woken for; when Run's ctx ends, the
// stream still open is closed and unregistered, Run returns, and Open
// refuses what comes after.
func TestPusherRunsUntilStopped(t *testing.T) {
	hub := NewHub(Limits{})
	ch := &changes{}
	ch.add(1)
	p := NewPusher(hub, ch, live, time.Second)
	stop := run(t, p)
	server, client := tcpPair(t)
	r := bufio.NewReader(client)
	err := p.Open(context.Background(), Opening{UserID: "u", SessionID: "s", Handle: "h", LiveUntil: time.Now().Add(time.Hour), After: 0},
		func() Out { return Conn(server) })
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	readUntil(t, client, r, "retry: 2000")
	readUntil(t, client, r, "id: 1")
	ch.add(2)
	hub.Changed("u")
	readUntil(t, client, r, "id: 2")
	readUntil(t, client, r, ": keep-alive") // a second's silence

	stop()
	if n := hub.Count(); n != 0 {
		t.Fatalf("%d streams registered after Run returned, want 0", n)
	}
	_ = client.SetReadDeadline(time.Now().Add(5 * time.Second))
	if rest, err := io.ReadAll(r); err != nil {
		t.Fatalf("the stream was not closed when Run returned: %v (read %q)", err, rest)
	}
	called := false
	err = p.Open(context.Background(), Opening{UserID: "u", SessionID: "s", Handle: "h", After: -1}, func() Out { called = true; return nil })
	if !errors.Is(err, ErrClosing) || called {
		t.Fatalf("Open after Run: got %v (connected: %v), want ErrClosing and no connection", err, called)
	}
}

// A stream Open does not take is refused before connect is called, and
// leaves nothing registered.
func TestPusherOpenRefusals(t *testing.T) {
	storeDown := errors.New("store down")
	ledgerDown := errors.New("ledger down")
	cases := []struct {
		name     string
		sessions Sessions
		position error
		full     bool // the user's one place is taken
		want     error
	}{
		{name: "the session ended", sessions: sessions{}, want: ErrSessionEnded},
		{name: "the session store does not answer", sessions: sessions{err: storeDown}, want: ErrSessionUnchecked},
		{name: "the position cannot be read", sessions: live, position: ledgerDown, want: ledgerDown},
		{name: "the user's bound", sessions: live, full: true, want: ErrTooMany},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hub := NewHub(Limits{PerUser: 1})
			if c.full {
				if err := hub.Add(stream("u", "other", &signals{})); err != nil {
					t.Fatal(err)
				}
			}
			p := NewPusher(hub, &changes{err: c.position}, c.sessions, 0)
			run(t, p)
			called := false
			err := p.Open(context.Background(), Opening{UserID: "u", SessionID: "s", Handle: "h", After: -1}, func() Out { called = true; return nil })
			if !errors.Is(err, c.want) || called {
				t.Fatalf("got %v (connected: %v), want %v and no connection", err, called, c.want)
			}
			if c.want == ErrSessionUnchecked && !errors.Is(err, storeDown) {
				t.Fatalf("got %v, want the store's error wrapped", err)
			}
			want := 0
			if c.full {
				want = 1
			}
			if n := hub.Count(); n != want {
				t.Fatalf("%d streams registered, want %d", n, want)
			}
		})
	}
}

// nopSignal ignores signals: the test calls step itself.
type nopSignal struct{}

func (nopSignal) Signal() {}
func (nopSignal) Cut()    {}

// distrusting is a session store whose lease is renewed while the pusher
// reads it: the renewal forgot every copy, so it asks every stream for a
// recheck (as OnEnd("") does) and then holds again. The session has ended.
type distrusting struct {
	s      *Stream
	alives int
}

func (d *distrusting) Alive(context.Context, string) (time.Time, error) {
	d.alives++
	return time.Time{}, nil
}

func (d *distrusting) Member() bool {
	d.s.wake(true)
	return true
}

// A renewal between the pusher's two readings (the lease and the stream's
// recheck) cannot hide both: the session is checked, and the stream of an
// ended session ends before anything more is sent.
func TestStepSeesARenewalBetweenItsReadings(t *testing.T) {
	d := &distrusting{}
	p := NewPusher(NewHub(Limits{}), &changes{}, d, time.Minute)
	ps := &pushStream{p: p, fd: -1, sessionID: "s", liveUntil: time.Now().Add(time.Hour), lastWrite: time.Now()}
	ps.Signaler = nopSignal{}
	d.s = &ps.Stream
	if p.step(context.Background(), ps) {
		t.Fatal("the stream of an ended session goes on")
	}
	if d.alives != 1 {
		t.Fatalf("the session was checked %d times, want 1", d.alives)
	}
}
