package ledger

import (
	"context"
	"errors"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
)

// A call whose context ends gives up its connection: the context watcher
// (pgconn.DeadlineContextWatcherHandler) puts a deadline on its socket, and
// pgx then closes it in the background, first sending the server a cancel
// request on a new connection and waiting for its answer, then draining
// the socket until the server closes it, each for up to 15 s. Against a
// frozen server both wait the whole 15 s, the pool counts the connection
// as taken until they end, and each cancel request is one more connection
// the server forks a process for when it resumes: a freeze of a few
// seconds left every pool full of connections being closed long after the
// server ran again. So a connection whose read or write timed out reads
// and writes nothing more (quickConn: the drain ends at once), and while
// the gate doubts the database (a probe runs, or it is shut) no cancel
// request is dialled (withoutCancel); otherwise the cancel is sent, so
// that the server stops a statement whose caller left.
//
// A pgx connection is never used again after a read's deadline passed on
// the ledger's paths: pgxpool destroys a connection whose call failed, and
// the listener drops its connection on any error. (pgconn could keep one
// after a timeout in WaitForNotification or CheckConn; quickConn would
// fail its next call.)

// errNoCancel is the dialer's answer to pgx's cancel request while the
// gate doubts the database.
var errNoCancel = errors.New("ledger: no cancel request while the database does not answer: the connection is closed instead")

// gaveUp is a read or write of a connection whose deadline passed once: a
// timeout (net.Error), so that pgx reports it as its context's error.
type gaveUp struct{}

func (gaveUp) Error() string   { return "ledger: the connection timed out and is being closed" }
func (gaveUp) Timeout() bool   { return true }
func (gaveUp) Temporary() bool { return true }
func (gaveUp) Unwrap() error   { return os.ErrDeadlineExceeded }

var errGaveUp net.Error = gaveUp{}

// A connection's part in the gate (withoutCancel).
const (
	ungated = iota // the claimed payments' pool, the listener: dials whatever the gate says
	gated          // the new claims' and the background's pools: no dial while the gate is shut
	probe          // the gate's probe: dials through it, not counted
)

// withoutCancel sets up one connection's configuration (a copy, as
// pgxpool's BeforeConnect gets) for its part in g: its dials are wrapped
// in quickConn until the connection is made (every host of a multi-host
// URL may be dialled); after that a dial is pgx's cancel request, refused
// unless g is quiet. Its context watcher tells the quickConn whether a
// deadline it puts on the socket is the caller's leaving (no sign of an
// outage) or a timeout.
func withoutCancel(cfg *pgx.ConnConfig, g *gate, part int) {
	made := new(atomic.Bool)
	dial, after, build := cfg.DialFunc, cfg.AfterConnect, cfg.BuildContextWatcherHandler
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		switch {
		case made.Load() && !g.quiet():
			return nil, errNoCancel
		case part == gated && !g.open():
			return nil, errShut
		}
		if part != probe && g != nil {
			g.dialled.Add(1)
		}
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &quickConn{Conn: c, gate: g}, nil
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgconn.PgConn) error {
		made.Store(true)
		if after != nil {
			return after(ctx, c)
		}
		return nil
	}
	cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		h := build(c)
		if q := quickOf(c.Conn()); q != nil {
			return &watcher{Handler: h, q: q}
		}
		return h
	}
}

// watcher tells its quickConn why the deadline it is about to put came.
type watcher struct {
	ctxwatch.Handler
	q *quickConn
}

func (w *watcher) HandleCancel(ctx context.Context) {
	w.q.callerLeft.Store(errors.Is(ctx.Err(), context.Canceled))
	w.Handler.HandleCancel(ctx)
}

// quickConn is a dialled connection of the ledger's (see above).
type quickConn struct {
	net.Conn
	gate       *gate
	gaveUp     atomic.Bool // a read or write timed out
	callerLeft atomic.Bool // the last deadline was a cancelled context's, not a timeout's
}

func (q *quickConn) Read(b []byte) (int, error) {
	if q.gaveUp.Load() {
		return 0, errGaveUp
	}
	n, err := q.Conn.Read(b)
	q.timedOut(err)
	return n, err
}

func (q *quickConn) Write(b []byte) (int, error) {
	if q.gaveUp.Load() {
		return 0, errGaveUp
	}
	n, err := q.Conn.Write(b)
	q.timedOut(err)
	return n, err
}

// timedOut marks the connection given up when err is a deadline's, and
// tells the gate unless the deadline was a caller's leaving.
func (q *quickConn) timedOut(err error) {
	if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
		return
	}
	q.gaveUp.Store(true)
	if !q.callerLeft.Load() {
		q.gate.failed(err)
	}
}

// quickOf is the quickConn under c (a tls.Conn's NetConn), or nil.
func quickOf(c net.Conn) *quickConn {
	for c != nil {
		if q, ok := c.(*quickConn); ok {
			return q
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = u.NetConn()
	}
	return nil
}

// connect makes one connection of its own (not a pool's) to cfg's
// database for its part in g, and the function that closes it (within a
// second, ctx's end or not).
func connect(ctx context.Context, cfg *pgx.ConnConfig, g *gate, part int) (*pgx.Conn, func(), error) {
	c := cfg.Copy()
	withoutCancel(c, g, part)
	conn, err := pgx.ConnectConfig(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	return conn, func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}, nil
}
