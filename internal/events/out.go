package events

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fintech-bff/bff/internal/payments"
)

// Out is where a stream's bytes go (Open's connect): a connection taken
// from the HTTP server (Conn), or the server's response writer while the
// handler's goroutine holds the stream (Held).
type Out interface {
	write(b []byte, within time.Duration) error
	close()
}

// Conn is a stream's connection, taken from the HTTP server (hijacked)
// with its status line and headers written: the pusher's from Open on.
func Conn(c net.Conn) Out { return &connOut{conn: c} }

// Held is a stream written through the HTTP server's response writer w,
// its status written, where the connection cannot be taken (HTTP/2, a test
// recorder): the handler's goroutine holds the stream, in Open, until it
// ends.
func Held(w http.ResponseWriter) Out {
	return &heldOut{w: w, rc: http.NewResponseController(w), done: make(chan struct{})}
}

type connOut struct{ conn net.Conn }

func (o *connOut) write(b []byte, within time.Duration) error {
	_ = o.conn.SetWriteDeadline(time.Now().Add(within))
	_, err := o.conn.Write(b)
	return err
}

func (o *connOut) close() { _ = o.conn.Close() }

type heldOut struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	done chan struct{}
	once sync.Once
}

func (o *heldOut) write(b []byte, within time.Duration) error {
	// The server's WriteTimeout is for answers; a stream sets its own
	// deadline per write. ErrNotSupported (a test recorder) leaves none.
	_ = o.rc.SetWriteDeadline(time.Now().Add(within))
	if _, err := o.w.Write(b); err != nil {
		return err
	}
	return o.rc.Flush()
}

func (o *heldOut) close() { o.once.Do(func() { close(o.done) }) }

// pushStream is one open stream as the pusher writes it: one object, the
// hub's Stream embedded, and on Linux its socket a bare descriptor.
type pushStream struct {
	Stream
	p         *Pusher
	sessionID string
	queued    atomic.Bool // in the pusher's queue (or due to the scan)

	ready atomic.Bool // handed to the workers (add): its catch-up is written

	// cutMu guards cut and every change of fd and out, so that Cut (called
	// by the hub, never blocking) can make the socket's writes fail while a
	// writer holds mu.
	cutMu sync.Mutex
	cut   bool

	mu        sync.Mutex // one writer at a time; guards what follows
	fd        int        // the bare socket (peer_linux.go); -1: out
	out       Out        // the taken connection, or the server's writer
	after     int64      // the position sent last
	lastWrite time.Time
	// liveUntil is when the session would time out, as last checked (a
	// request since may have slid it): it is checked again only then, or
	// when the hub asks (a revocation ends the stream without a check).
	liveUntil time.Time
	ended     bool
	buf       []byte
}

// Signal implements Signaler: the stream has something to read.
func (ps *pushStream) Signal() { ps.p.enqueue(ps) }

// Cut implements Signaler: its session ended, so every later write fails
// (the socket is shut down; closed by the pusher later), and nothing more
// reaches the client once the revocation answers.
func (ps *pushStream) Cut() {
	ps.cutMu.Lock()
	defer ps.cutMu.Unlock()
	ps.cut = true
	switch o := ps.out.(type) {
	case nil:
		if ps.fd >= 0 {
			fdShutdown(ps.fd)
		}
	case *connOut:
		_ = o.conn.Close()
	}
	// A held stream (no connection of its own) checks cut before each
	// write (send).
}

// setOut sets where the stream writes. The caller holds mu.
func (ps *pushStream) setOut(o Out) {
	ps.cutMu.Lock()
	defer ps.cutMu.Unlock()
	ps.out = o
	if c, ok := o.(*connOut); ok && ps.cut {
		_ = c.conn.Close()
	}
}

func (ps *pushStream) isCut() bool {
	ps.cutMu.Lock()
	defer ps.cutMu.Unlock()
	return ps.cut
}

// errCut: the stream's session ended.
var errCut = errors.New("the stream's session ended")

// gone reports whether ps is a bare socket whose client has left (a
// connection or a held stream cannot tell: false).
func (ps *pushStream) gone() bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return !ps.ended && ps.fd >= 0 && fdGone(ps.fd)
}

func (ps *pushStream) send(b []byte, within time.Duration) error {
	if ps.isCut() {
		return errCut
	}
	var err error
	if ps.fd >= 0 {
		err = fdWrite(ps.fd, b)
	} else {
		err = ps.out.write(b, within)
	}
	if err != nil {
		return err
	}
	ps.lastWrite = time.Now()
	return nil
}

// shut closes the stream's socket. The caller holds ps.mu.
func (ps *pushStream) shut() {
	ps.cutMu.Lock()
	defer ps.cutMu.Unlock()
	if ps.out == nil && ps.fd < 0 {
		return // never connected
	}
	if ps.fd >= 0 {
		fdClose(ps.fd)
		ps.fd = -1
		return
	}
	ps.out.close()
}

func (ps *pushStream) retry(d time.Duration) error {
	return ps.send(append(strconv.AppendInt([]byte("retry: "), d.Milliseconds(), 10), "\n\n"...), streamWriteTimeout)
}

// catchUp sends every change of the user's after the stream's position.
// The caller holds ps.mu.
func (ps *pushStream) catchUp(ctx context.Context, ch Changes) error {
	for {
		list, err := ch.Changes(ctx, ps.UserID, ps.after)
		if err != nil {
			return err
		}
		for _, c := range list {
			data, err := json.Marshal(c.Record.ForSession(ps.Handle))
			if err != nil {
				return err
			}
			ps.buf = strconv.AppendInt(append(ps.buf[:0], "id: "...), c.Seq, 10)
			ps.buf = append(append(append(ps.buf, "\nevent: payment\ndata: "...), data...), "\n\n"...)
			if err := ps.send(ps.buf, streamWriteTimeout); err != nil {
				return err
			}
			ps.after = c.Seq
		}
		if len(list) < payments.ChangesPage {
			ps.buf = nil // an idle stream keeps no buffer
			return nil
		}
	}
}
