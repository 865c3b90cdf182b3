package localcache

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// fuzzKeys are the keys the fuzzer picks from: the empty key, short ones
// (a hot set, so that replacements and collisions happen), a long one, the
// longest a record can have (0xffff bytes, too large for MaxEntry) and one
// past it.
var fuzzKeys = func() []string {
	k := []string{"", "a", strings.Repeat("L", 1000), strings.Repeat("M", 0xffff), strings.Repeat("N", 0x10000)}
	for i := range 27 {
		k = append(k, fmt.Sprintf("k%d", i))
	}
	return k
}()

var fuzzPad = strings.Repeat("v", MaxEntry+16)

// fuzzSteps are the ways the clock moves.
var fuzzSteps = []time.Duration{0, 1, time.Millisecond, 999 * time.Millisecond, time.Second, 7 * time.Second, time.Minute, time.Hour, 10_000 * time.Hour}

// fuzzBudgets are the MaxBytes the seeds use; the fuzzer may pick any up
// to 5 MiB.
var fuzzBudgets = []uint32{0, 1, 100, 20_000, 100_000, 300_000, 3 << 20, 4<<20 + 17}

// valueLen is the length of a value whose record (header, key, the
// value's AppendString and the deadline's AppendInt, as newRV encodes)
// is rec bytes, or -1 when none is.
func valueLen(rec, klen int) int {
	for n := max(rec-hdrSize-klen-8-binary.MaxVarintLen64, 0); n <= rec; n++ {
		size := hdrSize + klen + len(binary.AppendUvarint(nil, uint64(n))) + n + 8
		if size == rec {
			return n
		}
		if size > rec {
			return -1
		}
	}
	return -1
}

// FuzzOps runs a sequence of operations, read from ops, on a cache of
// budget%5MiB bytes (several shards from 2 MiB up) with the hash mode%3
// picks (the real one, 16 hashes for all keys, one), against a model: a
// map of each key's last Put, less the Forgets, the Clears and the
// deadlines passed on a clock the sequence moves. Values run from empty
// through a chunk and MaxEntry to the shard's whole budget, deadlines
// from before the Put to the farthest time. It checks that
//   - a Get that hits returns exactly the key's last Put (its value and
//     deadline), which is neither forgotten, cleared nor past its deadline;
//   - a Put of a record that fits the shard, with a deadline ahead, is
//     read back at once (op 7);
//   - Bytes never exceeds MaxBytes, and Clear leaves no entry nor byte;
//   - the rings and the index stay consistent (checkAll), every 16 steps
//     and at the end;
//
// and, as any test does, that nothing panics.
//
// Each byte of ops is an operation, some followed by arguments:
// 0, 1 Put (key, size, deadline); 2, 6 Get (key); 3 Forget (key); 4 Clear;
// 5 the clock moves (step); 7 Put then Get (key, size, deadline).
func FuzzOps(f *testing.F) {
	for i, b := range fuzzBudgets {
		for mode := range uint8(3) {
			rng := rand.New(rand.NewPCG(uint64(i), uint64(mode)))
			ops := make([]byte, 400)
			for j := range ops {
				ops[j] = byte(rng.Uint32())
			}
			f.Add(b, mode, ops)
		}
	}
	// By hand: a Put read back, replaced, forgotten, expired; an empty key
	// and value; a record of the shard's whole budget and one byte more;
	// MaxEntry and one byte more; a Clear between.
	f.Add(uint32(20_000), uint8(0), []byte{
		7, 5, 2, 2, 3, // k0, session-sized, for a second, read back
		7, 5, 0, 2, 3, // k0 again, an empty value
		2, 5, 3, 5, 2, 5, // Get, Forget, Get
		7, 0, 0, 2, 3, // "" -> ""
		7, 5, 6, 2, 5, // k0 of the shard's whole budget
		7, 5, 6, 3, 5, // and of one byte more: refused, the older value gone
		2, 5,
		5, 4, 2, 0, // a second later "" has expired
		7, 6, 1, 2, 7, 30, // k1, for 3 s
		4, 2, 6, // Clear
	})
	f.Add(uint32(3<<20), uint8(1), []byte{
		7, 5, 5, 2, 5, // k0 of MaxEntry
		7, 6, 5, 3, 5, // k1 of MaxEntry + 1: refused
		7, 2, 3, 2, 5, // the 1,000-byte key, a record of a chunk
		7, 3, 1, 2, 5, // the 0xffff-byte key: too large
		7, 4, 1, 2, 5, // the 0x10000-byte key: too large
		0, 7, 4, 2, 5, // two chunks
		2, 7, 2, 5, 2, 2,
		5, 7, 2, 7, 2, 2, // an hour later: all gone
		0, 8, 7, 2, 6, // the cache's whole budget: refused
		0, 9, 8, 0x12, 0x34, 6, // a length picked by the input
		2, 9,
	})
	f.Add(uint32(100_000), uint8(2), []byte{
		0, 5, 2, 0, 5, 0, 6, 2, 1, 5, 0, 7, 2, 2, 5, 0, 8, 2, 3, 5, 0, 9, 2, 4, 5, // five keys of one hash
		2, 5, 2, 6, 2, 7, 2, 8, 2, 9,
		3, 9, 2, 9, 2, 8,
		5, 8, 2, 8, // 10,000 hours later
		4, 2, 8,
	})

	f.Fuzz(fuzzOps)
}

