package events

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/fintech-bff/bff/internal/payments"
)

// Changes is what the pusher reads a user's payment changes from
// (payments.Service).
type Changes interface {
	Changes(ctx context.Context, userID string, after int64) ([]payments.Change, error)
	Position(ctx context.Context, userID string) (int64, error)
}

var _ Changes = (*payments.Service)(nil)

// Sessions is what the pusher needs of the sessions (session.Manager).
type Sessions interface {
	// Alive returns until when the session named by id is live (zero: it
	// is not), without sliding its idle timeout.
	Alive(ctx context.Context, id string) (time.Time, error)
	// Member reports whether this instance's lease in the sessions' group
	// holds: while it does, every session's end reaches the hub
	// (SessionEnded) before it is acknowledged; while it does not, a
	// revocation may be answered without this instance.
	Member() bool
}

const (
	// maxHeartbeat bounds a stream's silence (docs/endpoints.md, GET
	// /bff/events): proxies and mobile networks close an idle connection
	// after 30 to 60 s.
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
	// pushWorkers write the streams' changes and heartbeats; queued is how
	// many streams may wait for one before the scan picks them up instead.
	pushWorkers = 4
	queued      = 1 << 14
	// peerCheckEvery is how often the scan looks for clients that left:
	// their sockets and places under the per-user cap come back within it.
	peerCheckEvery = 2 * time.Second
)

// ErrSessionEnded: the stream's session ended before its stream was
// registered (Open).
var ErrSessionEnded = errors.New("events: the stream's session has ended")

// ErrSessionUnchecked: the stream's session could not be checked (Open);
// the error wraps the store's.
var ErrSessionUnchecked = errors.New("events: the stream's session cannot be checked")

// Pusher writes the streams of a Hub (GET /bff/events): a few workers take
// the streams that have something to do (a change, a session to check, an
// end) from a queue, and one scan a second queues those due a heartbeat.
// Open hands it a stream; Run runs it. Safe for concurrent use.
//
// Once its headers and catch-up are written, a stream is, on Linux, a bare
// socket (peer_linux.go): an idle stream is then a descriptor and a small
// struct, written by the pusher's few goroutines, instead of two goroutines
// of the HTTP server and their buffers (the edge's BenchmarkIdleStreams
// measures it); a client that leaves is seen by a look at its socket every
// peerCheckEvery.
type Pusher struct {
	hub       *Hub
	changes   Changes
	sessions  Sessions
	heartbeat time.Duration
	queue     chan *pushStream

	// mu guards stopped and, with it, each stream's becoming ready: a
	// stream is handed over either before the stop (which ends it) or
	// after (and Open ends it).
	mu      sync.Mutex
	stopped bool
}

// NewPusher returns a pusher of hub's streams, which reads the changes
// from changes and checks their sessions with sessions. heartbeat is the
// longest silence on a stream: 0, or above 15 s, is 15 s.
func NewPusher(hub *Hub, changes Changes, sessions Sessions, heartbeat time.Duration) *Pusher {
	if heartbeat <= 0 || heartbeat > maxHeartbeat {
		heartbeat = maxHeartbeat
	}
	return &Pusher{hub: hub, changes: changes, sessions: sessions, heartbeat: heartbeat,
		queue: make(chan *pushStream, queued)}
}

// Limits returns the bounds of the pusher's hub.
func (p *Pusher) Limits() Limits { return p.hub.Limits() }

// Run writes the streams until ctx ends; then it ends every stream still
// open (closed and unregistered: after Hub.Shutdown and Hub.Wait there
// are none) and returns, once its workers have. Open refuses streams from
// then on. Call it once.
func (p *Pusher) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range pushWorkers {
		wg.Go(func() { p.work(ctx) })
	}
	p.scan(ctx)
	wg.Wait()
	p.stop()
}

// Opening is a stream about to open.
type Opening struct {
	UserID string
	// SessionID is the stream's session: checked again once the stream is
	// registered, and whenever the hub asks.
	SessionID string
	// Handle is the session's public name (session.Handle), by which the
	// hub is told of its end.
	Handle string
	// Client names the client in the per-address bound (Stream.Client).
	Client string
	// LiveUntil is when the session times out if unused, as the caller
	// found it; it is checked again then.
	LiveUntil time.Time
	// After is the position the stream resumes after (a Last-Event-ID);
	// negative: the user's position now.
	After int64
}

