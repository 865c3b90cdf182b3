// Package events keeps the event streams open on this instance (GET
// /bff/events) and wakes them: a change of a user's payments wakes that
// user's streams, the end of a session ends its streams, and shutdown ends
// them all. It holds no payment data: a woken stream reads what changed
// from the ledger itself, from its own position, so a wake-up lost or
// doubled costs a read and never an event.
//
// The package is plain Go: the edge writes the streams, the ledger's
// announcements (PostgreSQL LISTEN/NOTIFY) and the sessions' revocations
// call in.
package events

import (
	"errors"
	"sync"
)

// ErrTooMany: the user holds as many streams on this instance as allowed.
var ErrTooMany = errors.New("events: too many open streams for this user")

// ErrClosing: the instance is shutting down and opens no stream.
var ErrClosing = errors.New("events: shutting down")

// Why a stream ended.
const (
	EndRevoked  = "revoked"  // its session ended
	EndShutdown = "shutdown" // the instance is draining
)

// Stream is one open stream's signals. Wake receives (at most one
// pending) when the user's payments may have changed or its session must
// be checked again; Ended is closed when the stream must end, and Why
// then says why.
type Stream struct {
	UserID string
	Handle string // the session's public name (session.Handle)
	Wake   chan struct{}
	Ended  chan struct{}

	mu    sync.Mutex
	why   string
	check bool // the session must be checked again (Suspect)
}

// Why says why Ended was closed ("" while it is not).
func (s *Stream) Why() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.why
}

// Recheck reports, and clears, whether the stream's session must be
// checked again before anything more is sent.
func (s *Stream) Recheck() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.check
	s.check = false
	return c
}

func (s *Stream) wake() {
	select {
	case s.Wake <- struct{}{}:
	default: // one pending is enough: the stream reads from its position
	}
}

// end closes Ended once, with why. The caller holds the hub's lock.
func (s *Stream) end(why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.why != "" {
		return
	}
	s.why = why
	close(s.Ended)
}

// Hub is the streams open on this instance. Safe for concurrent use; every
// method returns at once (none waits on a stream).
type Hub struct {
	perUser int
	mu      sync.Mutex
	byUser  map[string]map[*Stream]struct{}
	byHand  map[string]map[*Stream]struct{}
	open    int
	closing bool
}

// NewHub returns a Hub that lets a user hold perUser streams at once (0:
// no limit).
func NewHub(perUser int) *Hub {
	return &Hub{perUser: perUser, byUser: map[string]map[*Stream]struct{}{}, byHand: map[string]map[*Stream]struct{}{}}
}

// Open registers a stream of the user's session (by its handle). The
// caller must Close it.
func (h *Hub) Open(userID, handle string) (*Stream, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closing {
		return nil, ErrClosing
	}
	if h.perUser > 0 && len(h.byUser[userID]) >= h.perUser {
		return nil, ErrTooMany
	}
	s := &Stream{UserID: userID, Handle: handle, Wake: make(chan struct{}, 1), Ended: make(chan struct{})}
	add(h.byUser, userID, s)
	add(h.byHand, handle, s)
	h.open++
	return s, nil
}

// Close unregisters s.
func (h *Hub) Close(s *Stream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if remove(h.byUser, s.UserID, s) {
		remove(h.byHand, s.Handle, s)
		h.open--
	}
}

// Count reports how many streams are open.
func (h *Hub) Count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.open
}

// Changed wakes the user's streams: the ledger announced a change.
func (h *Hub) Changed(userID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.byUser[userID] {
		s.wake()
	}
}

// Resync wakes every stream: announcements may have been lost (the
// ledger's listener reconnected).
func (h *Hub) Resync() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, set := range h.byUser {
		for s := range set {
			s.wake()
		}
	}
}

// SessionEnded ends the streams of the session with this handle; "" means
// any session may have ended (the instance dropped every copy): every
// stream checks its session again before it sends anything more.
func (h *Hub) SessionEnded(handle string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if handle != "" {
		for s := range h.byHand[handle] {
			s.end(EndRevoked)
		}
		return
	}
	for _, set := range h.byHand {
		for s := range set {
			s.mu.Lock()
			s.check = true
			s.mu.Unlock()
			s.wake()
		}
	}
}

// Shutdown ends every stream and refuses new ones: their clients
// reconnect, through the load balancer, to an instance that stays.
func (h *Hub) Shutdown() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closing = true
	for _, set := range h.byUser {
		for s := range set {
			s.end(EndShutdown)
		}
	}
}

func add(m map[string]map[*Stream]struct{}, k string, s *Stream) {
	set := m[k]
	if set == nil {
		set = map[*Stream]struct{}{}
		m[k] = set
	}
	set[s] = struct{}{}
}

func remove(m map[string]map[*Stream]struct{}, k string, s *Stream) bool {
	set := m[k]
	if _, ok := set[s]; !ok {
		return false
	}
	delete(set, s)
	if len(set) == 0 {
		delete(m, k)
	}
	return true
}