// fuzzOps is FuzzOps' run of one input.
func fuzzOps(t *testing.T, budget uint32, mode uint8, ops []byte) {
	defer func(h func(maphash.Seed, string) uint64) { hashOf = h }(hashOf)
	hashOf = []func(maphash.Seed, string) uint64{hashModes["real"], hashModes["collide16"], hashModes["one"]}[mode%3]
	maxBytes := int64(budget % (5 << 20))
	clock := time.Unix(1_800_000_000, 0) // no monotonic reading: the clock is ours
	c := newRV(maxBytes, func() time.Time { return clock })
	shardBudget := int64(0)
	if len(c.shards) > 0 {
		shardBudget = c.shards[0].budget
	}
	model := map[string]modelEntry{}

	next := func() int {
		if len(ops) == 0 {
			return 0
		}
		b := ops[0]
		ops = ops[1:]
		return int(b)
	}
	for step := 0; len(ops) > 0 && step < 1000; step++ {
		op := next() % 8
		switch op {
		case 0, 1, 7:
			k := fuzzKeys[next()%len(fuzzKeys)]
			// The value: its length, from the size class, and its
			// bytes, the step and the key first (so that two Puts
			// differ), cut to the length.
			var n int
			switch sz, d := next()%9, next()%5-2; sz {
			case 0:
				n = 0
			case 1:
				n = 1 + d + 2
			case 2:
				n = 150 + 10*(d+2) // a session's
			case 3:
				n = valueLen(chunkSize+d, len(k)) // a record of a chunk
			case 4:
				n = 2*chunkSize - 1000 + d
			case 5:
				n = valueLen(MaxEntry+d, len(k)) // about MaxEntry
			case 6:
				n = valueLen(int(shardBudget)-indexBytes+max(d, 0), len(k)) // the shard's whole budget, or more
			case 7:
				n = valueLen(int(maxBytes)+d, len(k)) // the whole budget
			case 8:
				n = (next()<<8 | next()) % (MaxEntry + 16)
			}
			// A record past MaxEntry is refused whatever its size: no
			// need to build a larger one (the budget may be 5 MiB).
			n = min(max(n, 0), MaxEntry+16)
			v := fmt.Sprintf("%d|%.8s|", step, k)
			v = (v + fuzzPad[:max(n-len(v), 0)])[:n]
			var until time.Time
			switch u := next() % 8; u {
			case 0:
				until = clock.Add(-time.Second)
			case 1:
				until = clock // gone at once
			case 2:
				until = clock.Add(1)
			case 3:
				until = clock.Add(time.Second)
			case 4:
				until = clock.Add(time.Minute)
			case 5:
				until = clock.Add(time.Hour)
			case 6:
				until = time.Unix(1<<62, 0) // the farthest
			case 7:
				until = clock.Add(time.Duration(next()) * 100 * time.Millisecond)
			}
			c.Put(k, rv{v, until})
			model[k] = modelEntry{v, until, true}
			rec := hdrSize + len(k) + len(binary.AppendUvarint(nil, uint64(len(v)))) + len(v) + 8
			if op == 7 && maxBytes > 0 && len(k) <= 0xffff && rec <= MaxEntry && int64(rec+indexBytes) <= shardBudget && clock.Before(until) {
				got, ok := c.Get(k)
				if !ok || got.s != v || got.until.UnixNano() != until.UnixNano() {
					t.Fatalf("step %d: Put(%.10q, %d bytes) then Get = %.30q, %v; want it back", step, k, len(v), got.s, ok)
				}
			}
		case 2, 6:
			k := fuzzKeys[next()%len(fuzzKeys)]
			got, ok := c.Get(k)
			if !ok {
				break
			}
			m := model[k]
			if maxBytes == 0 || !m.ok || got.s != m.v || got.until.UnixNano() != m.until.UnixNano() || !clock.Before(m.until) {
				t.Fatalf("step %d: Get(%.10q) = %.30q (until %v), want a miss or the last Put %+.30v (now %v)", step, k, got.s, got.until, m, clock)
			}
		case 3:
			k := fuzzKeys[next()%len(fuzzKeys)]
			c.Forget(k)
			model[k] = modelEntry{}
		case 4:
			c.Clear()
			clear(model)
			if c.Len() != 0 || c.Bytes() != 0 {
				t.Fatalf("step %d: after Clear %d entries, %d bytes", step, c.Len(), c.Bytes())
			}
		case 5:
			clock = clock.Add(fuzzSteps[next()%len(fuzzSteps)])
		}
		if b := c.Bytes(); b > maxBytes {
			t.Fatalf("step %d (op %d): %d bytes held, bound %d", step, op, b, maxBytes)
		}
		if step%16 == 0 {
			checkAll(t, c, fmt.Sprintf("step %d", step))
		}
	}
	checkAll(t, c, "end")
}
