package session

import (
	"fmt"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/localcache"
	"github.com/fintech-bff/bff/internal/localcache/localcachetest"
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
			measured, estimated := localcachetest.BytesPerEntry(t, cachedBytes, n, func(local *localcache.Cache[compact], i int) {
				rec := Record{UserID: fmt.Sprintf("user-%07d", i), CreatedAt: now, LastSeen: now, AuthTime: now, Method: MethodDev}
				if oidc {
					rec.Method, rec.Sub, rec.SID = MethodOIDC, fmt.Sprintf("sub-%032d", i), fmt.Sprintf("sid-%032d", i)
				}
				h := Handle(NewID())
				local.Put(h, cached{rec: rec, handle: h, fetched: now}.compact())
			})
			t.Logf("a cached session takes %.0f bytes of heap; estimated %.0f", measured, estimated)
		})
	}
}
