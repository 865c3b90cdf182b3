package upstreamsim

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Fault is a failure injected into the simulator's replies. Faults are
// evaluated before routing and authentication, on every route including
// /oauth/token (but never on the control API).
//
// A fault matches a request when Method (if set, case-insensitive) equals
// its method, its path starts with PathPrefix (empty matches all), and, if
// UserID is set, the request acts for that user: its Bearer token's subject
// is UserID (the token is read, not verified: faults apply before
// authentication), or it is a token request whose body names UserID. The
// first matching fault, in injection order, applies: it waits Delay (a
// real wait, cut short if the client goes away), then either hangs up
// (HangUp: the connection is closed without a reply), or replies with
// Status, or, if Status is 0, lets the request through (a pure latency
// fault).
//
// The reply body is Body with ContentType (default application/json); with
// EmptyBody there is no body at all; with neither, a body in the upstream's
// shape for Status. Times limits the fault to the next N matching requests;
// 0 keeps it until it is removed, ClearFaults or Reset.
//
// With AfterActing the request is served first (a payment is created, a
// connection deleted) and the fault then applies to the reply: the delay
// holds the real reply back, HangUp drops it, Status replaces it. It is the
// upstream that acted and whose answer was lost.
//
// With ActLate the upstream acts after the client stopped waiting: the
// request is taken, then the simulator waits until the client goes away
// or Delay passes (with HangUp it does not wait), closes the connection
// without a reply if the client is still there, and only then, Delay
// after it took the request, serves it anyway, on a goroutine of the
// Server's (Close and Reset cancel it if it has not acted yet and wait
// for it if it has begun). The client gets no reply; the payment (or
// whatever the request does) appears later, made by the request: its
// PaymentOrigins entry is the request's X-Request-Id, its createdAt the
// time it acted. Delay is at most MaxActLateDelay; Status and AfterActing
// do not go with it (see validate).
//
// ID is assigned by InjectFault ("f1", "f2", ...; never reused) and names
// the fault to RemoveFault; it is ignored on input.
type Fault struct {
	ID          string        `json:"id,omitempty"`
	Method      string        `json:"method,omitempty"`
	PathPrefix  string        `json:"pathPrefix,omitempty"`
	UserID      string        `json:"userId,omitempty"`
	Status      int           `json:"status,omitempty"`
	Body        string        `json:"body,omitempty"`
	ContentType string        `json:"contentType,omitempty"`
	EmptyBody   bool          `json:"emptyBody,omitempty"`
	Delay       time.Duration `json:"-"`
	HangUp      bool          `json:"hangUp,omitempty"`
	Times       int           `json:"times,omitempty"`
	AfterActing bool          `json:"afterActing,omitempty"`
	ActLate     bool          `json:"actLate,omitempty"`
}

// MaxActLateDelay bounds the Delay of an ActLate fault: the BFF counts on
// the upstream acting within 5 s after it stops waiting
// (docs/payments.md, "Quiet"), so a later act would be a fault the BFF
// documents it cannot handle, not one that finds its bugs.
const MaxActLateDelay = 5 * time.Second

// validate reports a fault InjectFault refuses (the control API answers
// 400 with its message): only ActLate faults have rules of their own.
func (f Fault) validate() error {
	switch {
	case !f.ActLate:
		return nil
	case f.Delay > MaxActLateDelay:
		return fmt.Errorf(`"delay" of an actLate fault must be at most %s: the upstream acts within 5s after the client stops waiting`, MaxActLateDelay)
	case f.Status != 0 || f.AfterActing:
		return errors.New(`"actLate" does not go with "status" or "afterActing": the client of an actLate fault gets no reply`)
	}
	return nil
}

// matches reports whether f applies to r, which acts for user.
func (f *Fault) matches(r *http.Request, user string) bool {
	if f.Method != "" && !strings.EqualFold(f.Method, r.Method) {
		return false
	}
	if f.UserID != "" && f.UserID != user {
		return false
	}
	return strings.HasPrefix(r.URL.Path, f.PathPrefix)
}

