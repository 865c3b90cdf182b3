// Package session keeps the BFF's own user sessions: an opaque random id in
// a signed and encrypted cookie (or sent as a session token), and the record
// it names in a shared store, so any instance serves it and a logout takes
// effect everywhere at once.
//
// The package is plain Go: no HTTP framework.
package session

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/localcache"
	"github.com/fintech-bff/bff/internal/telemetry"
)

// Login methods recorded on a session.
const (
	MethodDev    = "dev"
	MethodOIDC   = "oidc"
	MethodMobile = "mobile"
)

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

// localTTL bounds how long an instance trusts its in-process copy of a
// session without reading the store: the safety net behind pub/sub
// invalidation, so a revoked session is refused everywhere within it even
// if an invalidation message were lost.
const localTTL = time.Second

// channel carries session invalidations between instances.
const channel = "sessions:events"

// ErrNotFound means there is no live session for the id: never created,
// logged out, revoked or expired. The edge answers 401 SESSION_REQUIRED.
var ErrNotFound = errors.New("session: not found")

// ErrUnavailable means the store could not answer; the edge answers 503
// SESSION_STORE_UNAVAILABLE (fail closed, never 401).
var ErrUnavailable = kv.ErrUnavailable

// Store is what sessions need of the shared store.
type Store interface {
	Get(ctx context.Context, key string) ([]byte, error)
	Set(ctx context.Context, key string, value []byte, ttl time.Duration) error
	// SetIfExists updates a key only if it still exists (atomically), so
	// a write-back never recreates a session revoked meanwhile.
	SetIfExists(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error)
	Del(ctx context.Context, key string) error
	SAdd(ctx context.Context, key, member string, ttl time.Duration) error
	SRem(ctx context.Context, key, member string) error
	SMembers(ctx context.Context, key string) ([]string, error)
	Publish(ctx context.Context, channel, msg string) error
	Subscribe(ctx context.Context, channel string, onMessage func(string), onReady func(bool))
	// Members keeps the instances' leases that make a revocation wait
	// until no instance can serve the session (members.go).
	kv.Members
}

var (
	_ Store = (*kv.Redis)(nil)
	_ Store = (*kv.Memory)(nil)
)

// Record is a session as stored.
type Record struct {
	UserID    string    `json:"u"`
	CreatedAt time.Time `json:"c"`
	LastSeen  time.Time `json:"l"`
	AuthTime  time.Time `json:"a"`
	Method    string    `json:"m"`
	// Sub and SID are the OpenID provider's subject and session id, for
	// back-channel logout; empty for dev logins.
	Sub string `json:"s,omitempty"`
	SID string `json:"i,omitempty"`
}

// New describes a session to create.
type New struct {
	UserID   string
	Method   string
	AuthTime time.Time // when the user authenticated at the provider; now when zero
	Sub, SID string
}

// Options configures a Manager.
type Options struct {
	IdleTimeout     time.Duration
	AbsoluteTimeout time.Duration
	// LocalBytes bounds the memory of the in-process copy of
	// live sessions in front of the store; 0 turns it off. It is used only while Run keeps the invalidation subscription
	// up.
	LocalBytes int64
	// MaxPerUser caps a user's live sessions: a login beyond it ends that
	// user's oldest sessions (by CreatedAt), as a revocation would. 0 is
	// no cap. The cap is approximate across instances (see Create).
	MaxPerUser int
	Now        func() time.Time // time.Now when nil
	OnCreate   func()           // called after each session is created (metrics)
	Logger     *slog.Logger     // discarded when nil
}

// Manager creates, finds and ends sessions. It is safe for concurrent use.
type Manager struct {
	store      Store
	idle       time.Duration
	absolute   time.Duration
	touchEvery time.Duration
	now        func() time.Time
	onCreate   func()
	log        *slog.Logger
	maxPerUser int
	id         string                     // this instance, to skip its own messages
	local      *localcache.Cache[compact] // by handle
	live       atomic.Bool
	// lease is fresh while the store reports every change of a session
	// key (kv.Tracker) and has lately proven it: a local copy is then
	// trusted until reported changed, instead of for localTTL. Track
	// confirms only while its tracking is live, and onTracking resets it.
	lease kv.Lease

	// versions counts the drops from the local layer, by handle (a
	// session ended or changed here or elsewhere) and of all of it (the
	// subscription or the tracking reset). A Lookup keeps what it read
	// only if its handle's version did not change since it started: a
	// read that raced a revocation must not land in the local layer after
	// the revocation dropped it. mu orders that check-and-put against the
	// drops.
	mu       sync.Mutex
	versions localcache.Versions

	// trustUntil is when this instance's lease in the sessions' group
	// stops holding (monotonic, see members.go): local copies are trusted
	// only before it. acks are the revocations waiting on the others.
	trustUntil atomic.Int64
	acks       acks
}

