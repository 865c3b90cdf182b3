package edge

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	eventhub "github.com/fintech-bff/bff/internal/events"
	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/session"
)

// PaymentChanges is what the edge needs of payments.Service to stream a
// user's payment changes (GET /bff/events).
type PaymentChanges interface {
	Changes(ctx context.Context, userID string, after int64) ([]payments.Change, error)
	Position(ctx context.Context, userID string) (int64, error)
}

var _ PaymentChanges = (*payments.Service)(nil)

// Streams configures GET /bff/events.
type Streams struct {
	Hub     *eventhub.Hub
	Changes PaymentChanges
	// Heartbeat is the longest silence on a stream (at most 15 s: proxies
	// and mobile networks close an idle connection after 30 to 60 s); 0:
	// 15 s.
	Heartbeat time.Duration
	// pusher writes the streams; made by routes.
	pusher *pusher
	// v6Bits names an IPv6 client by its prefix in the per-address bound
	// (limits.ipv6_prefix, as the other per-address limits); set by routes.
	v6Bits int
	// full logs, sparsely, that the instance refused streams at its bound.
	full *sparseLog
}

const (
	// maxHeartbeat bounds a stream's silence (docs/endpoints.md, GET /bff/events).
	maxHeartbeat = 15 * time.Second
	// streamWriteTimeout bounds each write of a change: a client that
	// reads nothing loses its stream instead of holding a worker.
	streamWriteTimeout = 5 * time.Second
	// beatWriteTimeout bounds a heartbeat's write: a few bytes go to the
	// kernel at once unless the client stopped reading long ago.
	beatWriteTimeout = 500 * time.Millisecond
	// clientRetry is the reconnection wait a stream asks for when it opens;
	// at shutdown it asks for shutdownRetry plus a jitter, so the clients of
	// a draining instance do not all land on one other at once.
	clientRetry   = 2 * time.Second
	shutdownRetry = 500 * time.Millisecond
	shutdownJit   = 2 * time.Second
	// streamRetryAfter is the Retry-After of a stream refused by the
	// user's or the address's bound; one refused by the instance's bound
	// waits as long plus up to fullJitter, so that the clients refused
	// together by a full instance do not come back together (and the load
	// balancer may send them elsewhere).
	streamRetryAfter = 5 * time.Second
	fullJitter       = 5 * time.Second
	// fullLogEvery: at most one line a minute says the instance is full.
	fullLogEvery = time.Minute
	// pushWorkers write the streams' changes and heartbeats; queued is how
	// many streams may wait for one before the scan picks them up instead.
	pushWorkers = 4
	queued      = 1 << 14
	// peerCheckEvery is how often the scan looks for clients that left:
	// their sockets and places under the per-user cap come back within it.
	peerCheckEvery = 2 * time.Second
)

