package session

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/localcache"
)

// The local layer's bound is in bytes, from cachedBytes' estimate of each
// entry: this holds the estimate to the heap a cached session really takes
// (otter's node and table slot, the handle, the record's strings), within
// [0.9, 1.5] times, so the bound is neither exceeded nor wasted. The
// figure is the "memory per cached session" of docs/operations.md.
func TestBytesPerCachedSession(t *testing.T) {
	for _, oidc := range []bool{false, true} {
		t.Run(fmt.Sprintf("oidc=%v", oidc), func(t *testing.T) {
			const n = 50_000
			now := time.Now()
			// The layer as NewManager builds it, with a far deadline: an
			// untracked manager's would drop each entry a second after
			// it is put, sooner than the race detector fills 50,000.
			far := now.Add(time.Hour)
			local := localcache.New(localcache.Options[compact]{MaxBytes: 1 << 30, Weigh: cachedBytes,
				Until: func(compact) time.Time { return far }})
			before := heap()
			for i := range n {
				rec := Record{UserID: fmt.Sprintf("user-%07d", i), CreatedAt: now, LastSeen: now, AuthTime: now, Method: MethodDev}
				if oidc {
					rec.Method, rec.Sub, rec.SID = MethodOIDC, fmt.Sprintf("sub-%032d", i), fmt.Sprintf("sid-%032d", i)
				}
				h := Handle(NewID())
				local.Put(h, cached{rec: rec, handle: h, fetched: now}.compact())
			}
			measured := float64(heap()-before) / n
			estimated := float64(local.Bytes()) / n
			runtime.KeepAlive(local)
			if got := local.Len(); got != n {
				t.Fatalf("%d entries cached, want %d", got, n)
			}
			t.Logf("a cached session takes %.0f bytes of heap; estimated %.0f", measured, estimated)
			if r := estimated / measured; r < 0.9 || r > 1.5 {
				t.Errorf("estimate %.0f bytes is %.2f× the measured %.0f, want within [0.9, 1.5]", estimated, r, measured)
			}
		})
	}
}

func heap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
