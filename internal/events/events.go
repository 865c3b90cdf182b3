// Package events keeps the event streams open on this instance (GET
// /bff/events) and wakes them: a change of a user's payments wakes that
// user's streams, the end of a session ends its streams, and shutdown ends
// them all. It bounds them per user, per client address and per instance
// (Limits), each stream being a socket. It holds no payment data: a woken
// stream reads what changed from the ledger itself, from its own position,
// so a wake-up lost or doubled costs a read and never an event.
//
// A Stream is embedded in its writer's own struct and registered with Add:
// an open stream is then one object for the garbage collector, which marks
// every object of every idle stream at each collection (the edge's
// BenchmarkIdleStreams counts them).
//
// A Pusher writes the streams: the edge opens each (Pusher.Open) and
// hands it its connection; the ledger's announcements (PostgreSQL
// LISTEN/NOTIFY) and the sessions' revocations call the Hub. The package is
// plain Go, with no Echo: its Run loop is started by cmd/bff like every
// other.
package events

import (
	"context"
	"errors"
	"slices"
	"sync"
)

// ErrTooMany: the user holds as many streams on this instance as allowed.
var ErrTooMany = errors.New("events: too many open streams for this user")

// ErrTooManyFromAddress: the stream's client address holds as many streams
// on this instance as allowed.
var ErrTooManyFromAddress = errors.New("events: too many open streams from this client address")

// ErrFull: the instance holds as many streams as it may.
var ErrFull = errors.New("events: this instance holds as many streams as it may")

// ErrClosing: the instance is shutting down and opens no stream.
var ErrClosing = errors.New("events: shutting down")

// Why a stream ended.
const (
	EndRevoked  = "revoked"  // its session ended
	EndShutdown = "shutdown" // the instance is draining
)

// Signaler is told that a stream has something to read (Signal), and, when
// its session ended, to make every later write of it fail (Cut) before the
// revocation is acknowledged: both must return at once (the hub calls them
// under its lock) and must not call the hub.
type Signaler interface {
	Signal()
	Cut()
}

// Stream is one open stream's state. Its writer sets UserID, Handle and
// Signaler before Add; the hub signals it, and the writer reads what
// happened: Changed (the user's payments may have changed), Recheck (its
// session must be checked again) and Why (it must end, and why).
type Stream struct {
	UserID string
	Handle string // the session's public name (session.Handle)
	// Client names the client in the per-address bound: its address, an
	// IPv6 one by its prefix; "" is not counted. Add may replace it with
	// an equal string that the address's other streams share.
	Client   string
	Signaler Signaler

	mu      sync.Mutex
	why     string
	check   bool // the session must be checked again (SessionEnded(""))
	changed bool // the user's payments may have changed
}

// Changed reports, and clears, whether the user's payments may have
// changed since the last call.
func (s *Stream) Changed() bool { return s.take(&s.changed) }

// Why says why the stream must end ("" while it need not).
func (s *Stream) Why() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.why
}

// Recheck reports, and clears, whether the stream's session must be
// checked again before anything more is sent.
func (s *Stream) Recheck() bool { return s.take(&s.check) }

// take reports and clears one of the stream's flags.
func (s *Stream) take(flag *bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := *flag
	*flag = false
	return c
}

// wake marks a change (and a session check when check) and signals.
func (s *Stream) wake(check bool) {
	s.mu.Lock()
	s.changed = true
	s.check = s.check || check
	s.mu.Unlock()
	s.Signaler.Signal()
}

// end marks the stream ended, once, with why, and signals.
func (s *Stream) end(why string) {
	s.mu.Lock()
	if s.why != "" {
		s.mu.Unlock()
		return
	}
	s.why = why
	s.mu.Unlock()
	if why == EndRevoked {
		s.Signaler.Cut()
	}
	s.Signaler.Signal()
}

// Limits bound the streams a Hub holds at once; 0 leaves one unbounded.
// Each stream holds a socket, and the sockets share the process's
// descriptors with Redis, PostgreSQL and the upstream.
type Limits struct {
	PerUser     int // a user's streams (limits.streams_per_user)
	PerAddress  int // a client address's streams, by Stream.Client (limits.streams_per_address)
	PerInstance int // every stream (limits.streams_per_instance, see InstanceBound)
}

// Hub is the streams open on this instance. Safe for concurrent use; every
// method returns at once (none waits on a stream).
type Hub struct {
	lim Limits
	mu  sync.Mutex
	// A user holds a few streams (PerUser), a session fewer: slices, not
	// maps, so a stream costs the collector no map entry of its own.
	byUser map[string][]*Stream
	byHand map[string][]*Stream
	// byAddr counts the streams of each Stream.Client (a count: an
	// address may hold many).
	byAddr  map[string]addrStreams
	open    int
	closing bool
	// idle is closed when the last stream closes, for Wait; nil while
	// nobody waits.
	idle chan struct{}
}