// streamEvents is GET /bff/events: the caller's payment changes as
// server-sent events. Last-Event-ID resumes after that position, from the
// ledger; without it the stream starts now. The stream ends when its
// session ends (closed before the revocation is acknowledged), when the
// instance drains (after a retry: hint), or when a write stalls.
//
// Once the headers and the catch-up are written, the connection is taken
// from the HTTP server (hijacked) and, on Linux, kept as a bare socket
// (peer_linux.go): an idle stream is then a descriptor and a small struct,
// written by the pusher's few goroutines, instead of two goroutines of the
// server and their buffers (BenchmarkIdleStreams measures it); a client
// that leaves is seen by a look at its socket every peerCheckEvery.
// Where the connection cannot be taken (HTTP/2, a test recorder), the
// handler's goroutine holds the stream until it ends.
func streamEvents(a *authn, st Streams, budget SessionBudget, observe Observer) echo.HandlerFunc {
	return func(c echo.Context) error {
		p, err := authorized(c, a, budget, observe)
		if err != nil {
			return err
		}
		r := c.Request()
		ctx := r.Context()
		after, err := lastEventID(r)
		if err != nil {
			return err
		}
		ps := &pushStream{p: st.pusher, fd: -1, sessionID: p.id, liveUntil: a.sessions.ExpiresAt(p.rec), lastWrite: time.Now()}
		ps.UserID, ps.Handle, ps.Signaler = p.rec.UserID, session.Handle(p.id), ps
		ps.Client = clientKey(c.RealIP(), st.v6Bits)
		// Held until the catch-up is written: a signal that comes before
		// (a change, a revocation) is served after it, never on a stream
		// that has no connection yet.
		ps.mu.Lock()
		if err := st.Hub.Add(&ps.Stream); err != nil {
			ps.mu.Unlock()
			return refuseStream(ctx, st, observe, err)
		}
		// Registered, the session is checked again: a revocation from now
		// on ends the stream (SessionEnded), one before it is seen here.
		if until, err := a.sessions.Alive(ctx, p.id); err != nil || until.IsZero() {
			ps.ended = true // nothing to close: no connection was taken
			ps.mu.Unlock()
			st.Hub.Close(&ps.Stream)
			if err != nil {
				return problem.Wrap(problem.CodeSessionStoreUnavailable, "sessions cannot be checked right now", err)
			}
			return sessionRequired("the session has ended; log in again")
		}
		// Registered before the position is read: a change after it wakes
		// the stream, one before it is in the catch-up.
		if after < 0 {
			if after, err = st.Changes.Position(ctx, p.rec.UserID); err != nil {
				ps.ended = true // nothing to close: no connection was taken
				ps.mu.Unlock()
				st.Hub.Close(&ps.Stream)
				return err
			}
		}
		ps.after = after
		h := c.Response().Header()
		h.Set(echo.HeaderContentType, "text/event-stream")
		h.Set("X-Accel-Buffering", "no") // nginx and its kin: pass each event on at once
		out, err := hijack(c)
		if err != nil {
			// Held by this goroutine: the headers go through the server.
			rc := http.NewResponseController(c.Response())
			c.Response().WriteHeader(http.StatusOK)
			out = &heldOut{w: c.Response(), rc: rc, done: make(chan struct{})}
		}
		ps.setOut(out)
		err = ps.retry(clientRetry)
		if err == nil {
			err = ps.catchUp(ctx, st.Changes)
		}
		ps.lastWrite = time.Now()
		ps.mu.Unlock()
		if err != nil {
			st.pusher.end(ps)
			return nil // the status is sent: the client reconnects and resumes
		}
		st.pusher.add(ps)
		if held, ok := ps.out.(*heldOut); ok {
			select {
			case <-held.done:
			case <-ctx.Done():
				st.pusher.end(ps)
			}
		}
		return nil
	}
}

// refuseStream is the answer to a stream the hub did not take (Hub.Add's
// err). The instance's bound is 503 UPSTREAM_UNAVAILABLE, the code a
// client already gets when no instance can take its request
// (docs/errors.md): the BFF, not the client, is short of room, and another
// instance may have it.
func refuseStream(ctx context.Context, st Streams, observe Observer, err error) error {
	switch {
	case errors.Is(err, eventhub.ErrTooMany):
		observe.Refused("streams")
		return problem.Later(problem.CodeRateLimited, streamRetryAfter, "this user has too many open event streams on this instance; close one, or retry in %d s")
	case errors.Is(err, eventhub.ErrTooManyFromAddress):
		observe.Refused("streams_address")
		return problem.Later(problem.CodeRateLimited, streamRetryAfter, "too many open event streams from this address on this instance; close one, or retry in %d s")
	case errors.Is(err, eventhub.ErrFull):
		observe.Refused("streams_instance")
		if st.full != nil {
			st.full.write(ctx, slog.Int("bound", st.Hub.Limits().PerInstance))
		}
		return problem.Later(problem.CodeUpstreamUnavailable, streamRetryAfter+rand.N(fullJitter), "this instance holds as many event streams as it can; retry in %d s")
	}
	return problem.Later(problem.CodeUpstreamUnavailable, time.Second, "this instance is shutting down; retry in %d s")
}

// hijack takes the connection from the HTTP server and writes the status
// line and the headers the middleware set: the stream is the pusher's
// from here. The access log records it as a 200 when it starts.
func hijack(c echo.Context) (streamOut, error) {
	conn, rw, err := http.NewResponseController(c.Response()).Hijack()
	if err != nil {
		return nil, err
	}
	h := c.Response().Header()
	h.Set("Connection", "close") // the body ends when the connection does
	_ = conn.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	_, _ = rw.WriteString("HTTP/1.1 200 OK\r\n")
	_ = h.Write(rw)
	_, _ = rw.WriteString("\r\n")
	// A failed flush is the stream's first failed write: it ends there.
	_ = rw.Flush()
	c.Response().Status, c.Response().Committed = http.StatusOK, true
	return &connOut{conn: conn}, nil
}

// alive reports until when the stream's session is live (zero: it is
// not), without sliding its idle timeout. A store that does not answer
// ends the stream: the client reconnects and is checked afresh.
func alive(ctx context.Context, sessions *session.Manager, id string) time.Time {
	until, err := sessions.Alive(ctx, id)
	if err != nil {
		return time.Time{}
	}
	return until
}