// faultSet is the list of active faults. It is safe for concurrent use.
type faultSet struct {
	mu     sync.Mutex
	faults []*Fault
	lastID int // ids are never reused, even after clear
}

// add appends f under a new id and returns the id.
func (s *faultSet) add(f Fault) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastID++
	f.ID = "f" + strconv.Itoa(s.lastID)
	s.faults = append(s.faults, &f)
	return f.ID
}

// list returns copies of the active faults, in injection order; Times is
// what remains of each.
func (s *faultSet) list() []Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Fault, len(s.faults))
	for i, f := range s.faults {
		out[i] = *f
	}
	return out
}

// remove deletes the fault with id and reports whether there was one.
func (s *faultSet) remove(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.faults {
		if f.ID == id {
			s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
			return true
		}
	}
	return false
}

func (s *faultSet) clear() {
	s.mu.Lock()
	s.faults = nil
	s.mu.Unlock()
}

// take returns the first fault matching r (acting for user), consuming one
// of its Times.
func (s *faultSet) take(r *http.Request, user string) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.faults {
		if !f.matches(r, user) {
			continue
		}
		got := *f
		if f.Times > 0 {
			f.Times--
			if f.Times == 0 {
				s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
			}
		}
		return got, true
	}
	return Fault{}, false
}

// apply carries out f. It reports whether the request was answered (or the
// connection dropped) and must not be served further.
func (f Fault) apply(w http.ResponseWriter, r *http.Request) bool {
	if !f.wait(r) {
		return true
	}
	if f.HangUp {
		hangUp(w)
		return true
	}
	if f.Status == 0 {
		return false
	}
	switch {
	case f.EmptyBody:
		if f.ContentType != "" {
			w.Header().Set("Content-Type", f.ContentType)
		}
		w.WriteHeader(f.Status)
	case f.Body != "":
		ct := f.ContentType
		if ct == "" {
			ct = "application/json"
		}
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(f.Status)
		_, _ = w.Write([]byte(f.Body))
	default:
		writeAPIError(w, defaultFaultError(f.Status))
	}
	return true
}

// wait waits Delay, cut short (false) if the client goes away.
func (f Fault) wait(r *http.Request) bool {
	if f.Delay <= 0 {
		return true
	}
	t := time.NewTimer(f.Delay)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// applyAfter serves r with serve into a buffer, then carries out f on the
// reply: the real reply after Delay unless HangUp or Status replace it.
func (f Fault) applyAfter(w http.ResponseWriter, r *http.Request, serve http.Handler) {
	buf := &bufferedReply{header: http.Header{}}
	serve.ServeHTTP(buf, r)
	if !f.wait(r) {
		return
	}
	f.Delay = 0
	if f.HangUp || f.Status != 0 {
		f.apply(w, r)
		return
	}
	for k, v := range buf.header {
		w.Header()[k] = v
	}
	if buf.status == 0 {
		buf.status = http.StatusOK
	}
	w.WriteHeader(buf.status)
	_, _ = w.Write(buf.body.Bytes())
}

// bufferedReply keeps a handler's reply for applyAfter.
type bufferedReply struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedReply) Header() http.Header { return b.header }
func (b *bufferedReply) WriteHeader(s int) {
	if b.status == 0 {
		b.status = s
	}
}
func (b *bufferedReply) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}

// defaultFaultError is the upstream-shaped body of a fault without a Body.
func defaultFaultError(status int) *apiError {
	switch {
	case status == http.StatusUnauthorized:
		return unauthorized("Unauthorized")
	case status == http.StatusInternalServerError:
		return newError(status, typeInternalError, "SERVER_ERROR")
	case status >= 500:
		return newError(status, "INTERNAL_SERVER_ERROR", "%s", http.StatusText(status))
	default:
		return newError(status, typeClientError, "%s", http.StatusText(status))
	}
}

// hangUp closes the connection without a reply. Where the connection cannot
// be hijacked (HTTP/2), aborting the handler resets the stream instead.
func hangUp(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}
