package localcache

import (
	"fmt"
	"hash/fnv"
	"hash/maphash"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

type rv struct {
	s     string
	until time.Time
}

func newRV(maxBytes int64, now func() time.Time) *Cache[rv] {
	return New(Options[rv]{
		MaxBytes: maxBytes,
		Append: func(b []byte, v rv) []byte {
			return AppendInt(AppendString(b, v.s), v.until.UnixNano())
		},
		Read: func(_ string, b []byte) rv {
			r := Reader(b)
			s := r.String()
			return rv{s, time.Unix(0, r.Int())}
		},
		Until: func(v rv) time.Time { return v.until },
		Now:   now,
	})
}

func fnvHash(k string) uint64 { h := fnv.New64a(); h.Write([]byte(k)); return h.Sum64() }

var hashModes = map[string]func(maphash.Seed, string) uint64{
	"real": func(seed maphash.Seed, k string) uint64 { return maphash.String(seed, k) },
	// 16 hashes, spread over shard bits too
	"collide16": func(_ maphash.Seed, k string) uint64 { x := fnvHash(k) % 16; return x*0x9E3779B97F4A7C15 ^ x },
	"one":       func(_ maphash.Seed, k string) uint64 { return 0xdeadbeef },
}

// checkShard walks every ring and checks the index against it, the bytes
// against the budget, and the chunks held against the bytes.
func checkShard(t *testing.T, s *shard, where string) {
	t.Helper()
	recs := [2]map[uint64]header{{}, {}}
	for q := range s.rings {
		r := &s.rings[q]
		if r.used() > r.capacity() {
			t.Fatalf("%s: ring %d used %d > cap %d", where, q, r.used(), r.capacity())
		}
		for pos := r.tail; pos < r.head; {
			hd := r.header(pos, &s.hdr)
			if hd.size() < hdrSize || hd.size() > MaxEntry || pos+uint64(hd.size()) > r.head {
				t.Fatalf("%s: ring %d bad record at %d: %+v (tail %d head %d)", where, q, pos, hd, r.tail, r.head)
			}
			recs[q][pos] = hd
			pos += uint64(hd.size())
		}
	}
	for h := range s.index {
		q, pos, _ := s.lookup(h)
		hd, ok := recs[q][pos]
		if !ok {
			t.Fatalf("%s: index %x -> q%d pos %d, no record there", where, h, q, pos)
		}
		if hd.hash != h {
			t.Fatalf("%s: index %x -> record with hash %x", where, h, hd.hash)
		}
	}
	if s.used() > s.budget {
		t.Fatalf("%s: used %d > budget %d", where, s.used(), s.budget)
	}
	for q := range s.rings {
		r := &s.rings[q]
		held := 0
		for _, c := range r.chunks {
			if c != nil {
				held++
			}
		}
		if need := int((r.used()+chunkSize-1)/chunkSize) + 1; held > need {
			t.Fatalf("%s: ring %d holds %d chunks for %d bytes", where, q, held, r.used())
		}
	}
}

func checkAll(t *testing.T, c *Cache[rv], where string) {
	t.Helper()
	for i := range c.shards {
		checkShard(t, &c.shards[i], where)
	}
}

type modelEntry struct {
	v     string
	until time.Time
	ok    bool
}

func valueOfSize(k string, i int, rng *rand.Rand) string {
	prefix := fmt.Sprintf("%s|%d|", k[:min(len(k), 20)], i)
	var n int
	switch rng.IntN(20) {
	case 0: // record near a chunk size
		n = 16384 - hdrSize - len(k) - 8 - 3 + rng.IntN(7) - 3
	case 1: // record near MaxEntry
		n = MaxEntry - hdrSize - len(k) - 8 - 3 + rng.IntN(5) - 2
	case 2:
		n = rng.IntN(70000)
	case 3:
		n = 16384*2 - hdrSize - len(k) - 8 - 3 + rng.IntN(7) - 3
	default:
		n = rng.IntN(400)
	}
	n = max(n, len(prefix))
	return prefix + strings.Repeat("v", n-len(prefix))
}

// A model of the cache (the last Put of each key, less the Forgets, the
// Clears and the deadlines passed) against the cache itself, for every
// hash (real; 16 hashes for all keys; one), shard budgets from 1 byte to
// 3 MiB, values about a chunk, two chunks and MaxEntry long, keys empty,
// long and too long, deadlines passed at the Put: a hit is the model's
// value, and every 50 steps the rings and the index are consistent.
func TestModel(t *testing.T) {
	defer func(f func(maphash.Seed, string) uint64) { hashOf = f }(hashOf)
	for mode, hf := range hashModes {
		for _, mb := range []int64{1, 20_000, 100_000, 300_000, 3 << 20} {
			for seed := range uint64(2) {
				t.Run(fmt.Sprintf("%s/%d/%d", mode, mb, seed), func(t *testing.T) {
					hashOf = hf
					clock := time.Unix(1_800_000_000, 0)
					now := func() time.Time { return clock }
					c := newRV(mb, now)
					rng := rand.New(rand.NewPCG(seed, uint64(mb)))
					keys := []string{"", strings.Repeat("L", 1000), strings.Repeat("X", 70000)}
					for i := range 60 {
						keys = append(keys, fmt.Sprintf("k%d", i))
					}
					model := map[string]modelEntry{}
					hits := 0
					steps := 20000
					if mb > 1<<20 {
						steps = 40000
					}
					for i := range steps {
						k := keys[rng.IntN(len(keys))]
						if rng.IntN(4) == 0 {
							k = keys[3+rng.IntN(8)] // a hot set
						}
						switch op := rng.IntN(100); {
						case op < 40:
							v := valueOfSize(k, i, rng)
							until := clock.Add(time.Duration(rng.IntN(100)) * time.Second)
							if rng.IntN(20) == 0 {
								until = clock.Add(-time.Second)
							}
							c.Put(k, rv{v, until})
							model[k] = modelEntry{v, until, true}
						case op < 47:
							c.Forget(k)
							model[k] = modelEntry{}
						case op < 48:
							if rng.IntN(10) == 0 {
								c.Clear()
								clear(model)
							}
						case op < 52:
							clock = clock.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
						default:
							got, ok := c.Get(k)
							if !ok {
								continue
							}
							hits++
							m := model[k]
							if !m.ok || got.s != m.v || !clock.Before(m.until) {
								t.Fatalf("step %d: Get(%.10q) = %.30q (until %v), model %+.30v now %v", i, k, got.s, got.until, m, clock)
							}
						}
						if i%50 == 0 {
							checkAll(t, c, fmt.Sprintf("step %d", i))
						}
						if c.Bytes() > mb {
							t.Fatalf("step %d: Bytes %d > %d", i, c.Bytes(), mb)
						}
					}
					checkAll(t, c, "end")
					if mb > 1 && hits == 0 {
						t.Fatal("no hit: the model was not exercised")
					}
				})
			}
		}
	}
}

func far() time.Time { return time.Now().Add(time.Hour) }

// A main queue full of entries read three times: Puts and promotions
// still end, and the shard stays consistent.
func TestMainAllReadThreeTimes(t *testing.T) {
	c := newRV(200_000, nil)
	s := &c.shards[0]
	// fill main via replacement (had -> main)
	i := 0
	for s.rings[small].used() > 0 || i < 10 || int64(s.rings[main].used()) < s.budget*8/10 {
		k := fmt.Sprintf("m%d", i)
		c.Put(k, rv{strings.Repeat("m", 500), far()})
		c.Put(k, rv{strings.Repeat("n", 500), far()})
		for range 4 {
			c.Get(k)
		}
		i++
		if i > 10000 {
			break
		}
	}
	checkAll(t, c, "filled")
	if c.Len() < 100 {
		t.Fatalf("only %d entries: the main queue was not filled", c.Len())
	}
	for j := range 2000 {
		k := fmt.Sprintf("x%d", j)
		c.Put(k, rv{strings.Repeat("x", 700), far()})
		c.Get(k)
		if j%7 == 0 {
			c.Put(k, rv{"again", far()})
		}
		checkAll(t, c, fmt.Sprintf("x%d", j))
	}
}

// Concurrent use with colliding hashes and Clears, for the race detector;
// the shards stay consistent.
func TestConcurrentCollisions(t *testing.T) {
	defer func(f func(maphash.Seed, string) uint64) { hashOf = f }(hashOf)
	hashOf = hashModes["collide16"]
	for _, mb := range []int64{20_000, 3 << 20} {
		c := newRV(mb, nil)
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(g), 9))
				for i := range 30_000 {
					k := fmt.Sprintf("k-%d", rng.IntN(200))
					switch rng.IntN(10) {
					case 0, 1, 2:
						n := rng.IntN(600)
						if rng.IntN(100) == 0 {
							n = 16000 + rng.IntN(1000)
						}
						c.Put(k, rv{k + "|" + strings.Repeat("x", n), far()})
					case 3:
						c.Forget(k)
					case 4:
						if i%1000 == 0 {
							c.Clear()
						}
					default:
						if v, ok := c.Get(k); ok && !strings.HasPrefix(v.s, k+"|") {
							t.Errorf("Get(%s) = %.20q", k, v.s)
							return
						}
					}
				}
			})
		}
		wg.Wait()
		checkAll(t, c, "end")
	}
}
