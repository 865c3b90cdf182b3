//go:build integration

package kv_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/testing/redistest"
)

// BenchmarkClaims is a DPoP proof's jti claim (SetNX of a new key) sent by
// n goroutines at once: one round trip each (Single, Redis.SetNX as
// before Claims), together (Claims), and through go-redis's AutoPipeliner
// (blocking face, default options), which does the same with goroutines of
// its own. Besides ns/op it reports the process's CPU per claim
// (cpu-ns/op, getrusage: user and system, the Redis server not included)
// and the claims per round trip (claims/rt).
//
// The process's CPU per claim in µs, medians of 5 runs of 20000 claims
// (-cpu 2; 2 cores, Oxide Virtual Turin-like, go1.26.8, Redis 7.0.15 on
// loopback, load average 2 to 7 from other work), claims per round trip
// after the slash:
//
//	goroutines  Single    Claims     AutoPipeliner
//	1           44 / 1    50 / 1     68 / 1
//	4           33 / 1    26 / 2.4   28 / 4.0
//	16          28 / 1    11.5 / 8.4 10.2 / 15.9
//	64          29 / 1    6.7 / 33   8.8 / 62
//
// Interleaved, at load 2 to 3: 47 and 49 at 1 goroutine (Single, Claims;
// the runs' ranges overlap, and Claims was the cheaper in 3 of 4 pairs run
// in the other order: its cost alone is 6 allocations, 240 B), 26 and 13
// at 16. The loop here sends the next
// claim as soon as one returns, which is the AutoPipeliner's best case (it
// waits for exactly that); a request does other work between its claims.
func BenchmarkClaims(b *testing.B) {
	for _, kind := range []string{"Single", "Claims", "AutoPipeliner"} {
		for _, n := range []int{1, 4, 16, 64} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", kind, n), func(b *testing.B) { benchmarkClaims(b, kind, n) })
		}
	}
}

func benchmarkClaims(b *testing.B, kind string, goroutines int) {
	rc, prefix := redistest.Client(b)
	trips := redistest.CountRoundTrips(rc)
	ctx := context.Background()
	r := kv.NewRedis(rc, prefix)
	claim := r.SetNX
	switch kind {
	case "Claims":
		claim = kv.NewClaims(r, 0).SetNX
	case "AutoPipeliner":
		ap, err := rc.AutoPipeline()
		if err != nil {
			b.Fatal(err)
		}
		defer ap.Close()
		claim = func(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
			return kv.ClaimOn(ctx, ap, prefix+key, value, ttl)
		}
	}
	// The keys expire soon after: the cleanup need not delete them.
	const ttl = 3 * time.Second
	if _, err := claim(ctx, "warm", []byte("v"), ttl); err != nil { // the script loaded, a connection open
		b.Fatal(err)
	}
	var next atomic.Int64
	var failed atomic.Int64
	var wg sync.WaitGroup
	trips.Store(0)
	cpu := cpuTime()
	b.ResetTimer()
	for range goroutines {
		wg.Go(func() {
			var value [16]byte
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				copy(value[:], fmt.Appendf(value[:0], "%016d", i))
				if ok, err := claim(ctx, fmt.Sprintf("jti:%d", i), value[:], ttl); !ok || err != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	used := cpuTime() - cpu
	if failed.Load() > 0 {
		b.Fatalf("%d of %d claims of new keys failed", failed.Load(), b.N)
	}
	b.ReportMetric(float64(used.Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(b.N)/float64(max(trips.Load(), 1)), "claims/rt")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