// lastEventID is the position the stream resumes after: Last-Event-ID, a
// position this endpoint sent; -1 when absent (start now).
func lastEventID(r *http.Request) (int64, error) {
	v, ok := r.Header["Last-Event-Id"]
	if !ok || (len(v) == 1 && v[0] == "") {
		return -1, nil
	}
	n, err := strconv.ParseInt(v[0], 10, 64)
	if len(v) > 1 || err != nil || n < 0 {
		p := problem.New(problem.CodeValidationError, "Last-Event-ID must be an id this stream sent (a non-negative integer)")
		p.Fields = []problem.Field{{Field: "Last-Event-ID", Message: "not a non-negative integer"}}
		return 0, p
	}
	return n, nil
}

// streamOut is where a stream's bytes go: a taken connection, or the
// server's response writer while its handler holds the stream.
type streamOut interface {
	write(b []byte, within time.Duration) error
	close()
	// gone reports, without blocking, that the client has left; false
	// when it cannot tell.
	gone() bool
}

type connOut struct{ conn net.Conn }

func (o *connOut) write(b []byte, within time.Duration) error {
	_ = o.conn.SetWriteDeadline(time.Now().Add(within))
	_, err := o.conn.Write(b)
	return err
}

func (o *connOut) close() { _ = o.conn.Close() }

func (o *connOut) gone() bool { return false }

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

func (o *heldOut) gone() bool { return false }

// pushStream is one open stream as the pusher writes it: one object,
// the hub's Stream embedded, and on Linux its socket a bare descriptor.
type pushStream struct {
	eventhub.Stream
	p         *pusher
	sessionID string
	queued    atomic.Bool // in the pusher's queue (or due to the scan)

	ready atomic.Bool // handed to the pusher (add): its catch-up is written

	// cutMu guards cut and every change of fd and out, so that Cut (called
	// by the hub, never blocking) can make the socket's writes fail while a
	// writer holds mu.
	cutMu sync.Mutex
	cut   bool

	mu        sync.Mutex // one writer at a time; guards what follows
	fd        int        // the bare socket (peer_linux.go); -1: out
	out       streamOut  // the taken connection, or the server's writer
	after     int64      // the position sent last
	lastWrite time.Time
	// liveUntil is when the session would time out, as last checked (a
	// request since may have slid it): it is checked again only then, or
	// when the hub asks (a revocation ends the stream without a check).
	liveUntil time.Time
	ended     bool
	buf       []byte
}

// Signal implements eventhub.Signaler: the stream has something to read.
func (ps *pushStream) Signal() { ps.p.enqueue(ps) }

