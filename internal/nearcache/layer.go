package nearcache

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/nearcache/internal/localcache"
)

// Store is what a layer needs of the shared store: the instances'
// channel. A store that is also a kv.Tracker reports every change of the
// layer's keys itself.
type Store interface {
	Subscribe(ctx context.Context, channel string, onMessage func(string), onReady func(bool))
	Publish(ctx context.Context, channel, msg string) error
}

// Options configures a Layer. What a copy is (Append, Read), when it ends
// (Expires) and how long it may be served untracked (MaxAge) are the
// caller's; whether it may be served now is the layer's (serve.go).
type Options[T any] struct {
	// MaxBytes bounds the memory of the copies; 0 keeps none (every Serve
	// misses).
	MaxBytes int64
	// Append appends v's encoding to b (AppendInt, AppendString); Read
	// decodes what Append wrote for the copy under key, from bytes valid
	// only during the call (a Reader's String copies).
	Append func(b []byte, v T) []byte
	Read   func(key string, b []byte) T
	// Expires is when what v holds ends by itself (a session's idle or
	// absolute deadline, a token's serve-until), on Now; never when nil.
	Expires func(v T) time.Time
	// MaxAge is how long after its read began a copy may be served while
	// the store does not report every change of the keys (not Tracked):
	// the bound on a change whose message was lost.
	MaxAge time.Duration
	// Now is the layer's clock (clock.go); time.Now when nil.
	Now func() time.Time

	// Channel carries the instances' messages. A layer in a group reads
	// its own (members.go); OnMessage gets every other message.
	Channel   string
	OnMessage func(string)
	// Prefix is the tracked key prefix ("sess:"); LocalKey names the
	// local copy of a tracked store key (false: none).
	Prefix   string
	LocalKey func(storeKey string) (string, bool)

	// Members, when set, makes the layer a member of Group: its copies
	// are served only while its lease holds, and Announce waits for every
	// member (members.go).
	Group   string
	Members kv.Members
	// OnEnd, in a group, is told of every key the layer forgets because
	// another member announced its end, and of "" when the layer forgets
	// every copy because it may have missed an announcement. It must not
	// block.
	OnEnd func(key string)

	// What names the keys in the log ("session", "token").
	What   string
	Logger *slog.Logger // discarded when nil
}

// Layer is one kind of local copy (sessions, or tokens) of store keys.
// Safe for concurrent use; Run must be running for any copy to be served.
type Layer[T any] struct {
	o     Options[T]
	store Store
	local *localcache.Cache[entry[T]]
	live  atomic.Bool // the channel's subscription is up
	// tracking is fresh while the store reports every change of the keys
	// and has lately proven it (clock.go).
	tracking confirmations

	// mu orders Keep's version check and put against the changes.
	mu       sync.Mutex
	versions versions
	// own are the caller's own writes whose report is awaited
	// (KeepOwnWrite), by local key.
	own map[string]ownWrite[T]

	// id names this instance in its group and on the channel.
	id string
	// trustUntil is the instant this instance's lease stops holding
	// (members.go): its copies are trusted only before it; untrusted is
	// math.MinInt64 (an instant may be negative: a test's clock).
	trustUntil atomic.Int64
	// forgets counts the Forget and ForgetAll calls, each counted after its
	// copies are gone: Serve refuses a copy read while one ran (serve.go).
	forgets atomic.Uint64
	// acks are the announcements waiting on the other members.
	acks acks
	// acking are this member's acknowledgements in flight.
	acking acking
}

// entry is a copy as the layer keeps it: the caller's value and the
// instant its read began, from which its age counts.
type entry[T any] struct {
	v    T
	read int64
}

// ownWrite is a copy to keep when the store reports the write that made
// it: the key's version must then be expect, one more than when the
// write's read began.
type ownWrite[T any] struct {
	e      entry[T]
	expect uint64
}

