package ledger

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// gate sheds new claims at once while the database does not answer, and
// finds out that it answers again with one connection at a time.
//
// Without it, a frozen database (a stalled virtual machine, a failover's
// pause) is met by every new payment's claim and every pool: each call
// takes a slot for its whole timeout, then its pool dials again, and the
// frozen server leaves each new connection in its listen queue. When the
// server resumes it first forks a process for every one of those, whose
// clients are long gone: the first payment after the resume came a second
// or more late, and under retrying clients much later. With the gate, a
// call that meets the outage (a claim's error, or any connection's read or
// write that timed out) starts the probe; when the probe has had no answer
// within confirm, the gate shuts: claims are refused (ErrUnavailable, the
// caller's 503 with a Retry-After) without touching a pool, and no pool
// dials (BeforeConnect, and the dialer for pgx's cancel requests). The
// probe waits on one connection attempt for as long as the server is
// frozen, so it is answered the moment the server runs again, and its
// SELECT 1 opens the gate. A probe answered within confirm (a slow call,
// a caller that went away) never shuts it.
type gate struct {
	shut  atomic.Bool
	probe func(context.Context) error
	ctx   context.Context // ends on Close: the probe stops
	stop  context.CancelFunc

	mu      sync.Mutex
	probing bool      // a probe runs; the gate shuts if it is still running at confirm
	cause   string    // what started the probe, for the log
	shutAt  time.Time // when the gate shut, for the log

	log *slog.Logger

	dialled atomic.Int64 // connections dialled through it, the probe's included

	// confirm is how long a probe may take before the gate shuts.
	confirm time.Duration
	// probeWait bounds one probe's attempt (connecting and its SELECT 1);
	// long, so that a frozen server is waited on, not dialled again.
	probeWait time.Duration
	// retry is the first wait after a probe that failed fast (the server
	// refused the connection, or is starting up); it doubles up to a second.
	retry time.Duration
}

func newGate(probe func(context.Context) error, log *slog.Logger) *gate {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, stop := context.WithCancel(context.Background())
	return &gate{probe: probe, log: log, ctx: ctx, stop: stop, confirm: 250 * time.Millisecond, probeWait: 30 * time.Second, retry: 50 * time.Millisecond}
}

// errShut is why a claim was refused while the gate is shut.
var errShut = errors.New("the database did not answer; new claims are refused until it answers a probe")

// open reports whether new claims may go to the database (always, for a
// ledger without a gate: the background's view).
func (g *gate) open() bool { return g == nil || !g.shut.Load() }

// failed starts the probe when err says the database is not answering (a
// call's timeout, a connection that failed or was cut, a server shutting
// down or starting up); any other error (a statement the database
// refused) does nothing.
func (g *gate) failed(err error) {
	if g == nil || err == nil || !outage(err) || g.ctx.Err() != nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.probing {
		return
	}
	g.probing, g.cause = true, causeOf(err)
	time.AfterFunc(g.confirm, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.probing {
			g.shut.Store(true)
			g.shutAt = time.Now()
			g.log.Warn("the payments ledger's database does not answer: new payments are refused until it answers a probe",
				slog.String("cause", g.cause), slog.Duration("probeUnansweredFor", g.confirm))
		}
	})
	go g.run()
}

// run probes until the database answers (or Close), then opens the gate.
func (g *gate) run() {
	wait := g.retry
	for g.ctx.Err() == nil {
		ctx, cancel := context.WithTimeout(context.WithValue(g.ctx, probing{}, true), g.probeWait)
		err := g.probe(ctx)
		cancel()
		if err == nil {
			g.mu.Lock()
			g.probing = false
			if g.shut.Swap(false) {
				g.log.Info("the payments ledger's database answers again: new payments are taken",
					slog.Duration("refusedFor", time.Since(g.shutAt).Round(time.Millisecond)))
			}
			g.mu.Unlock()
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-g.ctx.Done():
			t.Stop()
		case <-t.C:
		}
		wait = min(2*wait, time.Second)
	}
}

// probing marks the probe's context: its dial goes through a shut gate.
type probing struct{}

// dials reports whether a connection may be dialled with ctx now.
func (g *gate) dials(ctx context.Context) bool {
	return g.open() || ctx.Value(probing{}) != nil
}

// close stops the probe; the gate stays as it is.
func (g *gate) close() {
	if g != nil {
		g.stop()
	}
}

// causeOf names an outage's error for the log without its text (which
// may name hosts and users).
func causeOf(err error) string {
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr):
		return "PostgreSQL error " + pgErr.Code
	case pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded):
		return "a call timed out"
	default:
		return "a connection failed"
	}
}

// outage reports whether err says the database is not answering rather
// than refusing a statement.
func outage(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// 08: connection exceptions; 57P: the server shutting down,
		// crashed, or not accepting connections yet; 53300: too many
		// connections.
		return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P") || pgErr.Code == "53300"
	}
	var ne net.Error
	var ce *pgconn.ConnectError
	return pgconn.Timeout(err) || errors.As(err, &ne) || errors.As(err, &ce) || pgconn.SafeToRetry(err) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// probeWith is g's probe: one new connection to the database of cfg (no
// connect timeout of its own: ctx bounds it), SELECT 1, closed.
func probeWith(cfg *pgx.ConnConfig, g *gate) func(context.Context) error {
	return func(ctx context.Context) error {
		c := cfg.Copy()
		c.ConnectTimeout = 0
		withoutCancel(c, g)
		conn, err := pgx.ConnectConfig(ctx, c)
		if err != nil {
			return err
		}
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			defer cancel()
			_ = conn.Close(cctx)
		}()
		_, err = conn.Exec(ctx, "SELECT 1")
		return err
	}
}
