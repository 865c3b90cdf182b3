package localcache_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/localcache"
)

type val struct {
	s     string
	until time.Time
}

func newCache(maxBytes int64, now func() time.Time) *localcache.Cache[val] {
	return localcache.New(localcache.Options[val]{
		MaxBytes: maxBytes,
		Weigh:    func(v val) int { return len(v.s) },
		Until:    func(v val) time.Time { return v.until },
		Now:      now,
	})
}

func TestGetPutDropClear(t *testing.T) {
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
	c.Drop("a")
	if _, ok := c.Get("a"); ok {
		t.Fatal("Get(a) after Drop: found")
	}
	if _, ok := c.Get("b"); !ok {
		t.Fatal("Drop(a) dropped b")
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
	c.Drop("a")
	c.Clear()
}

// An entry past its Until is gone (its memory freed) without a Get.
func TestEntryGoesAtItsDeadline(t *testing.T) {
	c := newCache(1<<20, nil)
	c.Put("soon", val{"x", time.Now().Add(50 * time.Millisecond)})
	c.Put("late", val{"y", time.Now().Add(time.Hour)})
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ok := c.Get("soon"); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an entry 5 s past its deadline is still served")
		}
		time.Sleep(10 * time.Millisecond)
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
// miss on every return (W-TinyLFU admission keeps them).
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

func TestVersions(t *testing.T) {
	var v localcache.Versions
	a := v.Of("sess:a")
	v.Bump("sess:a")
	if v.Of("sess:a") == a {
		t.Fatal("Bump(a) left a's version as it was")
	}
	a = v.Of("sess:a")
	v.BumpAll()
	if v.Of("sess:a") == a {
		t.Fatal("BumpAll left a's version as it was")
	}
	// A change of another key leaves a's version alone unless they share
	// a shard: of 1,000 other keys, few may.
	a = v.Of("sess:a")
	same := 0
	for i := range 1000 {
		v.Bump(fmt.Sprintf("sess:other-%d", i))
		if v.Of("sess:a") != a {
			same++
			a = v.Of("sess:a")
		}
	}
	if same > 10 {
		t.Fatalf("%d of 1000 changes of other keys changed a's version, want about 1", same)
	}
}
