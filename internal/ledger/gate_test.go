package ledger

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fintech-bff/bff/internal/testing/syncbuf"
)

// A probe answered within confirm (a slow call, a caller that went away)
// never shuts the gate; one that is not shuts it until it is answered;
// a statement the database refused starts no probe.
func TestGateShutsOnlyWhileTheProbeIsUnanswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		answer := make(chan error)
		probes := 0
		var logs syncbuf.Buffer
		g := newGate(func(ctx context.Context) error {
			probes++
			if ctx.Value(probing{}) == nil || !g0(ctx) {
				t.Error("the probe's context is not marked: its dial would be refused while the gate is shut")
			}
			select {
			case err := <-answer:
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		}, slog.New(slog.NewJSONHandler(&logs, nil)))
		defer g.close()

		g.failed(&pgconn.PgError{Code: "23505"}) // a unique violation: the database answered
		synctest.Wait()
		if probes != 0 || !g.open() {
			t.Fatalf("a refused statement: %d probes, open %v; want none, open", probes, g.open())
		}

		g.failed(os.ErrDeadlineExceeded)
		time.Sleep(g.confirm / 2)
		answer <- nil // answered within confirm
		time.Sleep(g.confirm)
		if !g.open() {
			t.Fatal("the gate shut although the probe was answered within confirm")
		}

		g.failed(context.DeadlineExceeded)
		g.failed(context.DeadlineExceeded) // one probe at a time
		time.Sleep(g.confirm + time.Millisecond)
		if g.open() {
			t.Fatal("the gate is open with the probe unanswered past confirm")
		}
		if g.dials(context.Background()) {
			t.Error("a shut gate lets a pool dial")
		}
		answer <- errors.New("connection refused") // failed fast: tried again after retry
		time.Sleep(g.retry)
		answer <- nil
		synctest.Wait()
		if !g.open() || !g.dials(context.Background()) {
			t.Fatal("the gate stayed shut after the probe was answered")
		}
		if probes != 3 {
			t.Errorf("%d probes, want 3 (one per suspicion, one more after a failed probe)", probes)
		}
		// One line when it shut, one when it opened: the operator sees
		// why payments were refused, and for how long.
		lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
		if len(lines) != 2 || !strings.Contains(lines[0], `"level":"WARN"`) || !strings.Contains(lines[0], `"cause":"a call timed out"`) ||
			!strings.Contains(lines[1], `"level":"INFO"`) || !strings.Contains(lines[1], `"refusedFor"`) {
			t.Errorf("the gate's log:\n%s\nwant a warning when it shut (with the cause) and a line when it opened", logs.String())
		}
	})
}

// g0 reports whether a shut gate would let ctx dial: the probe's own
// context always may.
func g0(ctx context.Context) bool {
	shut := &gate{}
	shut.shut.Store(true)
	return shut.dials(ctx)
}

// A connection whose read timed out reads nothing more (pgx's drain of it
// ends at once) and tells the gate.
func TestQuickConnGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		suspected := 0
		g := newGate(func(ctx context.Context) error { suspected++; <-ctx.Done(); return ctx.Err() }, nil)
		defer g.close()

		client, server := net.Pipe()
		defer server.Close()
		q := &quickConn{Conn: client, gate: g}
		_ = q.SetDeadline(time.Now()) // the context watcher: the call's context ended
		if _, err := q.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the timed-out read: %v", err)
		}
		_ = q.SetDeadline(time.Now().Add(15 * time.Second)) // pgx's drain
		began := time.Now()
		if _, err := q.Read(make([]byte, 1)); !errors.Is(err, errGaveUp) || time.Since(began) != 0 {
			t.Errorf("a read after the timeout: %v after %v, want errGaveUp at once", err, time.Since(began))
		}
		synctest.Wait()
		if suspected != 1 {
			t.Errorf("the gate probed %d times after the timeout, want 1", suspected)
		}
	})
}

// A connection dials (each host of a multi-host URL) until it is made,
// then never again: pgx's cancel request is refused; a shut gate refuses
// every dial but its probe's.
func TestWithoutCancel(t *testing.T) {
	cfg, err := pgx.ParseConfig("postgres://u@127.0.0.1:1/db")
	if err != nil {
		t.Fatal(err)
	}
	dials := 0
	cfg.DialFunc = func(context.Context, string, string) (net.Conn, error) {
		dials++
		c, s := net.Pipe()
		s.Close()
		return c, nil
	}
	g := newGate(nil, nil)
	defer g.close()
	withoutCancel(cfg, g)
	for range 2 {
		c, err := cfg.DialFunc(context.Background(), "tcp", "127.0.0.1:1")
		if err != nil {
			t.Fatalf("a dial before the connection is made: %v", err)
		}
		if _, ok := c.(*quickConn); !ok {
			t.Errorf("a dialled connection is a %T, want *quickConn", c)
		}
	}
	if err := cfg.AfterConnect(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.DialFunc(context.Background(), "tcp", "127.0.0.1:1"); !errors.Is(err, errNoCancel) {
		t.Errorf("a dial after the connection was made (a cancel request): %v, want errNoCancel", err)
	}

	shut, _ := pgx.ParseConfig("postgres://u@127.0.0.1:1/db")
	shut.DialFunc = func(context.Context, string, string) (net.Conn, error) {
		dials++
		c, s := net.Pipe()
		s.Close()
		return c, nil
	}
	withoutCancel(shut, g)
	g.shut.Store(true)
	if _, err := shut.DialFunc(context.Background(), "tcp", "127.0.0.1:1"); !errors.Is(err, errShut) {
		t.Errorf("a dial with the gate shut: %v, want errShut", err)
	}
	if _, err := shut.DialFunc(context.WithValue(context.Background(), probing{}, true), "tcp", "127.0.0.1:1"); err != nil {
		t.Errorf("the probe's dial with the gate shut: %v", err)
	}
	if dials != 3 || g.dialled.Load() != 3 {
		t.Errorf("%d dials (%d counted), want 3", dials, g.dialled.Load())
	}
}