var tracer = telemetry.Tracer("session")

// cached is a session in the in-process layer, keyed by its handle (which
// the store's key and invalidation messages name).
type cached struct {
	rec     Record
	handle  string
	fetched time.Time
}

// compact is a cached session as the local layer's bytes hold it
// (appendCompact): its times as int64 nanoseconds. The record's times are
// Unix times (they are the stored record's); fetched is localcache.Mono,
// an age that a wall-clock step must not stretch.
type compact struct {
	userID, method, sub, sid, handle     string
	created, lastSeen, authTime, fetched int64
}

func (c cached) compact() compact {
	r := c.rec
	return compact{userID: r.UserID, method: r.Method, sub: r.Sub, sid: r.SID, handle: c.handle,
		created: unixNano(r.CreatedAt), lastSeen: unixNano(r.LastSeen), authTime: unixNano(r.AuthTime), fetched: localcache.Mono(c.fetched)}
}

func (k compact) cached() cached {
	at := func(ns int64) time.Time {
		if ns == zeroTime {
			return time.Time{}
		}
		return time.Unix(0, ns).UTC()
	}
	return cached{handle: k.handle, fetched: localcache.FromMono(k.fetched), rec: Record{UserID: k.userID, Method: k.method, Sub: k.sub, SID: k.sid,
		CreatedAt: at(k.created), LastSeen: at(k.lastSeen), AuthTime: at(k.authTime)}}
}

// zeroTime stands for the zero time.Time, whose UnixNano is undefined.
const zeroTime = math.MinInt64

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return zeroTime
	}
	return t.UnixNano()
}

// appendCompact is how the local layer holds a session: its times, then
// its strings (the handle is the cache's key).
func appendCompact(b []byte, k compact) []byte {
	for _, t := range [...]int64{k.created, k.lastSeen, k.authTime, k.fetched} {
		b = localcache.AppendInt(b, t)
	}
	for _, s := range [...]string{k.userID, k.method, k.sub, k.sid} {
		b = localcache.AppendString(b, s)
	}
	return b
}

// readCompact is the session appendCompact wrote under handle.
func readCompact(handle string, b []byte) compact {
	r := localcache.Reader(b)
	k := compact{handle: handle, created: r.Int(), lastSeen: r.Int(), authTime: r.Int(), fetched: r.Int(), userID: r.String()}
	k.method = internMethod(r.Bytes())
	k.sub, k.sid = r.String(), r.String()
	return k
}

// internMethod is the constant's string for one of the three methods, not
// a copy per session read.
func internMethod(b []byte) string {
	switch string(b) {
	case MethodDev:
		return MethodDev
	case MethodOIDC:
		return MethodOIDC
	case MethodMobile:
		return MethodMobile
	}
	return string(b)
}

