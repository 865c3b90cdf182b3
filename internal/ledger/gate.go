package ledger

import (
	"context"
	"crypto/tls"
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
// pause) is met by every new payment's claim: each takes a slot for its
// whole timeout, then its pool dials again, and the frozen server leaves
// each new connection in its listen queue. When the server resumes it
// first forks a process for every one of those, whose clients are long
// gone: the first payment after the resume came a second or more late,
// and under retrying clients much later. With the gate, a call that meets
// the outage (a claim's connection that could not be made, or any
// connection's read or write whose deadline passed; a caller that went
// away is no sign of one) starts the probe; when the probe has had no
// answer within confirm, the gate shuts: claims are refused
// (ErrUnavailable, the caller's 503 with a Retry-After) without touching a
// pool, the new claims' and the background loops' pools do not dial, and
// no connection dials a cancel request. The payments already claimed keep
// their pool and its dials, so that an outcome is stored the moment the
// database lets it. The probe connects as a pool does (connect_timeout a
// host, each host of the URL in turn) and is answered the moment a frozen
// server runs again; any answer of the server (SELECT 1, or an error of
// its own other than "starting up") opens the gate. A probe answered
// within confirm never shuts it.
type gate struct {
	shut  atomic.Bool
	probe func(context.Context) error
	ctx   context.Context // ends on Close: the probe stops
	stop  context.CancelFunc

	mu      sync.Mutex
	probing bool      // a probe runs; the gate shuts if it is still running at confirm
	round   int       // the probe's number: a confirm timer shuts only for its own
	cause   string    // what started the probe, for the log
	shutAt  time.Time // when the gate shut, for the log

	log *slog.Logger

	// probes is the running probe, if any: close waits for it.
	probes sync.WaitGroup

	dialled atomic.Int64 // connections dialled through it, but the probe's

	// confirm is how long a probe may take before the gate shuts.
	confirm time.Duration
	// probeWait bounds one probe's attempt (connecting to each host of
	// the URL, and its SELECT 1).
	probeWait time.Duration
	// retry is the first wait after a probe that failed fast; it doubles
	// up to a second. One that waited a second or more is tried again at
	// once.
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

// quiet reports whether no probe runs and the gate is open: the database
// is believed to answer (a cancel request may then be sent).
func (g *gate) quiet() bool {
	if g == nil {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.probing
}

// failed starts the probe when err says the database is not answering (a
// timeout, a connection that failed or was cut, a server shutting down
// or starting up); any other error (a statement the database refused)
// does nothing.
func (g *gate) failed(err error) {
	if g == nil || err == nil || !outage(err) || g.ctx.Err() != nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.probing || g.ctx.Err() != nil {
		return
	}
	g.probing, g.cause = true, causeOf(err)
	g.round++
	round := g.round
	time.AfterFunc(g.confirm, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.probing && g.round == round && g.ctx.Err() == nil {
			g.shut.Store(true)
			g.shutAt = time.Now()
			g.log.Warn("the payments ledger's database does not answer: new payments are refused until it answers a probe",
				slog.String("cause", g.cause), slog.Duration("probeUnansweredFor", g.confirm))
		}
	})
	g.probes.Go(g.run)
}

// run probes until the database answers (or Close), then opens the gate.
func (g *gate) run() {
	wait := g.retry
	for g.ctx.Err() == nil {
		ctx, cancel := context.WithTimeout(context.WithValue(g.ctx, probing{}, true), g.probeWait)
		began := time.Now()
		err := g.probe(ctx)
		cancel()
		if err == nil || !outage(err) {
			if err != nil {
				// The server answers, but refuses the ledger (a password,
				// pg_hba, too many connections): no outage to wait out,
				// and the claims' own errors say it.
				g.log.Error("the payments ledger's database answers but refused the probe",
					slog.String("cause", causeOf(err)))
			}
			g.mu.Lock()
			g.probing = false
			if g.shut.Swap(false) {
				g.log.Info("the payments ledger's database answers again: new payments are taken",
					slog.Duration("refusedFor", time.Since(g.shutAt).Round(time.Millisecond)))
			}
			g.mu.Unlock()
			return
		}
		if time.Since(began) >= time.Second {
			// The attempt waited on a server that did not answer (its
			// connect timeout): try again at once, so that the probe is
			// always waiting when the server runs again.
			wait = g.retry
			continue
		}
		// Failed fast (refused, starting up): back off, up to a second.
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

// isProbe reports whether ctx is the probe's.
func isProbe(ctx context.Context) bool { return ctx.Value(probing{}) != nil }

// close stops the probe and waits for it to return; the gate stays as
// it is. No probe starts after it (failed checks ctx under mu).
func (g *gate) close() {
	if g == nil {
		return
	}
	g.mu.Lock() // failed() checks ctx under mu: none starts a probe after this
	g.stop()
	g.mu.Unlock()
	g.probes.Wait()
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
		// crashed, or not accepting connections yet. Any other error is
		// the server's answer (too many connections, a password).
		return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P")
	}
	var certErr *tls.CertificateVerificationError
	var alert tls.AlertError
	if errors.As(err, &certErr) || errors.As(err, &alert) {
		return false // a TLS peer answered, and refused or was refused
	}
	var ne net.Error
	var ce *pgconn.ConnectError
	return pgconn.Timeout(err) || errors.As(err, &ne) || errors.As(err, &ce) || pgconn.SafeToRetry(err) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// probeWith is g's probe: one new connection to the database of cfg, as a
// pool makes one (connect_timeout a host, so that every host of a
// multi-host URL is tried; ctx bounds the whole), SELECT 1, closed.
func probeWith(cfg *pgx.ConnConfig, g *gate) func(context.Context) error {
	return func(ctx context.Context) error {
		conn, closeConn, err := connect(ctx, cfg, g, probe)
		if err != nil {
			return err
		}
		defer closeConn()
		_, err = conn.Exec(ctx, "SELECT 1")
		return err
	}
}
