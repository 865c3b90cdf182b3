package session

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/fintech-bff/bff/internal/telemetry"
)

// Sessions served from this instance's copy (nearcache: the copies, the
// rule that decides whether one may be served, the lease and the
// announcement of ended sessions). What is the session package's own:
// what a copy holds (record.go), how long an untracked copy may be served
// (localTTL), and which group its instances form (memberGroup).

// localTTL bounds how long an instance serves its in-process copy of a
// session without reading the store while Redis does not report every
// change of the keys: the safety net behind pub/sub invalidation, so a
// revoked session is refused everywhere within it even if an invalidation
// message were lost.
const localTTL = time.Second

// memberGroup names the sessions' group in the store: the instances whose
// leases a revocation waits for (nearcache's members.go).
const memberGroup = "sessions"

var tracer = telemetry.Tracer("session")

// Run keeps the local copies correct until ctx ends, and returns once
// everything it started has: the invalidation subscription, key tracking
// and this instance's lease in the sessions' group (nearcache). While the
// subscription is down the copies are bypassed (and forgotten), never
// trusted.
func (m *Manager) Run(ctx context.Context) { m.local.Run(ctx) }

// Tracked reports whether local copies are trusted until reported
// changed: the store reports every change of a session key, and confirmed
// it did so within kv.LeaseFor.
func (m *Manager) Tracked() bool { return m.local.Tracked() }

// Member reports whether this instance's lease in the sessions' group
// holds, so that it may serve sessions from its local copies.
func (m *Manager) Member() bool { return m.local.Member() }

// Live reports whether the invalidation subscription is up.
func (m *Manager) Live() bool { return m.local.Live() }

// forgetEnded forgets this instance's copy of a session it ended, and
// tells OnEnd's function; the other instances learn it from the
// announcement.
func (m *Manager) forgetEnded(handle string) {
	m.local.Forget(handle)
	m.ended(handle)
}

// ended tells OnEnd's function that the session with this handle is no
// longer served here ("": every session must be checked again).
func (m *Manager) ended(handle string) {
	if f := m.onEnd.Load(); f != nil {
		(*f)(handle)
	}
}

// OnEnd registers f, called with the handle of every session this
// instance stops serving (ended here, or announced by another instance)
// before the revocation is acknowledged, so that what holds the session
// open (an event stream) ends with it; and with "" when the instance forgets
// all its copies (it may have missed an announcement): then every session
// held open must be checked again. f must not block.
func (m *Manager) OnEnd(f func(handle string)) { m.onEnd.Store(&f) }

// Alive returns until when the session named by id is live, as Lookup
// would find it (zero: it is not), without sliding its idle timeout: a
// long-lived stream checks its session with it, and being open does not
// keep a session alive. The session may live longer (another request
// slides it); it never ends sooner unless revoked, which OnEnd reports.
func (m *Manager) Alive(ctx context.Context, id string) (time.Time, error) {
	if id == "" {
		return time.Time{}, nil
	}
	handle := Handle(id)
	read := m.local.BeginRead(handle)
	now := m.now()
	if k, ok := m.local.Serve(handle); ok {
		return until(now, m.ExpiresAt(k.cached().rec)), nil
	}
	rec, err := m.get(ctx, handle)
	switch {
	case errors.Is(err, ErrNotFound):
		m.local.Forget(handle)
		return time.Time{}, nil
	case err != nil:
		return time.Time{}, err
	}
	// Kept as Lookup keeps what it reads (unless a change came meanwhile):
	// the next check of a stream's session costs no round trip.
	m.local.Keep(handle, cached{rec: rec, handle: handle}.compact(), read)
	return until(now, m.ExpiresAt(rec)), nil
}

// until is expires when it is after now, else zero.
func until(now, expires time.Time) time.Time {
	if now.Before(expires) {
		return expires
	}
	return time.Time{}
}

// Lookup returns the live session named by id, enforcing the idle and
// absolute timeouts, and slides the idle timeout: written back once a
// quarter of it (at most 15 minutes) has passed since the last write-back. It
// returns ErrNotFound or an error wrapping ErrUnavailable.
//
// In steady state it costs no store round trip: the session comes from the
// local copy when nearcache may serve it, re-read from the store at least
// every localTTL (while untracked) and forgotten at once when another
// instance ends it.
//
// Revocation wins: the write-back only updates a record that still
// exists, and a Lookup that finds it gone reports ErrNotFound; a read that
// raced a revocation is served (the request was in flight) but not kept
// as a local copy.
func (m *Manager) Lookup(ctx context.Context, id string) (Record, error) {
	return m.LookupFor(ctx, id, nil)
}

// LookupFor is Lookup for a request that must also pass accept (a
// device-bound session's proof, the CSRF rule): accept sees the live
// session before its idle timeout slides, and a request it refuses (its
// error is returned as is) does not keep the session alive. A nil accept
// accepts every request.
func (m *Manager) LookupFor(ctx context.Context, id string, accept func(Record) error) (_ Record, err error) {
	if id == "" {
		return Record{}, ErrNotFound
	}
	ctx, span := telemetry.Start(ctx, tracer, "session.lookup")
	source := "local"
	defer func() {
		if span.IsRecording() {
			span.SetAttributes(attribute.String("bff.session.source", source), attribute.Bool("bff.session.found", err == nil))
		}
		span.End()
	}()
	handle := Handle(id)
	read := m.local.BeginRead(handle)
	now := m.now()
	k, fresh := m.local.Serve(handle)
	c := k.cached()
	if !fresh {
		source = "store"
		rec, err := m.get(ctx, handle)
		if err != nil {
			m.local.Forget(handle)
			return Record{}, err
		}
		c = cached{rec: rec, handle: handle}
	}
	if accept != nil {
		if err := accept(c.rec); err != nil {
			if !fresh {
				m.local.Keep(c.handle, c.compact(), read)
			}
			return Record{}, err
		}
	}
	if now.Sub(c.rec.LastSeen) >= m.touchEvery {
		c.rec.LastSeen = now
		if err := m.touch(ctx, c.handle, c.rec); err != nil {
			if errors.Is(err, ErrNotFound) {
				m.local.Forget(handle)
			}
			return Record{}, err
		}
		// Kept when Redis's report of this write-back comes back: no read
		// back of what this instance just wrote on its next request.
		m.local.KeepOwnWrite(c.handle, c.compact(), read)
		return c.rec, nil
	} else if fresh {
		return c.rec, nil
	}
	m.local.Keep(c.handle, c.compact(), read)
	return c.rec, nil
}
