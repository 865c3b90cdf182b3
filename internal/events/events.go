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

// Stream is one open stream's signals. Whoever writes the stream is told
// by the signal function given to Open (it must not block), and then
// reads what happened: Changed (the user's payments may have changed),
// Recheck (its session must be checked again) and Why (it must end, and
// why; Ended is then closed too).
type Stream struct {
	UserID string
	Handle string // the session's public name (session.Handle)
	Ended  chan struct{}
	signal func()

	mu      sync.Mutex
	why     string
	check   bool // the session must be checked again (SessionEnded(""))
	changed bool // the user's payments may have changed
}

// Changed reports, and clears, whether the user's payments may have
// changed since the last call.
func (s *Stream) Changed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.changed
	s.changed = false
	return c
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

// wake marks a change (and a session check when check) and signals.
func (s *Stream) wake(check bool) {
	s.mu.Lock()
	s.changed = true
	s.check = s.check || check
	s.mu.Unlock()
	s.signal()
}

// end closes Ended once, with why, and signals. The caller holds the
// hub's lock.
func (s *Stream) end(why string) {
	s.mu.Lock()
	if s.why != "" {
		s.mu.Unlock()
		return
	}
	s.why = why
	close(s.Ended)
	s.mu.Unlock()
	s.signal()
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

// Open registers a stream of the user's session (by its handle); signal
// is called (and must return at once) whenever there is something to
// read of it. The caller must Close it.
func (h *Hub) Open(userID, handle string, signal func()) (*Stream, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closing {
		return nil, ErrClosing
	}
	if h.perUser > 0 && len(h.byUser[userID]) >= h.perUser {
		return nil, ErrTooMany
	}
	s := &Stream{UserID: userID, Handle: handle, Ended: make(chan struct{}), signal: signal}
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
		s.wake(false)
	}
}

// Resync wakes every stream: announcements may have been lost (the
// ledger's listener reconnected).
func (h *Hub) Resync() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, set := range h.byUser {
		for s := range set {
			s.wake(false)
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
			s.wake(true)
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
