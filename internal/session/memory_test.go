package session

import (
	"fmt"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/nearcache"
	"github.com/fintech-bff/bff/internal/nearcache/nearcachetest"
)

// The local copies' bound is in bytes, from the near-cache's count of each
// copy's record and index slot: this holds the count to the heap a cached
// session really takes (the record's header, the handle, the times and
// strings, the index), within [0.9, 1.5] times, so the bound is neither
// exceeded nor wasted. The figure is the "memory per cached session" of
// docs/operations.md.
func TestBytesPerCachedSession(t *testing.T) {
	for _, oidc := range []bool{false, true} {
		t.Run(fmt.Sprintf("oidc=%v", oidc), func(t *testing.T) {
			const n = 50_000
			now := time.Now()
			measured, counted := nearcachetest.BytesPerEntry(t, nearcache.Options[compact]{Append: appendCompact, Read: readCompact}, n, func(i int) (string, compact) {
				rec := Record{UserID: fmt.Sprintf("user-%07d", i), CreatedAt: now, LastSeen: now, AuthTime: now, Method: MethodDev}
				if oidc {
					rec.Method, rec.Sub, rec.SID = MethodOIDC, fmt.Sprintf("sub-%032d", i), fmt.Sprintf("sid-%032d", i)
				}
				h := Handle(NewID())
				return h, cached{rec: rec, handle: h}.compact()
			})
			t.Logf("a cached session takes %.0f bytes of heap; the cache counts %.0f", measured, counted)
		})
	}
}
