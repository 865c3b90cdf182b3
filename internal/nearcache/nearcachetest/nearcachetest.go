// Package nearcachetest is what the tests of the near-cache's users share:
// the heap a filled layer's copies take, against the layer's own count.
package nearcachetest

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/nearcache"
	"github.com/fintech-bff/bff/internal/testing/poll"
)

// BytesPerEntry keeps n copies, made by value, in a layer that holds
// them as o does (its Append and Read), live on an in-process store, with
// a far deadline and no age bound (an untracked layer's would forget them
// after a second or ten, which the race detector's slowness can reach).
// It measures the heap they added, after collections, and fails t unless
// the layer's own count (what its byte bound counts) is within [0.9, 1.5]
// times the measurement: the bound is then neither exceeded nor wasted.
// It returns the measured and counted bytes per copy.
func BytesPerEntry[V any](t testing.TB, o nearcache.Options[V], n int, value func(i int) (key string, v V)) (measured, counted float64) {
	t.Helper()
	far := time.Now().Add(time.Hour)
	o.MaxBytes, o.Now, o.MaxAge = 1<<30, nil, time.Hour
	o.Expires = func(V) time.Time { return far }
	l := nearcache.New(kv.NewMemory(nil), o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	poll.Until(t, 5*time.Second, "the layer goes live (the in-process subscription comes up at once)", l.Live)
	before := heap()
	for i := range n {
		key, v := value(i)
		l.Keep(key, v, l.BeginRead(key))
	}
	measured = float64(heap()-before) / float64(n)
	counted = float64(l.Bytes()) / float64(n)
	if got := l.Len(); got != n {
		t.Fatalf("%d copies kept, want %d", got, n)
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
