package ledger

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"slices"
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
			if !isProbe(ctx) {
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
		if probes != 0 || !g.open() || !g.quiet() {
			t.Fatalf("a refused statement: %d probes, open %v; want none, open", probes, g.open())
		}

		g.failed(os.ErrDeadlineExceeded)
		if g.quiet() {
			t.Error("quiet while a probe runs: a cancel request would be dialled to a database in doubt")
		}
		time.Sleep(g.confirm / 2)
		answer <- nil // answered within confirm
		time.Sleep(g.confirm)
		if !g.open() || !g.quiet() {
			t.Fatal("the gate shut although the probe was answered within confirm")
		}

		g.failed(context.DeadlineExceeded)
		g.failed(context.DeadlineExceeded) // one probe at a time
		time.Sleep(g.confirm + time.Millisecond)
		if g.open() {
			t.Fatal("the gate is open with the probe unanswered past confirm")
		}
		answer <- &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")} // failed fast: tried again after retry
		time.Sleep(g.retry)
		answer <- nil
		synctest.Wait()
		if !g.open() {
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

// The confirm timer of a probe answered in time does not shut the gate
// for the next probe, started just before that timer fires.
func TestGateIgnoresAnEarlierProbesTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		answer := make(chan error)
		g := newGate(func(ctx context.Context) error {
			select {
			case err := <-answer:
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		}, nil)
		defer g.close()
		g.failed(os.ErrDeadlineExceeded)
		time.Sleep(10 * time.Millisecond)
		answer <- nil // the first probe, answered at 10 ms
		synctest.Wait()
		time.Sleep(230 * time.Millisecond)
		g.failed(os.ErrDeadlineExceeded)  // the second, at 240 ms
		time.Sleep(15 * time.Millisecond) // past the first one's timer (250 ms)
		if !g.open() {
			t.Fatal("the first probe's timer shut the gate 15 ms into the second probe")
		}
		answer <- nil
		synctest.Wait()
		if !g.open() {
			t.Fatal("shut after the second probe was answered")
		}
	})
}

// A probe the server answers with an error of its own (a password, too
// many connections) opens the gate: no outage to wait out; it is logged.
func TestGateOpensWhenTheServerAnswersWithAnError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs syncbuf.Buffer
		g := newGate(func(ctx context.Context) error {
			time.Sleep(time.Second) // past confirm: shut meanwhile
			return &pgconn.PgError{Code: "28P01"}
		}, slog.New(slog.NewJSONHandler(&logs, nil)))
		defer g.close()
		g.failed(os.ErrDeadlineExceeded)
		time.Sleep(500 * time.Millisecond)
		if g.open() {
			t.Fatal("open with the probe unanswered past confirm")
		}
		synctest.Wait()
		time.Sleep(time.Second)
		synctest.Wait()
		if !g.open() {
			t.Fatal("still shut after the server answered the probe with an error")
		}
		if !strings.Contains(logs.String(), `"level":"ERROR"`) || !strings.Contains(logs.String(), "28P01") {
			t.Errorf("the log does not say the server refused the probe:\n%s", logs.String())
		}
	})
}

// A connection whose read timed out reads and writes nothing more (pgx's
// drain of it ends at once), with a timeout pgx reports as its context's
// error, and tells the gate; a deadline that was a caller's leaving does
// not.
func TestQuickConnGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		suspected := 0
		g := newGate(func(ctx context.Context) error { suspected++; <-ctx.Done(); return ctx.Err() }, nil)
		defer g.close()

		left, serverLeft := net.Pipe()
		defer serverLeft.Close()
		q0 := &quickConn{Conn: left, gate: g}
		q0.callerLeft.Store(true)
		_ = q0.SetDeadline(time.Now())
		if _, err := q0.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the read of a caller that left: %v", err)
		}
		synctest.Wait()
		if suspected != 0 || !g.quiet() {
			t.Fatalf("a caller's leaving started %d probes", suspected)
		}

		client, server := net.Pipe()
		defer server.Close()
		q := &quickConn{Conn: client, gate: g}
		_ = q.SetDeadline(time.Now()) // the context watcher: the call's time ran out
		if _, err := q.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the timed-out read: %v", err)
		}
		_ = q.SetDeadline(time.Now().Add(15 * time.Second)) // pgx's drain
		began := time.Now()
		_, err := q.Read(make([]byte, 1))
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() || time.Since(began) != 0 {
			t.Errorf("a read after the timeout: %v after %v, want a timeout at once", err, time.Since(began))
		}
		if _, err := q.Write([]byte{'X'}); !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(began) != 0 {
			t.Errorf("a write after the timeout: %v, want a timeout at once", err)
		}
		synctest.Wait()
		if suspected != 1 {
			t.Errorf("the gate probed %d times after the timeout, want 1", suspected)
		}
	})
}