// Cut implements eventhub.Signaler: its session ended, so every later
// write fails (the socket is shut down; closed by the pusher later), and
// nothing more reaches the client once the revocation answers.
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
func (ps *pushStream) setOut(o streamOut) {
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

// gone reports whether ps is a bare socket whose client has left.
func (ps *pushStream) gone() bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.ended {
		return false
	}
	if ps.fd >= 0 {
		return fdGone(ps.fd)
	}
	return ps.out.gone()
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
func (ps *pushStream) catchUp(ctx context.Context, ch PaymentChanges) error {
	for {
		list, err := ch.Changes(ctx, ps.UserID, ps.after)
		if err != nil {
			return err
		}
		for _, c := range list {
			data, err := json.Marshal(c.Record)
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

// pusher writes the open streams: a few workers take the streams that
// have something to do (a change, a session to check, an end) from a
// queue, and one scan a second queues those due a heartbeat.
type pusher struct {
	hub       *eventhub.Hub
	changes   PaymentChanges
	sessions  *session.Manager
	heartbeat time.Duration
	queue     chan *pushStream
}

func newPusher(st Streams, sessions *session.Manager) *pusher {
	hb := st.Heartbeat
	if hb <= 0 || hb > maxHeartbeat {
		hb = maxHeartbeat
	}
	p := &pusher{hub: st.Hub, changes: st.Changes, sessions: sessions, heartbeat: hb,
		queue: make(chan *pushStream, queued)}
	for range pushWorkers {
		go p.work()
	}
	go p.scan()
	return p
}

// enqueue queues ps for a worker; it never blocks (the hub calls it under
// its lock). A full queue leaves ps to the next scan.
func (p *pusher) enqueue(ps *pushStream) {
	if !ps.queued.CompareAndSwap(false, true) {
		return
	}
	select {
	case p.queue <- ps:
	default:
		// Still marked: the scan queues it.
	}
}

// add hands ps, its catch-up written, to the pusher.
func (p *pusher) add(ps *pushStream) {
	if o, ok := ps.out.(*connOut); ok {
		ps.mu.Lock()
		ps.cutMu.Lock()
		fd, ok := -1, false
		if !ps.cut {
			fd, ok = bare(o.conn)
		}
		if ok {
			ps.fd, ps.out = fd, nil
		}
		ps.cutMu.Unlock()
		if !ok {
			// A goroutine blocked in a one-byte read sees the client
			// leave. A client sends nothing after its request; should it,
			// the stream ends too.
			go func() {
				var b [1]byte
				_, _ = o.conn.Read(b[:])
				p.end(ps)
			}()
		}
		ps.mu.Unlock()
	}
	ps.ready.Store(true)
	p.enqueue(ps) // what changed between the catch-up and now
}

// end closes ps for good and unregisters it.
func (p *pusher) end(ps *pushStream) {
	ps.mu.Lock()
	if !ps.ended {
		ps.ended = true
		ps.shut()
	}
	ps.mu.Unlock()
	p.hub.Close(&ps.Stream)
}

func (p *pusher) work() {
	for ps := range p.queue {
		p.serve(ps)
	}
}

// serve does what ps is queued for: end it, check its session, send its
// changes, or a heartbeat when it has been silent for the heartbeat.
func (p *pusher) serve(ps *pushStream) {
	ps.queued.Store(false)
	if !ps.ready.Load() {
		return // add queues it once its catch-up is written
	}
	switch ps.Why() {
	case eventhub.EndShutdown:
		ps.mu.Lock()
		if !ps.ended {
			_ = ps.retry(shutdownRetry + rand.N(shutdownJit))
		}
		ps.mu.Unlock()
		p.end(ps)
	case eventhub.EndRevoked:
		p.end(ps)
	default:
		if !p.step(ps) {
			p.end(ps)
		}
	}
}

// step writes what ps is due; false: end it.
func (p *pusher) step(ps *pushStream) bool {
	ctx, cancel := context.WithTimeout(context.Background(), streamWriteTimeout)
	defer cancel()
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.ended {
		return true
	}
	// A session that timed out, or whose end this instance may have
	// missed (the hub asks for a check, or this instance's lease in the
	// sessions' group does not hold: a revocation may have answered
	// without it), ends its stream before anything more is sent.
	if ps.Recheck() || !p.sessions.Member() || !time.Now().Before(ps.liveUntil) {
		if ps.liveUntil = alive(ctx, p.sessions, ps.sessionID); ps.liveUntil.IsZero() {
			return false
		}
	}
	if ps.Changed() && ps.catchUp(ctx, p.changes) != nil {
		return false
	}
	if time.Since(ps.lastWrite) >= p.heartbeat && ps.send([]byte(": keep-alive\n\n"), beatWriteTimeout) != nil {
		return false
	}
	return true
}

// scan queues, every tenth of the heartbeat (at most a second), the
// streams due a heartbeat and those the queue had no room for, and ends
// every peerCheckEvery the streams whose client has left.
func (p *pusher) scan() {
	every := min(p.heartbeat/10, time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	var list []*pushStream
	lastPeek := time.Now()
	for range t.C {
		list = list[:0]
		p.hub.Each(func(s *eventhub.Stream) {
			if ps, ok := s.Signaler.(*pushStream); ok {
				list = append(list, ps)
			}
		})
		now := time.Now()
		peek := now.Sub(lastPeek) >= peerCheckEvery
		if peek {
			lastPeek = now
		}
		for _, ps := range list {
			if !ps.ready.Load() {
				continue // opening: its handler holds it
			}
			if peek && ps.gone() {
				p.end(ps)
				continue
			}
			if ps.queued.Load() {
				select {
				case p.queue <- ps:
				default:
				}
				continue
			}
			ps.mu.Lock()
			due := now.Sub(ps.lastWrite) >= p.heartbeat-p.heartbeat/10
			ps.mu.Unlock()
			if due {
				p.enqueue(ps)
			}
		}
	}
}

// Wait returns once every stream has ended (after Hub.Shutdown), or ctx
// has: shutdown waits for the streams' retry hints before it exits.
func (st *Streams) Wait(ctx context.Context) {
	if st.pusher == nil {
		return // never routed: no stream was opened
	}
	for {
		if st.Hub.Count() == 0 || ctx.Err() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}