// forgetStep is what a change other than the store's report of it (an
// instance's message, a caller's Forget, a clear) adds to a key's version;
// a report adds 1. The difference between two versions so tells a single
// report (1) from anything else.
const forgetStep = 1 << 32

// maxOwnWrites bounds the writes awaiting their report; past it a write
// is simply not kept (the next read re-reads it).
const maxOwnWrites = 100_000

// untrusted is trustUntil before the first renewal and after a distrust.
const untrusted = math.MinInt64

// never is the Expires of a copy that does not end by itself.
var never = time.Unix(1<<62, 0)

// New returns a layer over store; Run makes it live.
func New[T any](store Store, o Options[T]) *Layer[T] {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.OnMessage == nil {
		o.OnMessage = func(string) {}
	}
	if o.OnEnd == nil {
		o.OnEnd = func(string) {}
	}
	if o.Expires == nil {
		o.Expires = func(T) time.Time { return never }
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	l := &Layer[T]{o: o, store: store, own: map[string]ownWrite[T]{}, id: newID(16)}
	l.trustUntil.Store(untrusted)
	l.local = localcache.New(localcache.Options[entry[T]]{
		MaxBytes: o.MaxBytes, Now: o.Now,
		Append: func(b []byte, e entry[T]) []byte { return o.Append(AppendInt(b, e.read), e.v) },
		Read: func(key string, b []byte) entry[T] {
			r := Reader(b)
			read := r.Int()
			return entry[T]{v: o.Read(key, r), read: read}
		},
		// A copy is gone from the memory once it could not be served any
		// more: when it expires, or MaxAge after its read while untracked.
		Until: func(e entry[T]) time.Time {
			end := o.Expires(e.v)
			if aged := timeOf(e.read + int64(o.MaxAge)); !l.Tracked() && aged.Before(end) {
				end = aged
			}
			return end
		},
	})
	return l
}

// now is the layer's clock as an instant.
func (l *Layer[T]) now() int64 { return instant(l.o.Now()) }

// Run keeps the layer correct until ctx ends, and returns once every loop
// it started has: the channel's subscription, the store's reports of
// changed keys (on a kv.Tracker) and, in a group, the lease's renewal
// and the acknowledgements it sends (none is sent after Run returns).
// While the subscription is down the layer is cleared and not live;
// whenever the tracking goes down or up it is cleared and untracked until
// the next confirmation.
func (l *Layer[T]) Run(ctx context.Context) {
	var wg sync.WaitGroup
	if l.o.Members != nil {
		wg.Go(func() { l.renew(ctx) })
	}
	if t, ok := l.store.(kv.Tracker); ok {
		wg.Go(func() {
			// at is a canary's write on the real clock: its age, real, is
			// taken off this layer's clock.
			confirmed := func(at time.Time) { l.tracking.confirmed(l.now() - int64(time.Since(at))) }
			if err := t.Track(ctx, []string{l.o.Prefix}, l.onChange, l.onTracking, confirmed); err != nil {
				l.o.Logger.Info(l.o.What+" keys are not tracked; local copies are re-read from the store", slog.String("reason", err.Error()))
			}
		})
	}
	l.store.Subscribe(ctx, l.o.Channel, l.onMessage, l.onSubscription)
	l.live.Store(false)
	l.acking.stop()
	wg.Wait()
}

// onSubscription clears the layer whenever the channel's subscription
// goes down or up (a message may have been missed), and makes it live
// only while it is up.
func (l *Layer[T]) onSubscription(up bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.versions.bumpAll(forgetStep)
	clear(l.own)
	l.live.Store(false)
	l.local.Clear()
	l.live.Store(up)
}

// onChange forgets the copy of a changed store key ("": all).
func (l *Layer[T]) onChange(storeKey string) {
	if storeKey == "" {
		l.ForgetAll()
		return
	}
	k, ok := l.o.LocalKey(storeKey)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.versions.bump(k, 1)
	if w, ok := l.own[k]; ok {
		delete(l.own, k)
		if l.versions.of(k) == w.expect {
			l.local.Put(k, w.e)
			return
		}
	}
	l.local.Forget(k)
}

// onTracking clears the layer whenever tracking goes down or up (a copy
// kept meanwhile may be stale) and waits for the next confirmation.
func (l *Layer[T]) onTracking(bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.versions.bumpAll(forgetStep)
	clear(l.own)
	l.tracking.reset()
	l.local.Clear()
}

// Live reports whether the channel's subscription is up: only then is a
// copy served.
func (l *Layer[T]) Live() bool { return l.live.Load() }

// Tracked reports whether the store reports every change of the keys and
// confirmed it within kv.LeaseFor on the layer's clock: a copy may then be
// served until it is reported changed (or expires), not just for MaxAge.
func (l *Layer[T]) Tracked() bool { return l.tracking.fresh(l.now()) }

// A Read is what a reader notes before it reads the store (BeginRead):
// the key's version, so that what it read is kept only if the key did not
// change meanwhile, and the instant, from which the copy's age counts.
type Read struct {
	version uint64
	at      int64
}

// BeginRead is taken before a read of key from the store, and handed to
// Keep or KeepOwnWrite with what was read.
func (l *Layer[T]) BeginRead(key string) Read {
	return Read{version: l.versions.of(key), at: l.now()}
}

// Keep keeps v as key's copy, unless the layer is not live or key changed
// or was forgotten since r began: what was read could be of a key changed
// or ended meanwhile.
func (l *Layer[T]) Keep(key string, v T, r Read) {
	if !l.live.Load() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.live.Load() && l.versions.of(key) == r.version {
		l.local.Put(key, entry[T]{v: v, read: r.at})
	}
}

// KeepOwnWrite is Keep for a copy the caller has just written to the
// store itself (a session's idle write-back, a minted token), when the
// keys are tracked. The store reports every write to every instance, the
// writer's own included, without saying whose it was: Keep's copy would
// be forgotten at the writer's own report, and the next request would read
// back what this instance wrote. Here the copy is kept now (as Keep
// would), and again when the first report of the key after r arrives, if
// it is the only change counted since r (or at once, if that report came
// first). A report alone may be another instance's write coalesced with
// this one, so every end that matters is also announced on the channel,
// whose message forgets the copy and cancels a pending own write whenever
// it arrives (docs/operations.md, "Key tracking"). Untracked, it is Keep.
func (l *Layer[T]) KeepOwnWrite(key string, v T, r Read) {
	if !l.Tracked() {
		l.Keep(key, v, r)
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
	e := entry[T]{v: v, read: r.at}
	switch l.versions.of(key) - r.version {
	case 0: // the report is still to come: kept now, as Keep would, and again when it comes
		l.local.Put(key, e)
		if len(l.own) < maxOwnWrites {
			l.own[key] = ownWrite[T]{e: e, expect: r.version + 1}
		}
	case 1: // one report came, and nothing else: this write's or an earlier one's
		l.local.Put(key, e)
	}
}

// Forget removes key's copy and counts a change of it: a read in flight
// keeps nothing it read before, and an own write awaiting its report is
// not kept. The shared store is not touched.
func (l *Layer[T]) Forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.versions.bump(key, forgetStep)
	delete(l.own, key)
	l.local.Forget(key)
	l.forgets.Add(1)
}

// ForgetAll is Forget for every key.
func (l *Layer[T]) ForgetAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.versions.bumpAll(forgetStep)
	clear(l.own)
	l.local.Clear()
	l.forgets.Add(1)
}

// Len is the number of copies held (those past their time count until
// found).
func (l *Layer[T]) Len() int { return l.local.Len() }

// Bytes is the memory the copies take, which MaxBytes bounds.
func (l *Layer[T]) Bytes() int64 { return l.local.Bytes() }
