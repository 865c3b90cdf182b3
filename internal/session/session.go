// Package session keeps the BFF's own user sessions: an opaque random id in
// a signed and encrypted cookie (or sent as a session token), and the record
// it names in a shared store, so any instance serves it and a logout takes
// effect everywhere at once.
//
// The package is plain Go: no HTTP framework.
package session

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/nearcache"
)

// Login methods recorded on a session.
const (
	MethodDev    = "dev"
	MethodOIDC   = "oidc"
	MethodMobile = "mobile"
)

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
	// until no instance can serve the session (nearcache's members.go).
	kv.Members
}

var (
	_ Store = (*kv.Redis)(nil)
	_ Store = (*kv.Memory)(nil)
)

// Options configures a Manager.
type Options struct {
	IdleTimeout     time.Duration
	AbsoluteTimeout time.Duration
	// LocalBytes bounds the memory of the in-process copies of live
	// sessions in front of the store; 0 turns them off. They are used only
	// while Run keeps the invalidation subscription up.
	LocalBytes int64
	// MaxPerUser caps a user's live sessions: a login beyond it ends that
	// user's oldest sessions (by CreatedAt), as a revocation would. 0 is
	// no cap. The cap is approximate across instances (see Create).
	MaxPerUser int
	// Now is the clock records are stamped and expire on, and the one the
	// local copies' ages and this instance's lease are measured on
	// (nearcache); time.Now when nil. A test moves them all by moving it.
	Now func() time.Time
	// Observe, when set, is told of each session created (metrics).
	Observe Observer
	Logger  *slog.Logger // discarded when nil
}

// Observer receives the Manager's events. Implementations must be cheap
// and safe for concurrent use.
type Observer interface {
	// Created reports a session created (a login), after it is stored
	// and indexed.
	Created()
}

type nopObserver struct{}

func (nopObserver) Created() {}

// Manager creates, finds and ends sessions. It is safe for concurrent use.
type Manager struct {
	store      Store
	idle       time.Duration
	absolute   time.Duration
	touchEvery time.Duration
	now        func() time.Time
	observe    Observer
	log        *slog.Logger
	maxPerUser int
	// local are the in-process copies, by handle, and everything that
	// decides whether one may be served (nearcache).
	local *nearcache.Layer[compact]
	// onEnd is told of every session this instance stops serving (OnEnd).
	onEnd atomic.Pointer[func(handle string)]
}

// NewManager returns a Manager over store.
func NewManager(store Store, o Options) *Manager {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Observe == nil {
		o.Observe = nopObserver{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Manager{store: store, idle: o.IdleTimeout, absolute: o.AbsoluteTimeout, touchEvery: touchInterval(o.IdleTimeout),
		now: o.Now, observe: o.Observe, log: o.Logger, maxPerUser: max(o.MaxPerUser, 0)}
	m.local = nearcache.New(store, nearcache.Options[compact]{
		MaxBytes: o.LocalBytes, Append: appendCompact, Read: readCompact,
		Expires: func(k compact) time.Time { return k.expiresAt(m) },
		MaxAge:  localTTL, Now: o.Now,
		Channel: channel,
		Prefix:  "sess:", LocalKey: func(key string) (string, bool) { return strings.CutPrefix(key, "sess:") },
		Group: memberGroup, Members: store, OnEnd: m.ended,
		What: "session", Logger: o.Logger,
	})
	return m
}
