package ledger

import (
	"context"
	"errors"
	"net"
	"os"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
// server ran again. So the ledger's connections never dial a cancel
// request (once a connection is made its dialer refuses: withoutCancel),
// and a connection whose read or write timed out reads nothing more, so
// the drain ends at once (quickConn). The statement the server was running
// ends when it finds its client gone; each of the ledger's is one short
// statement.

// errNoCancel is the dialer's answer to pgx's cancel request.
var errNoCancel = errors.New("ledger: no cancel request: the connection is closed instead")

// errGaveUp is a read of a connection whose caller gave up.
var errGaveUp = errors.New("ledger: the connection timed out and is being closed")

// withoutCancel sets up one connection's configuration (a copy, as
// pgxpool's BeforeConnect gets): its dials go through g (refused while g
// is shut, but for g's probe) and are wrapped in quickConn until the
// connection is made (every host of a multi-host URL may be dialled);
// after that its dialer refuses, and pgx's cancel request with it.
func withoutCancel(cfg *pgx.ConnConfig, g *gate) {
	made := new(atomic.Bool)
	dial, after := cfg.DialFunc, cfg.AfterConnect
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if made.Load() {
			return nil, errNoCancel
		}
		if !g.dials(ctx) {
			return nil, errShut
		}
		if g != nil {
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
}

// quickConn is a dialled connection of the ledger's (see above).
type quickConn struct {
	net.Conn
	gate   *gate
	gaveUp atomic.Bool // a read or write timed out
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
	n, err := q.Conn.Write(b)
	q.timedOut(err)
	return n, err
}

// timedOut marks the connection given up, and tells the gate, when err is
// a deadline's: the server did not answer within a call's context.
func (q *quickConn) timedOut(err error) {
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		q.gaveUp.Store(true)
		q.gate.failed(err)
	}
}
