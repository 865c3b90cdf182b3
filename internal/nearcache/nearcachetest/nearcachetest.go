// Package localcachetest is what the tests of the cached layers share: the
// heap a filled cache takes, against the cache's own count.
package localcachetest

import (
	"runtime"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/localcache"
)

// BytesPerEntry fills n entries, with fill, into a cache that stores
// them as o does (its Append and Read) and with a far deadline (an
// untracked layer's would drop them after a second or ten, which the race
// detector's slowness can reach). It measures the heap they added, after
// collections, and fails t unless the cache's own count (what its byte
// bound counts) is within [0.9, 1.5] times the measurement: the bound is
// then neither exceeded nor wasted. It returns the measured and counted
// bytes per entry.
func BytesPerEntry[V any](t testing.TB, o localcache.Options[V], n int, fill func(c *localcache.Cache[V], i int)) (measured, counted float64) {
	t.Helper()
	far := time.Now().Add(time.Hour)
	o.MaxBytes, o.Now = 1<<30, nil
	o.Until = func(V) time.Time { return far }
	c := localcache.New(o)
	before := heap()
	for i := range n {
		fill(c, i)
	}
	measured = float64(heap()-before) / float64(n)
	counted = float64(c.Bytes()) / float64(n)
	if got := c.Len(); got != n {
		t.Fatalf("%d entries cached, want %d", got, n)
	}
	if r := counted / measured; r < 0.9 || r > 1.5 {
		t.Errorf("count of %.0f bytes is %.2f× the measured %.0f, want within [0.9, 1.5]", counted, r, measured)
	}
	return measured, counted
}

func heap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
