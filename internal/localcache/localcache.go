// Package localcache is the in-process layer the BFF keeps in front of
// Redis for sessions and tokens. It is a thin, typed face on otter
// (github.com/maypok86/otter/v2): W-TinyLFU admission, so a scan of users
// seen once (a login storm, a crawler) does not push out the users who come
// back; a bound in bytes rather than in entries, with the weight of each
// entry estimated from its strings; and a deadline per entry, expired by a
// timer wheel, so nothing walks the whole cache under a lock.
//
// Entries are keyed by the same string the shared store names them by (a
// session's handle, a token's store key), so an invalidation reported by
// Redis drops exactly one entry without a second index.
package localcache

import (
	"hash/maphash"
	"sync/atomic"
	"time"

	"github.com/maypok86/otter/v2"
)

// EntryOverhead is what an entry costs besides its key's bytes and its
// value (which the callers' Weigh estimates): otter's node (the key's and
// the value's headers, the links of the eviction and expiry policies, the
// deadline, the weight) and its slot in the hash table. The layers'
// TestBytesPerCached* tests (localcachetest.BytesPerEntry) hold the sum to
// the measured heap.
const EntryOverhead = 160

// Options configures a Cache.
type Options[V any] struct {
	// MaxBytes bounds the estimated memory of the entries; 0 turns the
	// cache off (every Get misses, Put keeps nothing).
	MaxBytes int64
	// Weigh estimates an entry's bytes besides EntryOverhead and its key.
	Weigh func(v V) int
	// Until is when an entry must be gone; the cache drops it then (the
	// callers still check their own deadlines on every read: this only
	// frees the memory).
	Until func(v V) time.Time
	// Now is the clock Until is measured on; time.Now when nil.
	Now func() time.Time
}

// Cache maps a store key to a value. Safe for concurrent use.
type Cache[V any] struct {
	c *otter.Cache[string, V] // nil when off
}

// New returns an empty cache.
func New[V any](o Options[V]) *Cache[V] {
	if o.MaxBytes <= 0 {
		return &Cache[V]{}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	weigh, until, now := o.Weigh, o.Until, o.Now
	c := otter.Must(&otter.Options[string, V]{
		MaximumWeight: uint64(o.MaxBytes),
		Weigher: func(k string, v V) uint32 {
			return uint32(min(EntryOverhead+len(k)+weigh(v), 1<<31))
		},
		ExpiryCalculator: otter.ExpiryWritingFunc(func(e otter.Entry[string, V]) time.Duration {
			return max(until(e.Value).Sub(now()), time.Nanosecond)
		}),
	})
	return &Cache[V]{c: c}
}

// Get returns the value under k.
func (c *Cache[V]) Get(k string) (V, bool) {
	if c.c == nil {
		var zero V
		return zero, false
	}
	return c.c.GetIfPresent(k)
}

// Put stores v under k, replacing what was there.
func (c *Cache[V]) Put(k string, v V) {
	if c.c != nil {
		c.c.Set(k, v)
	}
}

// Drop removes the entry under k.
func (c *Cache[V]) Drop(k string) {
	if c.c != nil {
		c.c.Invalidate(k)
	}
}

// Clear removes every entry.
func (c *Cache[V]) Clear() {
	if c.c != nil {
		c.c.InvalidateAll()
	}
}

// Len is the number of entries (an estimate while expired entries await
// their clean-up).
func (c *Cache[V]) Len() int {
	if c.c == nil {
		return 0
	}
	return c.c.EstimatedSize()
}

// Bytes is the estimated memory of the entries.
func (c *Cache[V]) Bytes() int64 {
	if c.c == nil {
		return 0
	}
	return int64(c.c.WeightedSize())
}

// Versions counts the reported changes of store keys, so that a reader can
// tell whether the key it read changed while it was reading: it notes Of
// its key before the read and keeps what it read only if Of is the same
// after (under the lock its drops also take). The count is per shard of
// keys, not per key: a change of another key in the same shard is taken
// for a change of this one (a needless re-read, never a stale copy), and
// with 1,024 shards that is rare, where a single count would refuse every
// read that overlapped any write.
type Versions struct {
	all    atomic.Uint64
	shards [1024]atomic.Uint64
}

var versionSeed = maphash.MakeSeed()

func (v *Versions) shard(key string) *atomic.Uint64 {
	return &v.shards[maphash.String(versionSeed, key)%uint64(len(v.shards))]
}

// Of is the version of key: it grows with every Bump of key (or of a key
// in its shard) and every BumpAll.
func (v *Versions) Of(key string) uint64 { return v.all.Load() + v.shard(key).Load() }

// Bump records a change of key.
func (v *Versions) Bump(key string) { v.shard(key).Add(1) }

// BumpAll records a change of every key (a flush, tracking lost).
func (v *Versions) BumpAll() { v.all.Add(1) }

// epoch is the origin of Mono.
var epoch = time.Now()

// Mono is t as nanoseconds since this process started, on the monotonic
// clock when t has a reading of it (time.Now's do): an entry's age kept as
// an int64 this way is not stretched by a step of the wall clock, as
// UnixNano would be. Times without one (a test's clock, a time read from
// the store) count on the wall clock, as comparing them did.
func Mono(t time.Time) int64 { return int64(t.Sub(epoch)) }

// FromMono is the time Mono(t) came from (with a monotonic reading).
func FromMono(ns int64) time.Time { return epoch.Add(time.Duration(ns)) }