// Open opens a stream. It registers it with the hub (refused with
// ErrTooMany, ErrTooManyFromAddress, ErrFull, or ErrClosing once the hub
// shuts down or Run has returned), checks its session again
// (ErrSessionEnded, or ErrSessionUnchecked), and reads the user's position
// when o.After is negative (the error as Changes.Position returned it).
// Registered before the check and the read: a revocation from then on
// ends the stream, and a change wakes it.
//
// Only then does it call connect for where the stream's bytes go (the
// caller writes the status line and headers there), write the retry hint
// and every change after the position, and hand the stream to the workers.
// From connect on it returns nil: the status is sent, and a stream whose
// writes fail ends, its client reconnecting. A Held stream is the caller's
// goroutine's: Open returns once the stream ends or ctx does.
func (p *Pusher) Open(ctx context.Context, o Opening, connect func() Out) error {
	p.mu.Lock()
	stopped := p.stopped
	p.mu.Unlock()
	if stopped {
		return ErrClosing
	}
	ps := &pushStream{p: p, fd: -1, sessionID: o.SessionID, liveUntil: o.LiveUntil, lastWrite: time.Now()}
	ps.UserID, ps.Handle, ps.Client, ps.Signaler = o.UserID, o.Handle, o.Client, ps
	// Held until the catch-up is written: a signal that comes before (a
	// change, a revocation) is served after it, never on a stream that has
	// no connection yet.
	ps.mu.Lock()
	if err := p.hub.Add(&ps.Stream); err != nil {
		ps.mu.Unlock()
		return err
	}
	// abandon unregisters the stream before it has a connection: nothing
	// to close.
	abandon := func(err error) error {
		ps.ended = true
		ps.mu.Unlock()
		p.hub.Close(&ps.Stream)
		return err
	}
	until, err := p.sessions.Alive(ctx, o.SessionID)
	switch {
	case err != nil:
		return abandon(fmt.Errorf("%w: %w", ErrSessionUnchecked, err))
	case until.IsZero():
		return abandon(ErrSessionEnded)
	}
	ps.after = o.After
	if ps.after < 0 {
		if ps.after, err = p.changes.Position(ctx, o.UserID); err != nil {
			return abandon(err)
		}
	}
	out := connect()
	ps.setOut(out)
	err = ps.retry(clientRetry)
	if err == nil {
		err = ps.catchUp(ctx, p.changes)
	}
	ps.lastWrite = time.Now()
	ps.mu.Unlock()
	if err != nil {
		p.end(ps)
		return nil
	}
	p.add(ps)
	if held, ok := out.(*heldOut); ok {
		select {
		case <-held.done:
		case <-ctx.Done():
			p.end(ps)
		}
	}
	return nil
}

// enqueue queues ps for a worker; it never blocks (the hub calls it under
// its lock). A full queue leaves ps to the next scan.
func (p *Pusher) enqueue(ps *pushStream) {
	if !ps.queued.CompareAndSwap(false, true) {
		return
	}
	select {
	case p.queue <- ps:
	default:
		// Still marked: the scan queues it.
	}
}

// add hands ps, its catch-up written, to the workers.
func (p *Pusher) add(ps *pushStream) {
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
			// the stream ends too. It returns when the stream ends (end
			// closes the connection).
			go func() {
				var b [1]byte
				_, _ = o.conn.Read(b[:])
				p.end(ps)
			}()
		}
		ps.mu.Unlock()
	}
	p.mu.Lock()
	stopped := p.stopped
	if !stopped {
		ps.ready.Store(true)
	}
	p.mu.Unlock()
	if stopped {
		p.end(ps)
		return
	}
	p.enqueue(ps) // what changed between the catch-up and now
}

// end closes ps for good and unregisters it.
func (p *Pusher) end(ps *pushStream) {
	ps.mu.Lock()
	if !ps.ended {
		ps.ended = true
		ps.shut()
	}
	ps.mu.Unlock()
	p.hub.Close(&ps.Stream)
}

// stop ends every stream handed over; those handed over later are ended
// by add.
func (p *Pusher) stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	for _, ps := range p.streams(nil) {
		if ps.ready.Load() {
			p.end(ps)
		}
	}
}

// streams appends the hub's streams to list.
func (p *Pusher) streams(list []*pushStream) []*pushStream {
	p.hub.Each(func(s *Stream) {
		if ps, ok := s.Signaler.(*pushStream); ok {
			list = append(list, ps)
		}
	})
	return list
}

func (p *Pusher) work(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ps := <-p.queue:
			p.serve(ctx, ps)
		}
	}
}

// serve does what ps is queued for: end it, check its session, send its
// changes, or a heartbeat when it has been silent for the heartbeat.
func (p *Pusher) serve(ctx context.Context, ps *pushStream) {
	ps.queued.Store(false)
	if !ps.ready.Load() {
		return // add queues it once its catch-up is written
	}
	switch ps.Why() {
	case EndShutdown:
		ps.mu.Lock()
		if !ps.ended {
			_ = ps.retry(shutdownRetry + rand.N(shutdownJit))
		}
		ps.mu.Unlock()
		p.end(ps)
	case EndRevoked:
		p.end(ps)
	default:
		if !p.step(ctx, ps) {
			p.end(ps)
		}
	}
}

// step writes what ps is due; false: end it.
func (p *Pusher) step(ctx context.Context, ps *pushStream) bool {
	ctx, cancel := context.WithTimeout(ctx, streamWriteTimeout)
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
	// The lease is read before the recheck: a renewal that forgot every
	// copy asks every stream for a recheck before it trusts anew, so one
	// of the two readings sees it.
	member := p.sessions.Member()
	if ps.Recheck() || !member || !time.Now().Before(ps.liveUntil) {
		if ps.liveUntil = p.alive(ctx, ps.sessionID); ps.liveUntil.IsZero() {
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

// alive reports until when the stream's session is live (zero: it is
// not), without sliding its idle timeout. A store that does not answer
// ends the stream: the client reconnects and is checked afresh.
func (p *Pusher) alive(ctx context.Context, id string) time.Time {
	until, err := p.sessions.Alive(ctx, id)
	if err != nil {
		return time.Time{}
	}
	return until
}

// scan queues, every tenth of the heartbeat (at most a second), the
// streams due a heartbeat and those the queue had no room for, and ends
// every peerCheckEvery the streams whose client has left; until ctx ends.
func (p *Pusher) scan(ctx context.Context) {
	t := time.NewTicker(min(p.heartbeat/10, time.Second))
	defer t.Stop()
	var list []*pushStream
	lastPeek := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		list = p.streams(list[:0])
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
