package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/fintech-bff/bff/internal/kv"
)

// Creating sessions, writing them back as they are used, and keeping each
// user's index small.

// maxTouchEvery caps how long a request waits after a session's last
// write-back before it slides the idle timeout again, so a very long idle
// timeout still records LastSeen to within a quarter of an hour.
const maxTouchEvery = 15 * time.Minute

// touchInterval is how long after the last write-back a request writes the
// session back: a quarter of the idle timeout, at most maxTouchEvery. A
// session in use is thus never stored closer than 3/4 of the idle timeout
// to its end, however short the timeout (30 s: written back every 7.5 s at
// most), and requests up to 3/4 of the idle timeout apart keep it alive.
//
// A write-back costs two store commands (the write, and the re-read its
// tracked change causes on each instance holding a copy), so the interval
// is what the store pays per active session: with the default 30 min idle
// timeout, one write-back per 7.5 min, 0.0044 commands per second per
// active session (440 per second for 100,000 users), whatever their
// request rate.
func touchInterval(idle time.Duration) time.Duration {
	return min(maxTouchEvery, idle/4)
}

// Create starts a new session with a new id (never reusing one: no
// fixation) and returns its id and record. Every login (dev, OpenID, mobile)
// comes through here, so here the user's index is kept small: the handles
// of ended sessions are pruned from it, and with MaxPerUser the user's
// oldest sessions beyond the cap are ended (see trim). Across instances the
// cap is approximate: logins racing on several instances may leave a few
// sessions too many (or end one too many of the older ones) until the
// user's next login, which trims again; the newest sessions always survive.
func (m *Manager) Create(ctx context.Context, n New) (string, Record, error) {
	now := m.now()
	if n.AuthTime.IsZero() || n.AuthTime.After(now) {
		n.AuthTime = now
	}
	rec := Record{UserID: n.UserID, CreatedAt: now, LastSeen: now, AuthTime: n.AuthTime, Method: n.Method, Sub: n.Sub, SID: n.SID, JKT: n.JKT}
	id := NewID()
	if err := m.save(ctx, id, rec); err != nil {
		return "", Record{}, err
	}
	h := Handle(id)
	for _, ix := range indexes(rec) {
		if err := m.store.SAdd(ctx, ix, h, m.absolute); err != nil {
			// The record is deleted again (not left unindexed, which no
			// revocation of the user would find); should that fail too, its
			// ttl ends it, and the caller hears of both.
			return "", Record{}, errors.Join(err, m.store.Del(ctx, key(id)))
		}
	}
	// Housekeeping, best effort: the session exists and is indexed, so a
	// store error here does not fail the login; the next login of the user
	// does the work again. Logged, as a cap that is not kept would
	// otherwise go unseen.
	if err := m.trim(ctx, h, rec); err != nil {
		m.log.Warn("pruning the user's sessions after a login failed; the next login retries",
			slog.String("error", err.Error()))
	}
	m.observe.Created()
	return id, rec, nil
}

// byAge orders sessions oldest first: by CreatedAt, then by handle, so
// that every instance orders them alike.
func byAge(a, b Info) int {
	if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
		return c
	}
	return strings.Compare(a.Handle, b.Handle)
}

// pruneSample bounds the handles a login checks in its user's index when
// there is no cap (MaxPerUser 0): a random sample of them, so that logins
// that are never listed still wear the ended ones away, at a bounded cost
// per login however many sessions the user keeps.
const pruneSample = 32