// NewManager returns a Manager over store.
func NewManager(store Store, o Options) *Manager {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.OnCreate == nil {
		o.OnCreate = func() {}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Manager{store: store, idle: o.IdleTimeout, absolute: o.AbsoluteTimeout, touchEvery: touchInterval(o.IdleTimeout),
		now: o.Now, onCreate: o.OnCreate, log: o.Logger, maxPerUser: max(o.MaxPerUser, 0), id: NewID()[:16]}
	m.local = localcache.New(localcache.Options[compact]{
		MaxBytes: o.LocalBytes, Append: appendCompact, Read: readCompact, Now: o.Now,
		// A copy is gone from the heap once it would not be served any
		// more: at the session's end, or localTTL after it was read when
		// the store does not report changes.
		Until: func(k compact) time.Time {
			c := k.cached()
			end := m.ExpiresAt(c.rec)
			if !m.Tracked() {
				end = earliest(end, c.fetched.Add(localTTL))
			}
			return end
		},
	})
	return m
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// Run keeps the invalidation subscription until ctx ends: a session ended
// on any instance is dropped from every instance's local copy. While it is
// down the local layer is bypassed (and cleared), never trusted.
func (m *Manager) Run(ctx context.Context) {
	if t, ok := m.store.(kv.Tracker); ok {
		go func() {
			if err := t.Track(ctx, []string{"sess:"}, m.onChange, m.onTracking, m.lease.Confirmed); err != nil {
				m.log.Info("session keys are not tracked; local sessions are re-read from the store every "+localTTL.String(), slog.String("reason", err.Error()))
			}
		}()
	}
	go m.renew(ctx)
	m.store.Subscribe(ctx, channel, m.onMessage, func(up bool) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.versions.BumpAll()
		m.live.Store(false)
		m.local.Clear()
		m.live.Store(up)
	})
	m.live.Store(false)
}

// onChange drops the local copy of a changed session key ("": all).
func (m *Manager) onChange(key string) {
	if key == "" {
		m.onTracking(true)
		return
	}
	if handle, ok := strings.CutPrefix(key, "sess:"); ok {
		m.invalidate(handle)
	}
}

// onTracking drops every local copy whenever tracking goes down or up (a
// copy kept meanwhile may be of a changed session) and waits for the next
// confirmation before trusting any again.
func (m *Manager) onTracking(bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.versions.BumpAll()
	m.lease.Reset()
	m.local.Clear()
}

// Tracked reports whether local copies are trusted until reported
// changed: the store reports every change of a session key, and confirmed
// it did so within kv.LeaseFor.
func (m *Manager) Tracked() bool { return m.lease.Fresh() }

// invalidate drops the session with this handle from the local layer.
func (m *Manager) invalidate(handle string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.versions.Bump(handle)
	m.local.Drop(handle)
}

// keep puts c in the local layer unless its session was invalidated since
// the caller's read started (seen is its version then): the copy could be
// of a session ended meanwhile.
func (m *Manager) keep(c cached, seen uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.live.Load() && m.versions.Of(c.handle) == seen {
		m.local.Put(c.handle, c.compact())
	}
}

// Live reports whether the invalidation subscription is up.
func (m *Manager) Live() bool { return m.live.Load() }

// ExpiresAt is when the record ends if unused: the earlier of the idle and
// the absolute deadline.
func (m *Manager) ExpiresAt(r Record) time.Time {
	idle := r.LastSeen.Add(m.idle)
	abs := r.CreatedAt.Add(m.absolute)
	if idle.Before(abs) {
		return idle
	}
	return abs
}

// Handle is a session's public name: a hash of its id. The store keys
// sessions by handle, so it never holds a usable session id (a Redis dump
// cannot be replayed as cookies), and GET /auth/sessions shows handles.
func Handle(id string) string {
	sum := sha256.Sum256([]byte(id))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func key(id string) string           { return handleKey(Handle(id)) }
func handleKey(handle string) string { return "sess:" + handle }

// indexKey names the set of a user's (or a provider subject's, or a
// provider session's) session handles.
func indexKey(kind, v string) string {
	sum := sha256.Sum256([]byte(kind + "\x00" + v))
	return "sessidx:" + kind + ":" + base64.RawURLEncoding.EncodeToString(sum[:18])
}

// NewID returns a fresh 256-bit random session id, URL-safe.
func NewID() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
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
	rec := Record{UserID: n.UserID, CreatedAt: now, LastSeen: now, AuthTime: n.AuthTime, Method: n.Method, Sub: n.Sub, SID: n.SID}
	id := NewID()
	if err := m.save(ctx, id, rec); err != nil {
		return "", Record{}, err
	}
	h := Handle(id)
	for _, ix := range indexes(rec) {
		if err := m.store.SAdd(ctx, ix, h, m.absolute); err != nil {
			_ = m.store.Del(ctx, key(id))
			return "", Record{}, err
		}
	}
	// Housekeeping, best effort: the session exists and is indexed, so a
	// store error here does not fail the login; the next login of the user
	// does the work again.
	_ = m.trim(ctx, h, rec)
	m.onCreate()
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
// deleted, the local copies on every instance dropped (pub/sub), the
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
		if err := m.end(ctx, o.Handle, o.Record, true); err != nil {
			return err
		}
		ended = append(ended, o.Handle)
	}
	return m.announce(ctx, ended)
}

// indexes are the sets a session's handle belongs to.
func indexes(r Record) []string {
	out := []string{indexKey("user", r.UserID)}
	if r.Sub != "" {
		out = append(out, indexKey("sub", r.Sub))
	}
	if r.SID != "" {
		out = append(out, indexKey("sid", r.SID))
	}
	return out
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

// Lookup returns the live session named by id, enforcing the idle and
// absolute timeouts, and slides the idle timeout: written back once a
// quarter of it (at most 15 minutes) has passed since the last write-back. It
// returns ErrNotFound or an error wrapping ErrUnavailable.
//
// In steady state it costs no store round trip: the session comes from the
// local layer, re-read from the store at least every localTTL and dropped
// at once when another instance ends it.
//
// Revocation wins: the write-back only updates a record that still
// exists, and a Lookup that finds it gone reports ErrNotFound; a read that
// raced a revocation is served (the request was in flight) but not kept in
// the local layer.
func (m *Manager) Lookup(ctx context.Context, id string) (_ Record, err error) {
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
	seen := m.versions.Of(handle)
	now := m.now()
	k, ok := m.local.Get(handle)
	c := k.cached()
	fresh := ok && m.live.Load() && m.member() && (m.Tracked() || now.Sub(c.fetched) < localTTL) && now.Before(m.ExpiresAt(c.rec))
	if !fresh {
		source = "store"
		rec, err := m.get(ctx, handle)
		if err != nil {
			m.local.Drop(handle)
			return Record{}, err
		}
		c = cached{rec: rec, handle: handle, fetched: now}
	}
	if now.Sub(c.rec.LastSeen) >= m.touchEvery {
		c.rec.LastSeen = now
		if err := m.touch(ctx, c.handle, c.rec); err != nil {
			if errors.Is(err, ErrNotFound) {
				m.local.Drop(handle)
			}
			return Record{}, err
		}
	} else if fresh {
		return c.rec, nil
	}
	m.keep(c, seen)
	return c.rec, nil
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
		return Record{}, ErrNotFound
	}
	if !m.now().Before(m.ExpiresAt(rec)) {
		_ = m.store.Del(ctx, handleKey(handle))
		return Record{}, ErrNotFound
	}
	return rec, nil
}

