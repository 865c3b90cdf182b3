// Package nearcache is the in-process layer that sessions and tokens share:
// a bounded local copy (localcache) of keys the shared store holds, kept
// correct by the store's own reports of their changes (kv.Tracker, with
// its confirmed lease) and by the instances' messages on a channel, and
// bypassed, never trusted, while either is down.
//
// It holds, once, what each of them used to carry its own copy of: the
// subscription and the tracking, the lease that bounds how stale a copy may
// be, and the invalidate-versus-fill race: a read that started before a key
// was dropped must not put what it read back (Keep checks the key's version
// against the one seen when the read began, under the same lock the drops
// take). What a copy is, how long it may be served and what the channel's
// messages mean stay with the caller.
package nearcache

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/localcache"
)

// Store is what a layer needs of the shared store: the instances' channel.
// A store that is also a kv.Tracker reports every change of the layer's
// keys itself.
type Store interface {
	Subscribe(ctx context.Context, channel string, onMessage func(string), onReady func(bool))
}

// Options configures a Layer.
type Options[T any] struct {
	// Cache is the local copy's configuration (its Until may ask the
	// layer's Tracked).
	Cache localcache.Options[T]
	// Channel carries the instances' messages; OnMessage gets each.
	Channel   string
	OnMessage func(string)
	// Prefix is the tracked key prefix ("sess:"); LocalKey names the local
	// copy of a tracked store key (false: none).
	Prefix   string
	LocalKey func(storeKey string) (string, bool)
	// What names the keys in the log ("session", "token").
	What   string
	Logger *slog.Logger
}

// Layer is a local copy of store keys. Safe for concurrent use.
type Layer[T any] struct {
	o     Options[T]
	local *localcache.Cache[T]
	live  atomic.Bool // the channel's subscription is up
	// lease is fresh while the store reports every change of the keys
	// and has lately proven it (kv.Lease).
	lease kv.Lease

	// mu orders Keep's version check and put against the drops.
	mu       sync.Mutex
	versions localcache.Versions
	// own are the caller's own writes whose report is awaited
	// (KeepOwnWrite), by local key.
	own map[string]ownWrite[T]
}

// ownWrite is a copy to put when the store reports the write that made
// it: the key's version must then be expect, one more than when the
// write's read began.
type ownWrite[T any] struct {
	v      T
	expect uint64
}

// dropStep is what a drop other than the store's report of a change (an
// instance's message, a caller's drop, a clear) adds to a key's version;
// a report adds 1. The difference between two versions so tells a single
// report (1) from anything else.
const dropStep = 1 << 32

// maxOwnWrites bounds the writes awaiting their report; past it a write
// is simply not kept (the next read re-reads it).
const maxOwnWrites = 100_000

// New returns a layer; Run makes it live.
func New[T any](o Options[T]) *Layer[T] {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.OnMessage == nil {
		o.OnMessage = func(string) {}
	}
	return &Layer[T]{o: o, local: localcache.New(o.Cache), own: map[string]ownWrite[T]{}}
}

// Run keeps the channel's subscription and, on a kv.Tracker, the key
// tracking until ctx ends. While the subscription is down the layer is
// cleared and not live; whenever the tracking goes down or up it is
// cleared and untracked until the next confirmation.
func (l *Layer[T]) Run(ctx context.Context, store Store) {
	if t, ok := store.(kv.Tracker); ok {
		go func() {
			if err := t.Track(ctx, []string{l.o.Prefix}, l.onChange, l.onTracking, l.lease.Confirmed); err != nil {
				l.o.Logger.Info(l.o.What+" keys are not tracked; local copies are re-read from the store", slog.String("reason", err.Error()))
			}
		}()
	}
	store.Subscribe(ctx, l.o.Channel, l.o.OnMessage, func(up bool) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.versions.BumpAllBy(dropStep)
		clear(l.own)
		l.live.Store(false)
		l.local.Clear()
		l.live.Store(up)
	})
	l.live.Store(false)
}

