package localcache_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/nearcache/internal/localcache"
	"github.com/fintech-bff/bff/internal/testing/testclock"
)

type val struct {
	s     string
	until time.Time
}

func newCache(maxBytes int64, now func() time.Time) *localcache.Cache[val] {
	return localcache.New(localcache.Options[val]{
		MaxBytes: maxBytes,
		Append: func(b []byte, v val) []byte {
			return localcache.AppendInt(localcache.AppendString(b, v.s), v.until.UnixNano())
		},
		Read: func(_ string, b []byte) val {
			r := localcache.Reader(b)
			s := r.String()
			return val{s, time.Unix(0, r.Int())}
		},
		Until: func(v val) time.Time { return v.until },
		Now:   now,
	})
}

func TestGetPutForgetClear(t *testing.T) {
	c := newCache(1<<20, nil)
	far := time.Now().Add(time.Hour)
	c.Put("a", val{"1", far})
	c.Put("b", val{"2", far})
	if v, ok := c.Get("a"); !ok || v.s != "1" {
		t.Fatalf("Get(a) = %v, %v; want 1", v, ok)
	}
	c.Put("a", val{"3", far})
	if v, _ := c.Get("a"); v.s != "3" {
		t.Fatalf("Get(a) after a second Put = %q, want 3", v.s)
	}
	c.Forget("a")
	if _, ok := c.Get("a"); ok {
		t.Fatal("Get(a) after Forget: found")
	}
	if _, ok := c.Get("b"); !ok {
		t.Fatal("Forget(a) forgot b")
	}
	c.Clear()
	if _, ok := c.Get("b"); ok || c.Len() != 0 {
		t.Fatalf("after Clear: b found %v, %d entries", ok, c.Len())
	}
}

func TestOffKeepsNothing(t *testing.T) {
	c := newCache(0, nil)
	c.Put("a", val{"1", time.Now().Add(time.Hour)})
	if _, ok := c.Get("a"); ok || c.Len() != 0 || c.Bytes() != 0 {
		t.Fatal("a cache of 0 bytes kept an entry")
	}
	c.Forget("a")
	c.Clear()
}

// An entry whose Until is as far as time goes is kept (its deadline must
// not overflow into the past).
func TestFarDeadlineKeeps(t *testing.T) {
	c := newCache(1<<20, nil)
	c.Put("k", val{"v", time.Unix(1<<62, 0)})
	if _, ok := c.Get("k"); !ok {
		t.Fatal("an entry with the farthest deadline was not kept")
	}
}

// An entry is served until its Until, not at it nor after, on the
// cache's clock (a test's, moved by the test: no sleep).
func TestEntryGoesAtItsDeadline(t *testing.T) {
	clk := testclock.New(time.Unix(1_700_000_000, 0))
	c := newCache(1<<20, clk.Now)
	c.Put("soon", val{"x", clk.Now().Add(50 * time.Millisecond)})
	c.Put("late", val{"y", clk.Now().Add(time.Hour)})
	clk.Advance(50*time.Millisecond - time.Nanosecond)
	if _, ok := c.Get("soon"); !ok {
		t.Fatal("the entry was not served just before its deadline")
	}
	clk.Advance(time.Nanosecond)
	if _, ok := c.Get("soon"); ok {
		t.Fatal("the entry was served at its deadline")
	}
	if _, ok := c.Get("late"); !ok {
		t.Fatal("the entry with a later deadline went too")
	}
}

// The bound is in estimated bytes: the cache never holds much more than
// MaxBytes of entries, whatever their count. And users who come back keep
// their entries through a stream of users seen once (a login storm, a
// crawler): half the cache's worth of returning users, each back after
// one and a half caches' worth of one-time users, which a plain LRU would
// miss on every return (S3-FIFO's ghost sends them to the main queue,
// where their reads keep them).
func TestBoundInBytesAndScanResistance(t *testing.T) {
	const maxBytes = 1 << 20
	c := newCache(maxBytes, nil)
	far := time.Now().Add(time.Hour)
	entry := localcache.EntryOverhead + len("hot-000000") + 300
	hot := maxBytes / entry / 2
	hits, returns := 0, 0
	for i := range 12 * hot {
		for j := range 3 {
			c.Put(fmt.Sprintf("scan-%06d-%d", i, j), val{string(make([]byte, 300)), far})
		}
		if b := c.Bytes(); b > maxBytes+int64(entry)*64 {
			t.Fatalf("after %d steps the cache holds %d bytes, bound %d", i+1, b, maxBytes)
		}
		k := fmt.Sprintf("hot-%06d", i%hot)
		_, ok := c.Get(k)
		if !ok {
			c.Put(k, val{string(make([]byte, 300)), far})
		}
		if i >= 4*hot { // after four returns of each
			returns++
			if ok {
				hits++
			}
		}
	}
	t.Logf("returning users hit %d of %d times (%.0f%%) among %d one-time users", hits, returns, 100*float64(hits)/float64(returns), 36*hot)
	if hits < returns*8/10 {
		t.Fatalf("returning users hit %d of %d times, want at least 80%%", hits, returns)
	}
}

