package tokens

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/nearcache"
	"github.com/fintech-bff/bff/internal/nearcache/nearcachetest"
)

// The local copies' bound is in bytes, from the near-cache's count of
// each copy's record and index slot: this holds the count to the heap a cached token
// really takes (the record's header, the store key, the times, the token,
// the index), within [0.9, 1.5] times, for a short token (the simulator's HS256 JWT, about 300
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
			measured, counted := nearcachetest.BytesPerEntry(t, nearcache.Options[localEntry]{Append: appendEntry, Read: readEntry}, n, func(i int) (string, localEntry) {
				// A fresh string per token, as a decrypted or minted one is.
				v := stored{tok: Token{Value: fmt.Sprintf("%010d", i) + pad, Expiry: now.Add(time.Hour)}, until: now.Add(time.Hour), refreshAt: now.Add(50 * time.Minute)}
				return key.tokKey(fmt.Sprintf("user-%07d", i), "gen-abcdefgh"), newLocalEntry(v)
			})
			t.Logf("a cached token of %d bytes takes %.0f bytes of heap; the cache counts %.0f", size, measured, counted)
		})
	}
}
