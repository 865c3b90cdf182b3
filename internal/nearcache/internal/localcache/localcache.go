// Package localcache is the memory of nearcache's local copies: a cache
// bounded in bytes, with a deadline per entry, that does not push returning
// users out for users seen once (a login storm, a crawler), and that holds
// no pointer per entry. Only nearcache uses it (it is internal to it):
// what a copy is, when it may be served and when it is forgotten are
// nearcache's; this package only keeps bytes.
//
// The last property is why it is our own code. With 100,000 users an instance holds
// about 200,000 entries; kept as heap objects (otter's nodes, which this
// package wrapped before), every garbage collection marked them all, and
// its long mark phases were the p99 cost that remained at that scale. Here
// the entries are records in byte rings (16 KiB chunks, allocated as the
// cache fills) and the index is a map[uint64]uint64: neither holds a
// pointer, so the collector skips both. The Go libraries built that way
// (freecache, fastcache, bigcache) lack what the layers need: freecache
// allocates its whole bound up front (which the collector's heap goal
// counts), fastcache has no deadlines nor admission, bigcache one lifetime
// for all entries.
//
// The evidence, kept as BenchmarkAgainstOtter (otter_bench_test.go; run
// `go test -run '^$' -bench Otter -count=2 ./internal/nearcache/internal/localcache`, about
// 30 s, and compare after a Go upgrade). With 200,000 session-sized
// entries, on Go 1.26.8 on 2 vCPUs: localcache adds 56 MiB of heap in
// 3,800 objects of which 0.4 MiB is scanned, otter 89 MiB in 1.2 million
// objects, 32 MiB scanned. A forced collection with the cache full takes
// 1.2-1.6 ms (0.8 ms of mark CPU) against otter's 25-27 ms (41-46 ms).
// otter's Get is faster on its own: 350 ns against 600-690 per op from
// both cores, and under allocation pressure a p99 of 1.6 µs against 3.2-3.5
// (p999 6 µs against 55-61), as ours locks a shard and copies the value
// out. But the requests around those Gets (8 KiB and 16 small objects
// each) have a p99 of 16 µs here against 74-86 µs with otter, whose
// marking takes 41% of the CPU against our 3.5%. Set: 650-835 ns against
// 785-855. If a Go release makes marking 1.2 million objects cheap, these
// figures will show it and otter (or another library) can come back.
//
// Eviction is S3-FIFO (Yang et al., SOSP 2023): a new entry enters a small
// queue (a tenth of the bytes); leaving it, an entry read meanwhile moves
// to the main queue and one not read is evicted, its key's hash kept in a
// ghost filter so that its next Put goes to the main queue; the main
// queue gives each entry read since its last pass another one (up to
// three). Entries are keyed by the string the shared store names them by
// (a session's handle, a token's store key), so an invalidation reported
// by Redis forgets exactly one entry without a second index.
//
// Words: Forget is a caller removing an entry (its key changed); evicting
// is the cache making room. Neither touches the shared store.
package localcache

import (
	"encoding/binary"
	"hash/maphash"
	"math"
	"math/bits"
	"sync"
	"time"
)

// EntryOverhead is what an entry costs besides its key's and its value's
// bytes: its record's header (24 bytes) and its slot in the index
// (about 30). The layers' TestBytesPerCached* tests
// (nearcachetest.BytesPerEntry) hold the sum to the measured heap.
const EntryOverhead = hdrSize + indexBytes

// MaxEntry is the largest record (header, key and value) the cache keeps;
// Put of a larger one only forgets what the key held.
const MaxEntry = 64 << 10

// Options configures a Cache.
type Options[V any] struct {
	// MaxBytes bounds the memory of the entries; 0 turns the cache off
	// (every Get misses, Put keeps nothing).
	MaxBytes int64
	// Append appends v's encoding to b; the cache keeps those bytes, not
	// v (AppendInt and AppendString write, a Reader reads).
	Append func(b []byte, v V) []byte
	// Read decodes what Append wrote for the entry under key. b is the
	// cache's memory, valid only during the call: Read must copy what it
	// keeps (Reader's String does).
	Read func(key string, b []byte) V
	// Until is when an entry must be gone; Get misses from then on (the
	// callers still check their own deadlines, which may be earlier).
	Until func(v V) time.Time
	// Now is the clock Until is measured on; time.Now when nil.
	Now func() time.Time
}

