// Package localcachetest is what the tests of the cached layers share: the
// heap a filled cache takes, against the cache's own estimate.
package localcachetest

import (
	"runtime"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/localcache"
)

// BytesPerEntry fills n entries, with fill, into a cache estimated by
// weigh (as the layer's own is) whose entries have a far deadline (an
// untracked layer's would drop them after a second or ten, which the race
// detector's slowness can reach). It measures the heap they added, after
// collections, and fails t unless the cache's estimate (what its byte
// bound counts) is within [0.9, 1.5] times the measurement: the bound is
// then neither exceeded nor wasted. It returns the measured and estimated
// bytes per entry.
func BytesPerEntry[V any](t testing.TB, weigh func(V) int, n int, fill func(c *localcache.Cache[V], i int)) (measured, estimated float64) {
	t.Helper()
	far := time.Now().Add(time.Hour)
	c := localcache.New(localcache.Options[V]{MaxBytes: 1 << 30, Weigh: weigh, Until: func(V) time.Time { return far }})
	before := heap()
	for i := range n {
		fill(c, i)
	}
	measured = float64(heap()-before) / float64(n)
	estimated = float64(c.Bytes()) / float64(n)
	if got := c.Len(); got != n {
		t.Fatalf("%d entries cached, want %d", got, n)
	}
	if r := estimated / measured; r < 0.9 || r > 1.5 {
		t.Errorf("estimate %.0f bytes is %.2f× the measured %.0f, want within [0.9, 1.5]", estimated, r, measured)
	}
	return measured, estimated
}

func heap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
