package tokens

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/localcache"
	"github.com/fintech-bff/bff/internal/localcache/localcachetest"
)

// The local layer's bound is in bytes, from entryBytes' estimate of each
// entry: this holds the estimate to the heap a cached token really takes
// (otter's node and table slot, the store key, the token), within [0.9,
// 1.5] times, for a short token (the simulator's HS256 JWT, about 300
// bytes) and an RS256-sized one (about 1 KB). The figure is the "memory per
// cached token" of docs/operations.md.
func TestBytesPerCachedToken(t *testing.T) {
	for _, size := range []int{300, 1000} {
		t.Run(fmt.Sprintf("token of %d bytes", size), func(t *testing.T) {
			const n = 30_000
			now := time.Now()
			var key Cache
			key.macKey = make([]byte, 32)
			pad := strings.Repeat("x", size-10)
			measured, estimated := localcachetest.BytesPerEntry(t, entryBytes, n, func(local *localcache.Cache[localEntry], i int) {
				// A fresh string per token, as a decrypted or minted one is.
				v := stored{tok: Token{Value: fmt.Sprintf("%010d", i) + pad, Expiry: now.Add(time.Hour)}, until: now.Add(time.Hour), refreshAt: now.Add(50 * time.Minute)}
				local.Put(key.tokKey(fmt.Sprintf("user-%07d", i), "gen-abcdefgh"), newLocalEntry(v, now))
			})
			t.Logf("a cached token of %d bytes takes %.0f bytes of heap; estimated %.0f", size, measured, estimated)
		})
	}
}