// A connection dials (each host of a multi-host URL) until it is made;
// then a dial is pgx's cancel request, sent while the gate is quiet and
// refused while it doubts the database. A shut gate refuses the gated
// pools' dials, not the others' nor its probe's.
func TestWithoutCancel(t *testing.T) {
	dials := 0
	config := func(part int, g *gate) *pgx.ConnConfig {
		cfg, err := pgx.ParseConfig("postgres://u@127.0.0.1:1/db")
		if err != nil {
			t.Fatal(err)
		}
		cfg.DialFunc = func(context.Context, string, string) (net.Conn, error) {
			dials++
			c, s := net.Pipe()
			s.Close()
			return c, nil
		}
		withoutCancel(cfg, g, part)
		return cfg
	}
	dial := func(cfg *pgx.ConnConfig, ctx context.Context) error {
		c, err := cfg.DialFunc(ctx, "tcp", "127.0.0.1:1")
		if err == nil {
			if _, ok := c.(*quickConn); !ok {
				t.Errorf("a dialled connection is a %T, want *quickConn", c)
			}
		}
		return err
	}
	g := newGate(func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }, nil)
	defer g.close()
	cfg := config(ungated, g)
	for range 2 {
		if err := dial(cfg, context.Background()); err != nil {
			t.Fatalf("a dial before the connection is made: %v", err)
		}
	}
	if err := cfg.AfterConnect(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if err := dial(cfg, context.Background()); err != nil {
		t.Errorf("a cancel request with the gate quiet: %v, want it sent", err)
	}
	g.failed(os.ErrDeadlineExceeded) // a probe runs
	if err := dial(cfg, context.Background()); !errors.Is(err, errNoCancel) {
		t.Errorf("a cancel request while a probe runs: %v, want errNoCancel", err)
	}

	g.shut.Store(true)
	if err := dial(config(gated, g), context.Background()); !errors.Is(err, errShut) {
		t.Errorf("a gated pool's dial with the gate shut: %v, want errShut", err)
	}
	if err := dial(config(ungated, g), context.Background()); err != nil {
		t.Errorf("the claimed payments' pool's dial with the gate shut: %v, want it made", err)
	}
	if err := dial(config(probe, g), context.WithValue(context.Background(), probing{}, true)); err != nil {
		t.Errorf("the probe's dial with the gate shut: %v", err)
	}
	if dials != 5 || g.dialled.Load() != 4 {
		t.Errorf("%d dials (%d counted), want 5 (4 counted: not the probe's)", dials, g.dialled.Load())
	}
}

// A probe that waited on a silent server (its connect timeout) is tried
// again at once, so that one is always waiting when the server runs
// again; one that failed fast backs off.
func TestGateProbesASilentServerWithoutPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var starts []time.Duration
		begin := time.Now()
		g := newGate(func(ctx context.Context) error {
			starts = append(starts, time.Since(begin))
			if len(starts) <= 3 {
				time.Sleep(3 * time.Second) // the connect timeout of a frozen server
				return &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
			}
			return nil
		}, nil)
		defer g.close()
		g.failed(os.ErrDeadlineExceeded)
		time.Sleep(20 * time.Second)
		synctest.Wait()
		want := []time.Duration{0, 3 * time.Second, 6 * time.Second, 9 * time.Second}
		if !slices.Equal(starts, want) || !g.open() {
			t.Errorf("probes began at %v (open %v), want %v: each right after the last timed out", starts, g.open(), want)
		}
	})
}

// close returns only once the probe has: one still connecting when the
// ledger closes holds it, so the pools close after it; and no probe
// starts after close.
func TestGateCloseWaitsForTheProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		probes := 0
		g := newGate(func(ctx context.Context) error {
			probes++
			<-ctx.Done()
			<-release // the probe's connection, still being made
			return ctx.Err()
		}, nil)
		g.failed(os.ErrDeadlineExceeded)
		synctest.Wait()
		closed := make(chan struct{})
		go func() { g.close(); close(closed) }()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("close returned while the probe was still running")
		default:
		}
		close(release)
		synctest.Wait()
		select {
		case <-closed:
		default:
			t.Fatal("close did not return once the probe had")
		}
		g.failed(os.ErrDeadlineExceeded)
		synctest.Wait()
		if probes != 1 {
			t.Fatalf("%d probes, want 1: none may start after close", probes)
		}
	})
}