// Cache maps a store key to a value. Safe for concurrent use.
type Cache[V any] struct {
	shards []shard // nil when off
	seed   maphash.Seed
	bufs   sync.Pool // *[]byte: encodings in the making
	o      Options[V]
}

// New returns an empty cache.
func New[V any](o Options[V]) *Cache[V] {
	if o.MaxBytes <= 0 {
		return &Cache[V]{}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	// Shards of at least 1 MiB (a queue of 64 chunks), at most 16: enough
	// that two cores seldom meet on a lock.
	n := 1
	for n < 16 && o.MaxBytes/int64(2*n) >= 1<<20 {
		n *= 2
	}
	c := &Cache[V]{shards: make([]shard, n), seed: maphash.MakeSeed(), o: o}
	for i := range c.shards {
		c.shards[i].init(o.MaxBytes / int64(n))
	}
	c.bufs.New = func() any { b := make([]byte, 0, 512); return &b }
	return c
}

func (c *Cache[V]) shard(h uint64) *shard {
	return &c.shards[h&uint64(len(c.shards)-1)]
}

// Get returns the value under k.
func (c *Cache[V]) Get(k string) (V, bool) {
	if c.shards == nil {
		var zero V
		return zero, false
	}
	return c.GetAt(k, c.o.Now())
}

// GetAt is Get at now, a reading of the cache's clock the caller already
// took (a clock read is a tenth of a Get).
func (c *Cache[V]) GetAt(k string, nowT time.Time) (V, bool) {
	var zero V
	if c.shards == nil {
		return zero, false
	}
	h := hashOf(c.seed, k)
	now := mono(nowT)
	s := c.shard(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	q, pos, ok := s.lookup(h)
	if !ok {
		return zero, false
	}
	r := &s.rings[q]
	hd := r.header(pos, &s.hdr)
	rec := r.view(pos, hd.size(), &s.scratch)
	key := rec[hdrSize : hdrSize+int(hd.klen)]
	if string(key) != k {
		return zero, false // another key with the same hash
	}
	if hd.until <= now {
		delete(s.index, h)
		return zero, false
	}
	if hd.freq < maxFreq {
		r.setFreq(pos, hd.freq+1)
	}
	return c.o.Read(k, rec[hdrSize+int(hd.klen):hdrSize+int(hd.klen)+int(hd.vlen)]), true
}

// Put stores v under k, replacing what was there.
func (c *Cache[V]) Put(k string, v V) {
	if c.shards == nil {
		return
	}
	h := hashOf(c.seed, k)
	bp := c.bufs.Get().(*[]byte)
	defer c.bufs.Put(bp)
	rec := append((*bp)[:0], make([]byte, hdrSize)...)
	rec = append(rec, k...)
	rec = c.o.Append(rec, v)
	*bp = rec
	// The deadline is kept as the time left from now, on now's clock: a
	// Unix deadline (a token's expiry) is then not moved by a step of the
	// wall clock since the process started.
	nowT := c.o.Now()
	now := mono(nowT)
	until := now + min(int64(c.o.Until(v).Sub(nowT)), math.MaxInt64-max(now, 0))
	hd := header{hash: h, until: until, klen: uint16(len(k)), vlen: uint32(len(rec) - hdrSize - len(k))}
	tooBig := len(k) > 0xffff || len(rec) > MaxEntry

	s := c.shard(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _, had := s.lookup(h)
	delete(s.index, h)
	if tooBig || hd.until <= now {
		return
	}
	hd.put(rec)
	// A key put again (a refresh, a touch) is in use; a key evicted from
	// the small queue lately came back: both go to the main queue.
	q := small
	if had || s.ghost.has(h) {
		q = main
	}
	s.push(q, h, rec, true, now)
}

// Forget removes the entry under k. Its key is in use (a change of it is
// what makes a caller forget an entry), so the ghost filter remembers it:
// the copy put next goes to the main queue, as a replaced one does.
func (c *Cache[V]) Forget(k string) {
	if c.shards == nil {
		return
	}
	h := hashOf(c.seed, k)
	s := c.shard(h)
	s.mu.Lock()
	if _, ok := s.index[h]; ok {
		delete(s.index, h)
		s.ghost.add(h)
	}
	s.mu.Unlock()
}

// Clear removes every entry. The memory stays with the cache, for the
// entries to come.
func (c *Cache[V]) Clear() {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		clear(s.index)
		for q := range s.rings {
			s.rings[q].reset()
		}
		s.ghost.reset()
		s.mu.Unlock()
	}
}

// Len is the number of entries (entries past their deadline count until
// a Get or the eviction finds them).
func (c *Cache[V]) Len() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += len(s.index)
		s.mu.Unlock()
	}
	return n
}