// onChange drops the local copy of a changed store key ("": all).
func (l *Layer[T]) onChange(storeKey string) {
	if storeKey == "" {
		l.DropAll()
		return
	}
	k, ok := l.o.LocalKey(storeKey)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.versions.Bump(k)
	if w, ok := l.own[k]; ok {
		delete(l.own, k)
		if l.versions.Of(k) == w.expect {
			l.local.Put(k, w.v)
			return
		}
	}
	l.local.Drop(k)
}

// onTracking clears the layer whenever tracking goes down or up (a copy
// kept meanwhile may be stale) and waits for the next confirmation.
func (l *Layer[T]) onTracking(bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.versions.BumpAllBy(dropStep)
	clear(l.own)
	l.lease.Reset()
	l.local.Clear()
}

// Live reports whether the channel's subscription is up: only then is the
// layer used.
func (l *Layer[T]) Live() bool { return l.live.Load() }

// Tracked reports whether the store reports every change of the keys and
// confirmed it within kv.LeaseFor: a copy may then be served until it is
// reported changed (or expires), not just for a short age.
func (l *Layer[T]) Tracked() bool { return l.lease.Fresh() }

// Get returns the local copy of key, live or not: the caller decides
// whether it may serve it.
func (l *Layer[T]) Get(key string) (T, bool) { return l.local.Get(key) }

// Version is key's version now: a reader takes it before it reads the
// store, and hands it to Keep.
func (l *Layer[T]) Version(key string) uint64 { return l.versions.Of(key) }

// Keep puts v as key's copy, unless the layer is not live or key was
// dropped since seen (its Version when the read began): what was read
// could be of a key changed or ended meanwhile.
func (l *Layer[T]) Keep(key string, v T, seen uint64) {
	if !l.live.Load() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.live.Load() && l.versions.Of(key) == seen {
		l.local.Put(key, v)
	}
}

// KeepOwnWrite is Keep for a copy the caller has just written to the
// store itself (a session's idle write-back, a minted token), when the
// keys are tracked. The store reports every write to every instance, the
// writer's own included, and the report does not say whose write it was:
// Keep's copy would be dropped by the writer's own report, and the next
// request would read back what this instance wrote. Here the copy is put
// now (as Keep would), and again when the first report of the key after
// seen arrives, if it is the only change counted since seen; if that
// report came before the caller is here, the copy is put at once on the
// same condition.
//
// What a report can and cannot tell. Reports come in the order of the
// writes, but Redis sends the keys changed in one pass of its event loop
// as one report: this write and another instance's write or delete of the
// same key in the same pass arrive as one, taken here for this write's.
// So a tracking report alone must not be what ends a copy that matters:
// every writer that deletes or replaces a key others must stop serving
// says so on the layer's channel too, and that message drops the copy
// (and cancels a pending own write) whenever it arrives. Sessions do:
// every end is announced, and a revocation answers only once every
// instance has acknowledged the announcement or its lease has run out; a
// token that changed is announced ("set", "inv", "rot"), and a stale one
// the upstream refuses is dropped and minted again. What the tracking
// report alone then covers is a writer that died between its write and
// its message (a revocation that never answered): a copy of that
// session, kept through a coalesced report, is served until the instance
// next writes it back (a quarter of the idle timeout at most), which
// finds it gone. Untracked, it is Keep.
func (l *Layer[T]) KeepOwnWrite(key string, v T, seen uint64) {
	if !l.Tracked() {
		l.Keep(key, v, seen)
		return
	}
	if !l.live.Load() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.live.Load() {
		return
	}
	switch l.versions.Of(key) - seen {
	case 0: // the report is still to come: kept now, as Keep would, and again when it comes
		l.local.Put(key, v)
		if len(l.own) < maxOwnWrites {
			l.own[key] = ownWrite[T]{v: v, expect: seen + 1}
		}
	case 1: // one report came, and nothing else: this write's or an earlier one's
		l.local.Put(key, v)
	}
}

// Drop removes key's copy and counts a change of it: a read in flight
// keeps nothing it read before, and an own write awaiting its report is
// not kept.
func (l *Layer[T]) Drop(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.versions.BumpBy(key, dropStep)
	delete(l.own, key)
	l.local.Drop(key)
}

// DropAll is Drop for every key.
func (l *Layer[T]) DropAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.versions.BumpAllBy(dropStep)
	clear(l.own)
	l.local.Clear()
}