// NewHub returns a Hub that holds at most lim's streams at once.
func NewHub(lim Limits) *Hub {
	return &Hub{lim: lim, byUser: map[string][]*Stream{}, byHand: map[string][]*Stream{}, byAddr: map[string]addrStreams{}}
}

// addrStreams is one address's count, with the first of its streams'
// Client strings, which the others then share: an idle stream keeps no
// string of its own for the collector to mark.
type addrStreams struct {
	client string
	n      int
}

// Limits returns the bounds the Hub was made with.
func (h *Hub) Limits() Limits { return h.lim }

// Add registers s, whose UserID, Handle, Client and Signaler are set. The
// caller must Close it. The bounds are checked in order: the user's
// (ErrTooMany), the address's (ErrTooManyFromAddress), the instance's
// (ErrFull).
func (h *Hub) Add(s *Stream) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.closing:
		return ErrClosing
	case h.lim.PerUser > 0 && len(h.byUser[s.UserID]) >= h.lim.PerUser:
		return ErrTooMany
	case h.lim.PerAddress > 0 && s.Client != "" && h.byAddr[s.Client].n >= h.lim.PerAddress:
		return ErrTooManyFromAddress
	case h.lim.PerInstance > 0 && h.open >= h.lim.PerInstance:
		return ErrFull
	}
	h.byUser[s.UserID] = append(h.byUser[s.UserID], s)
	h.byHand[s.Handle] = append(h.byHand[s.Handle], s)
	if s.Client != "" {
		a, ok := h.byAddr[s.Client]
		if !ok {
			a.client = s.Client
		}
		s.Client = a.client
		a.n++
		h.byAddr[s.Client] = a
	}
	h.open++
	return nil
}

// Close unregisters s; twice is harmless.
func (h *Hub) Close(s *Stream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if remove(h.byUser, s.UserID, s) {
		remove(h.byHand, s.Handle, s)
		if a, ok := h.byAddr[s.Client]; ok {
			if a.n--; a.n <= 0 {
				delete(h.byAddr, s.Client)
			} else {
				h.byAddr[s.Client] = a
			}
		}
		h.open--
		if h.open == 0 && h.idle != nil {
			close(h.idle)
			h.idle = nil
		}
	}
}

// Wait returns once no stream is open, or ctx has ended: shutdown waits,
// after Shutdown, for the streams' retry hints.
func (h *Hub) Wait(ctx context.Context) {
	h.mu.Lock()
	if h.open == 0 {
		h.mu.Unlock()
		return
	}
	if h.idle == nil {
		h.idle = make(chan struct{})
	}
	idle := h.idle
	h.mu.Unlock()
	select {
	case <-idle:
	case <-ctx.Done():
	}
}

// Count reports how many streams are open.
func (h *Hub) Count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.open
}

// Each calls f with every open stream (under the hub's lock: f must
// return at once and must not call the hub).
func (h *Hub) Each(f func(*Stream)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, list := range h.byUser {
		for _, s := range list {
			f(s)
		}
	}
}

// Changed wakes the user's streams: the ledger announced a change.
func (h *Hub) Changed(userID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.byUser[userID] {
		s.wake(false)
	}
}

// Resync wakes every stream: announcements may have been lost (the
// ledger's listener reconnected).
func (h *Hub) Resync() { h.Each(func(s *Stream) { s.wake(false) }) }

// SessionEnded ends the streams of the session with this handle; "" means
// any session may have ended (the instance dropped every copy): every
// stream checks its session again before it sends anything more.
func (h *Hub) SessionEnded(handle string) {
	if handle == "" {
		h.Each(func(s *Stream) { s.wake(true) })
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.byHand[handle] {
		s.end(EndRevoked)
	}
}

// Shutdown ends every stream and refuses new ones: their clients
// reconnect, through the load balancer, to an instance that stays.
func (h *Hub) Shutdown() {
	h.mu.Lock()
	h.closing = true
	h.mu.Unlock()
	h.Each(func(s *Stream) { s.end(EndShutdown) })
}

func remove(m map[string][]*Stream, k string, s *Stream) bool {
	list := m[k]
	i := slices.Index(list, s)
	if i < 0 {
		return false
	}
	list = slices.Delete(list, i, i+1)
	if len(list) == 0 {
		delete(m, k)
	} else {
		m[k] = list
	}
	return true
}