// Bytes is the memory the entries take, which MaxBytes bounds: the
// queues' records (including those forgotten or evicted but not yet reclaimed) and the
// index.
func (c *Cache[V]) Bytes() int64 {
	var n int64
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += s.used()
		s.mu.Unlock()
	}
	return n
}

// The queues of a shard.
const (
	small = 0
	main  = 1
)

const (
	chunkSize  = 16 << 10
	hdrSize    = 24
	indexBytes = 30 // a map[uint64]uint64 entry: 16 bytes and a control byte per slot, at 7/16 to 7/8 full
	maxFreq    = 3
	mainBit    = 1 << 63
)

// shard is one lock's share of the cache. The index maps a key's hash to
// the queue and log position of its record; a record whose position the
// index does not hold is dead (forgotten, evicted or replaced) and its bytes are
// reclaimed when its queue's tail passes it.
type shard struct {
	mu      sync.Mutex
	index   map[uint64]uint64
	rings   [2]ring
	free    [][]byte // chunks the rings' tails left, for their heads
	ghost   ghost
	budget  int64
	hdr     [hdrSize]byte
	scratch []byte // Get's and evictMain's copy of a record
	moving  []byte // evictSmall's copy of the record it moves
}

func (s *shard) init(budget int64) {
	s.budget = budget
	s.index = map[uint64]uint64{}
	chunks := func(b int64) int { return int(max(1, (b+chunkSize-1)/chunkSize)) }
	for q := range s.rings {
		s.rings[q].chunks, s.rings[q].pool = make([][]byte, chunks(budget)), &s.free
	}
	s.ghost.init(max(64, int(budget/256)))
}

func (s *shard) used() int64 {
	return int64(s.rings[small].used()+s.rings[main].used()) + int64(len(s.index))*indexBytes
}

func (s *shard) lookup(h uint64) (q int, pos uint64, ok bool) {
	e, ok := s.index[h]
	if !ok {
		return 0, 0, false
	}
	if e&mainBit != 0 {
		return main, e &^ mainBit, true
	}
	return small, e, true
}

func (s *shard) live(q int, h, pos uint64) bool {
	lq, lpos, ok := s.lookup(h)
	return ok && lq == q && lpos == pos
}

// push appends rec (its header filled in) to queue q and indexes it,
// evicting until it fits the queue and, when budget is set, the shard's
// bytes. It reports whether it did (a record larger than the queue does
// not fit).
func (s *shard) push(q int, h uint64, rec []byte, budget bool, now int64) bool {
	r := &s.rings[q]
	need := int64(len(rec)) + indexBytes
	if uint64(len(rec)) > r.capacity() || need > s.budget {
		return false // it never fits: evict nothing for it
	}
	// Nothing goes until the shard is full; then the small queue gives
	// up its bytes while it holds more than a tenth of them, else the
	// main queue does. (A move from the small queue to the main one
	// needs no room: the ring is as large as the budget, and the bytes
	// moved were counted already.)
	for !r.fits(len(rec)) || budget && s.used()+need > s.budget {
		var ok bool
		if int64(s.rings[small].used()) > s.budget/10 {
			ok = s.evictSmall(now) || s.evictMain(now)
		} else {
			ok = s.evictMain(now) || s.evictSmall(now)
		}
		if !ok {
			return false
		}
	}
	pos := r.push(rec)
	if q == main {
		pos |= mainBit
	}
	s.index[h] = pos
	return true
}

// front is the record at queue q's tail (nil r when the queue is empty)
// and whether the index still holds it.
func (s *shard) front(q int) (r *ring, pos uint64, hd header, live bool) {
	r = &s.rings[q]
	if r.empty() {
		return nil, 0, header{}, false
	}
	pos = r.tail
	hd = r.header(pos, &s.hdr)
	return r, pos, hd, s.live(q, hd.hash, pos)
}