// trim runs after the session handle (record rec) was created and indexed.
// It reads the user's other sessions, removes the handles of ended ones
// from the user's index (and from the new session's provider indexes: the
// same user's sessions share them), and with MaxPerUser ends the user's
// oldest sessions beyond the cap, exactly as a revocation does: the record
// deleted, the local copies on every instance forgotten (announced), the
// handle removed from its indexes.
//
// Without a cap the index is bounded by the user's live sessions; with
// one, by the cap plus the sessions that ended since the last login, so
// the work of a login is bounded too (one read per handle).
//
// The cap is approximate across instances, never strict: two logins
// racing on two instances may each see the other's session, or neither,
// and may end one session too many or too few. It converges (the next
// login trims again), and it never ends every session: sessions are
// ordered by (CreatedAt, handle) and a login ends only sessions ordered
// before its own, never its own, so the newest always survives.
func (m *Manager) trim(ctx context.Context, h string, rec Record) error {
	ix := indexKey("user", rec.UserID)
	handles, err := m.store.SMembers(ctx, ix)
	if err != nil {
		return err
	}
	handles = slices.DeleteFunc(handles, func(o string) bool { return o == h })
	if m.maxPerUser == 0 && len(handles) > pruneSample {
		mrand.Shuffle(len(handles), func(i, j int) { handles[i], handles[j] = handles[j], handles[i] })
		handles = handles[:pruneSample]
	}
	others := make([]Info, 0, len(handles))
	for _, o := range handles {
		orec, err := m.get(ctx, o)
		switch {
		case errors.Is(err, ErrNotFound):
			for _, oix := range indexes(rec) {
				_ = m.store.SRem(ctx, oix, o)
			}
		case err != nil:
			return err
		default:
			others = append(others, Info{Handle: o, Record: orec})
		}
	}
	if m.maxPerUser == 0 || len(others) < m.maxPerUser {
		return nil
	}
	slices.SortFunc(others, byAge)
	self := Info{Handle: h, Record: rec}
	var ended []string
	for _, o := range others[:len(others)+1-m.maxPerUser] {
		if byAge(o, self) > 0 {
			break // a newer login raced this one: it trims, not this one
		}
		if err := m.endRecord(ctx, o.Handle, o.Record, true); err != nil {
			return errors.Join(err, m.local.Announce(ctx, ended))
		}
		ended = append(ended, o.Handle)
	}
	return m.local.Announce(ctx, ended)
}

// encode returns the record as stored and the ttl of its key: until the
// earlier of its deadlines, or ErrNotFound when that has passed.
func (m *Manager) encode(rec Record) ([]byte, time.Duration, error) {
	ttl := m.ExpiresAt(rec).Sub(m.now())
	if ttl <= 0 {
		return nil, 0, ErrNotFound
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, 0, fmt.Errorf("session: encode: %w", err)
	}
	return b, ttl, nil
}

// save stores a new session.
func (m *Manager) save(ctx context.Context, id string, rec Record) error {
	b, ttl, err := m.encode(rec)
	if err != nil {
		return err
	}
	return m.store.Set(ctx, key(id), b, ttl)
}

// touch writes back an existing session with its idle timeout slid, and
// the key's ttl with it. It only ever updates the record: when the session
// was ended meanwhile (logged out, revoked, expired) it writes nothing and
// returns ErrNotFound, so a request racing a revocation cannot bring the
// session back.
func (m *Manager) touch(ctx context.Context, handle string, rec Record) error {
	b, ttl, err := m.encode(rec)
	if err != nil {
		return err
	}
	ok, err := m.store.SetIfExists(ctx, handleKey(handle), b, ttl)
	if err != nil {
		return err
	}
	if !ok {
		return ErrNotFound
	}
	return nil
}

// get reads a live session by handle.
func (m *Manager) get(ctx context.Context, handle string) (Record, error) {
	b, err := m.store.Get(ctx, handleKey(handle))
	if errors.Is(err, kv.ErrNotFound) {
		return Record{}, ErrNotFound
	}
	if err != nil {
		return Record{}, err
	}
	var rec Record
	if err := json.Unmarshal(b, &rec); err != nil || rec.UserID == "" {
		// Not found, as before; but logged: a change of the record's
		// schema would otherwise look like users logged out en masse. The
		// line names the kind of error only, never the record's values
		// (a decoding error may quote them).
		reason := "no user id"
		if err != nil {
			reason = fmt.Sprintf("%T", err)
		}
		m.log.Warn("a session record could not be read; the session is treated as ended",
			slog.String("reason", reason), slog.Int("bytes", len(b)))
		return Record{}, ErrNotFound
	}
	if !m.now().Before(m.ExpiresAt(rec)) {
		_ = m.store.Del(ctx, handleKey(handle))
		return Record{}, ErrNotFound
	}
	return rec, nil
}