// Whatever the sequence of Puts, Gets and Forgets, a Get returns the value
// of the key's last Put or misses: never another key's value, a forgotten
// one or an older one. Values of 0 to 40 KB cross the rings' chunk
// boundaries (16 KiB) and wrap the rings many times over.
func TestGetReturnsTheLastPutOrMisses(t *testing.T) {
	c := newCache(2<<20, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	far := time.Now().Add(time.Hour)
	last := map[string]string{} // "" once forgotten
	hits := 0
	for i := range 200_000 {
		k := fmt.Sprintf("key-%d", rng.IntN(3000))
		switch op := rng.IntN(10); {
		case op < 4:
			size := rng.IntN(600)
			if rng.IntN(50) == 0 {
				size = rng.IntN(40 << 10)
			}
			v := fmt.Sprintf("%s/%d/", k, i) + strings.Repeat("v", size)
			c.Put(k, val{v, far})
			last[k] = v
		case op < 5:
			c.Forget(k)
			last[k] = ""
		default:
			got, ok := c.Get(k)
			if !ok {
				continue
			}
			hits++
			if want := last[k]; got.s != want {
				t.Fatalf("step %d: Get(%s) = %.40q…, want %.40q…", i, k, got.s, want)
			}
		}
		if i%10_000 == 0 && c.Bytes() > 2<<20 {
			t.Fatalf("step %d: %d bytes held, bound %d", i, c.Bytes(), 2<<20)
		}
	}
	if hits < 10_000 {
		t.Fatalf("only %d hits: the test did not exercise the cache", hits)
	}
}

// A key forgotten (a change reported by the store) and put again is in use:
// it goes to the main queue, where a stream of one-time keys five times
// the cache's size does not reach it. In the small queue, unread, it
// would be among the first to go.
func TestForgottenKeyComesBackToTheMainQueue(t *testing.T) {
	const maxBytes = 1 << 20
	c := newCache(maxBytes, nil)
	far := time.Now().Add(time.Hour)
	c.Put("k", val{"1", far})
	c.Forget("k")
	c.Put("k", val{"2", far})
	c.Put("never-forgotten", val{"3", far})
	for i := range maxBytes / 300 * 5 {
		c.Put(fmt.Sprintf("scan-%06d", i), val{strings.Repeat("s", 300), far})
	}
	if _, ok := c.Get("never-forgotten"); ok {
		t.Fatal("an unread key in the small queue outlived five caches' worth of others: the test does not test")
	}
	if v, ok := c.Get("k"); !ok || v.s != "2" {
		t.Fatalf("Get(k) = %q, %v; want 2 from the main queue", v.s, ok)
	}
}

// Until the cache is full nothing goes: a cold cache keeps what it is
// given, where a small queue held to a tenth of the bytes would keep a
// tenth. And a record too large for the shard's budget is refused without
// a loss (it used to empty the small queue trying to fit).
func TestColdCacheKeepsAllItFits(t *testing.T) {
	const maxBytes = 16 << 20
	c := newCache(maxBytes, nil)
	far := time.Now().Add(time.Hour)
	n := maxBytes / 2 / (localcache.EntryOverhead + 12 + 310)
	for i := range n {
		c.Put(fmt.Sprintf("sess:%07d", i), val{strings.Repeat("s", 300), far})
	}
	c.Put("too-big", val{strings.Repeat("b", 2*maxBytes), far})
	hits := 0
	for i := range n {
		if _, ok := c.Get(fmt.Sprintf("sess:%07d", i)); ok {
			hits++
		}
	}
	if hits != n {
		t.Fatalf("kept %d of %d entries in a cache at %d%% of its bound", hits, n, 100*c.Bytes()/maxBytes)
	}
	small := newCache(100_000, nil) // one shard
	for i := range 5 {
		small.Put(fmt.Sprintf("s%d", i), val{"x", far})
	}
	small.Put("big", val{strings.Repeat("b", 20_000), far})
	if _, ok := small.Get("big"); !ok {
		t.Error("a 20 KB entry in a 100 KB cache was not kept")
	}
	if small.Len() != 6 {
		t.Errorf("%d entries after 6 Puts into a cache that holds them all", small.Len())
	}
}

// A value larger than MaxEntry is not kept, and the key's older value
// goes: a Get must not serve what the failed Put replaced.
func TestTooLargeForgetsTheOlderValue(t *testing.T) {
	c := newCache(4<<20, nil)
	far := time.Now().Add(time.Hour)
	c.Put("k", val{"small", far})
	c.Put("k", val{strings.Repeat("x", localcache.MaxEntry), far})
	if v, ok := c.Get("k"); ok {
		t.Fatalf("Get after a too-large Put = %.20q, want a miss", v.s)
	}
}

// The cache's point: 100,000 entries add almost no heap objects (no
// pointers for the garbage collector to follow), where a node per entry
// would add at least one each.
func TestEntriesAreNotHeapObjects(t *testing.T) {
	c := newCache(1<<30, nil) // its small queue holds them all
	far := time.Now().Add(time.Hour)
	objects := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapObjects
	}
	const n = 100_000
	before := objects()
	for i := range n {
		c.Put(fmt.Sprintf("user-%07d", i), val{strings.Repeat("t", 300), far})
	}
	grew := objects() - before
	if c.Len() != n {
		t.Fatalf("%d entries cached, want %d", c.Len(), n)
	}
	t.Logf("%d entries added %d heap objects", n, grew)
	if grew > n/20 {
		t.Fatalf("%d entries added %d heap objects, want under %d", n, grew, n/20)
	}
	runtime.KeepAlive(c)
}

// Concurrent use, for the race detector: every hit is the key's own.
func TestConcurrentUse(t *testing.T) {
	c := newCache(1<<20, nil)
	far := time.Now().Add(time.Hour)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 20_000 {
				k := fmt.Sprintf("k-%d", (i*7+g)%500)
				switch i % 4 {
				case 0:
					c.Put(k, val{k + strings.Repeat("x", i%900), far})
				case 1:
					c.Forget(k)
				default:
					if v, ok := c.Get(k); ok && !strings.HasPrefix(v.s, k) {
						t.Errorf("Get(%s) = %.20q", k, v.s)
						return
					}
				}
				if i%5000 == 0 {
					c.Len()
					c.Bytes()
				}
			}
		})
	}
	wg.Wait()
}