// evictSmall takes the record at the small queue's tail: read while
// there, it moves to the main queue; else it is evicted, its hash kept in
// the ghost filter. It reports false when the queue is empty.
func (s *shard) evictSmall(now int64) bool {
	r, pos, hd, live := s.front(small)
	if r == nil {
		return false
	}
	size := hd.size()
	if live {
		delete(s.index, hd.hash)
		if hd.freq > 0 && hd.until > now {
			rec := r.copyOut(pos, size, &s.moving)
			r.advance(size)
			rec[freqAt] = 0
			s.push(main, hd.hash, rec, false, now)
			return true
		}
		s.ghost.add(hd.hash)
	}
	r.advance(size)
	return true
}

// evictMain takes the record at the main queue's tail: read since its
// last pass, it goes back to the head with one read less; else it is
// evicted. It reports false when the queue is empty.
func (s *shard) evictMain(now int64) bool {
	r, pos, hd, live := s.front(main)
	if r == nil {
		return false
	}
	size := hd.size()
	if live {
		if hd.freq > 0 && hd.until > now {
			// Its own bytes make the room: the ring is a ring of bytes,
			// so a record the tail frees fits at the head.
			rec := r.copyOut(pos, size, &s.scratch)
			r.advance(size)
			rec[freqAt] = hd.freq - 1
			s.index[hd.hash] = r.push(rec) | mainBit
			return true
		}
		delete(s.index, hd.hash)
	}
	r.advance(size)
	return true
}

// header is a record's first hdrSize bytes: the key's hash, the deadline
// (mono), the value's and the key's lengths and the reads counted.
type header struct {
	hash  uint64
	until int64
	vlen  uint32
	klen  uint16
	freq  uint8
}

const freqAt = 22

func (h header) size() int { return hdrSize + int(h.klen) + int(h.vlen) }

func (h header) put(b []byte) {
	binary.LittleEndian.PutUint64(b[0:], h.hash)
	binary.LittleEndian.PutUint64(b[8:], uint64(h.until))
	binary.LittleEndian.PutUint32(b[16:], h.vlen)
	binary.LittleEndian.PutUint16(b[20:], h.klen)
	b[freqAt] = h.freq
	b[23] = 0
}

func readHeader(b []byte) header {
	return header{hash: binary.LittleEndian.Uint64(b[0:]), until: int64(binary.LittleEndian.Uint64(b[8:])),
		vlen: binary.LittleEndian.Uint32(b[16:]), klen: binary.LittleEndian.Uint16(b[20:]), freq: b[freqAt]}
}

// ring is a FIFO queue of records in a ring of bytes, cut into chunks.
// head and tail are log positions: they only grow, and a position's byte
// is at pos modulo the ring's capacity. A record may straddle two chunks.
// A ring holds chunks only where it holds bytes: it takes them from its
// shard's pool as its head reaches them and gives them back as its tail
// leaves them, so that either queue can use what the other does not (a
// cold cache fills its small queue past a tenth of the bytes) while the
// two together hold no more chunks than their bytes need.
type ring struct {
	chunks     [][]byte
	pool       *[][]byte
	head, tail uint64
}

func (r *ring) capacity() uint64 { return uint64(len(r.chunks)) * chunkSize }
func (r *ring) used() uint64     { return r.head - r.tail }
func (r *ring) empty() bool      { return r.head == r.tail }
func (r *ring) fits(n int) bool  { return r.used()+uint64(n) <= r.capacity() }

// chunk returns the bytes from pos to the end of its chunk.
func (r *ring) chunk(pos uint64) []byte {
	i := (pos / chunkSize) % uint64(len(r.chunks))
	if r.chunks[i] == nil {
		if p := *r.pool; len(p) > 0 {
			r.chunks[i], *r.pool = p[len(p)-1], p[:len(p)-1]
		} else {
			r.chunks[i] = make([]byte, chunkSize)
		}
	}
	return r.chunks[i][pos%chunkSize:]
}