// Delete ends the session named by id everywhere. It returns once no
// instance can serve it (members.go).
func (m *Manager) Delete(ctx context.Context, id string) error {
	return m.deleteHandle(ctx, Handle(id))
}

func (m *Manager) deleteHandle(ctx context.Context, handle string) error {
	if err := m.drop(ctx, handle); err != nil {
		return err
	}
	return m.announce(ctx, []string{handle})
}

// drop ends the session with this handle in the store: its record is
// deleted, this instance's copy dropped and, when its record is known, its
// handle removed from its indexes. The caller announces it.
func (m *Manager) drop(ctx context.Context, handle string) error {
	rec, err := m.get(ctx, handle)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return m.end(ctx, handle, rec, err == nil)
}

// end deletes the record and this instance's copy, and removes the handle
// from the record's indexes when it is known; the other instances learn it
// from announce.
func (m *Manager) end(ctx context.Context, handle string, rec Record, known bool) error {
	if err := m.store.Del(ctx, handleKey(handle)); err != nil {
		return err
	}
	m.invalidate(handle)
	if known {
		for _, ix := range indexes(rec) {
			_ = m.store.SRem(ctx, ix, handle)
		}
	}
	return nil
}

// Info describes one of a user's sessions; Handle is its public name.
type Info struct {
	Handle string
	Record
}

// List returns the user's live sessions, pruning index entries of ended ones.
func (m *Manager) List(ctx context.Context, userID string) ([]Info, error) {
	return m.listIndex(ctx, indexKey("user", userID))
}

func (m *Manager) listIndex(ctx context.Context, ix string) ([]Info, error) {
	handles, err := m.store.SMembers(ctx, ix)
	if err != nil {
		return nil, err
	}
	out := make([]Info, 0, len(handles))
	for _, h := range handles {
		rec, err := m.get(ctx, h)
		switch {
		case errors.Is(err, ErrNotFound):
			_ = m.store.SRem(ctx, ix, h)
		case err != nil:
			return nil, err
		default:
			out = append(out, Info{Handle: h, Record: rec})
		}
	}
	return out, nil
}

// DeleteForUser ends the session with this handle if it is the user's; it
// reports whether there was one.
func (m *Manager) DeleteForUser(ctx context.Context, userID, handle string) (bool, error) {
	rec, err := m.get(ctx, handle)
	if errors.Is(err, ErrNotFound) || (err == nil && rec.UserID != userID) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, m.deleteHandle(ctx, handle)
}

// RevokeUser ends every session of a user and returns how many.
func (m *Manager) RevokeUser(ctx context.Context, userID string) ([]Info, error) {
	return m.revokeIndex(ctx, indexKey("user", userID))
}

// RevokeProvider ends the sessions of an OpenID provider session (sid) or,
// without sid, of a provider subject (sub): back-channel logout.
func (m *Manager) RevokeProvider(ctx context.Context, sub, sid string) ([]Info, error) {
	if sid != "" {
		return m.revokeIndex(ctx, indexKey("sid", sid))
	}
	return m.revokeIndex(ctx, indexKey("sub", sub))
}

func (m *Manager) revokeIndex(ctx context.Context, ix string) ([]Info, error) {
	list, err := m.listIndex(ctx, ix)
	if err != nil {
		return nil, err
	}
	handles := make([]string, 0, len(list))
	for _, in := range list {
		if err := m.drop(ctx, in.Handle); err != nil {
			return nil, err
		}
		handles = append(handles, in.Handle)
	}
	// One announcement for them all: one wait, however many sessions.
	return list, m.announce(ctx, handles)
}
