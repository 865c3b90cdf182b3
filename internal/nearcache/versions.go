package nearcache

import (
	"hash/maphash"
	"sync/atomic"
)

// versions counts the changes of keys, so that a reader can tell whether
// the key it read changed while it was reading: it notes of its key before
// the read (BeginRead) and keeps what it read only if of is the same
// after, under the lock that the changes also take (Keep). The count is
// per shard of keys, not per key: a change of another key in the same
// shard is taken for a change of this one (a needless re-read, never a
// stale copy), and with 16,384 shards (128 KiB) that is rare, where a
// single count would refuse every read that overlapped any write. It was
// 1,024: with 100,000 sessions written back within seconds of each other
// (a quiet spell's end), 8% of the write-backs saw another key's report in
// their shard within their own round trip, and were read back once more
// (make bench -pause). Safe for concurrent use; the zero value is ready.
type versions struct {
	all    atomic.Uint64
	shards [1 << 14]atomic.Uint64
}

var versionSeed = maphash.MakeSeed()

func (v *versions) shard(key string) *atomic.Uint64 {
	return &v.shards[maphash.String(versionSeed, key)%uint64(len(v.shards))]
}

// of is the version of key: it grows with every bump of key (or of a key
// in its shard) and every bumpAll.
func (v *versions) of(key string) uint64 { return v.all.Load() + v.shard(key).Load() }

// bump records a change of key that counts n: a caller tells kinds of
// change apart by the difference of two versions (KeepOwnWrite).
func (v *versions) bump(key string, n uint64) { v.shard(key).Add(n) }

// bumpAll records a change of every key that counts n (a clear, the
// tracking lost).
func (v *versions) bumpAll(n uint64) { v.all.Add(n) }