// advance moves the tail past n bytes, giving back the chunks it leaves
// that hold no byte between the tail and the head.
func (r *ring) advance(n int) {
	from := r.tail / chunkSize
	r.tail += uint64(n)
	last := (r.head - 1) / chunkSize // the head's chunk, when not empty
	for c := from; c < r.tail/chunkSize; c++ {
		// c is left; its slot is in use again only if the bytes in use
		// reach a chunk c+k·len(chunks) (a ring nearly full).
		if r.empty() || last < c+uint64(len(r.chunks)) {
			r.release(c % uint64(len(r.chunks)))
		}
	}
	if r.empty() {
		r.release((r.tail / chunkSize) % uint64(len(r.chunks)))
	}
}

func (r *ring) release(i uint64) {
	if r.chunks[i] != nil {
		*r.pool = append(*r.pool, r.chunks[i])
		r.chunks[i] = nil
	}
}

// reset empties the ring and gives back its chunks.
func (r *ring) reset() {
	for i := range r.chunks {
		r.release(uint64(i))
	}
	r.head, r.tail = 0, 0
}

// push appends rec at the head and returns its position.
func (r *ring) push(rec []byte) uint64 {
	pos := r.head
	for b := rec; len(b) > 0; {
		n := copy(r.chunk(r.head), b)
		b, r.head = b[n:], r.head+uint64(n)
	}
	return pos
}

// view returns the n bytes at pos: the ring's own when they are in one
// chunk, else a copy in *buf.
func (r *ring) view(pos uint64, n int, buf *[]byte) []byte {
	if b := r.chunk(pos); len(b) >= n {
		return b[:n]
	}
	return r.copyOut(pos, n, buf)
}

// copyOut copies the n bytes at pos into *buf.
func (r *ring) copyOut(pos uint64, n int, buf *[]byte) []byte {
	if cap(*buf) < n {
		*buf = make([]byte, n, max(n, 2*cap(*buf)))
	}
	out := (*buf)[:n]
	for b := out; len(b) > 0; {
		k := copy(b, r.chunk(pos))
		b, pos = b[k:], pos+uint64(k)
	}
	return out
}

func (r *ring) header(pos uint64, buf *[hdrSize]byte) header {
	if b := r.chunk(pos); len(b) >= hdrSize {
		return readHeader(b)
	}
	s := buf[:0:hdrSize]
	return readHeader(r.copyOut(pos, hdrSize, &s))
}

func (r *ring) setFreq(pos uint64, f uint8) { r.chunk(pos + freqAt)[0] = f }

// ghost remembers the hashes of the keys the small queue evicted lately:
// two Bloom filters of n keys each, the older cleared when the newer is
// full, so it remembers the last n to 2n (and errs, rarely, towards
// "seen", which only sends a new key to the main queue).
type ghost struct {
	cur, old []uint64 // bits
	n, count int
}

func (g *ghost) init(n int) {
	words := (n*10 + 63) / 64
	g.cur, g.old, g.n = make([]uint64, words), make([]uint64, words), n
}

func (g *ghost) reset() {
	clear(g.cur)
	clear(g.old)
	g.count = 0
}

// probes are the filter's 3 bits for h (double hashing).
func (g *ghost) probes(h uint64) [3]uint64 {
	m := uint64(len(g.cur)) * 64
	h2 := bits.RotateLeft64(h, 32) | 1
	return [3]uint64{h % m, (h + h2) % m, (h + 2*h2) % m}
}

func (g *ghost) add(h uint64) {
	if g.count >= g.n {
		g.cur, g.old = g.old, g.cur
		clear(g.cur)
		g.count = 0
	}
	for _, p := range g.probes(h) {
		g.cur[p/64] |= 1 << (p % 64)
	}
	g.count++
}

func (g *ghost) has(h uint64) bool {
	in := func(f []uint64) bool {
		for _, p := range g.probes(h) {
			if f[p/64]&(1<<(p%64)) == 0 {
				return false
			}
		}
		return true
	}
	return in(g.cur) || in(g.old)
}

// hashOf is the hash that indexes a key: a variable, so that a test can
// make keys collide.
var hashOf = maphash.String

// epoch is the origin of mono.
var epoch = time.Now()

// mono is t as nanoseconds since this process started, on the monotonic
// clock when t has a reading of it (time.Now's do): a deadline kept as an
// int64 this way is not stretched by a step of the wall clock, as
// UnixNano would be. Times without one (a test's clock, a time read from
// the store) count on the wall clock, as comparing them does.
func mono(t time.Time) int64 { return int64(t.Sub(epoch)) }
