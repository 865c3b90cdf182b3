package tokens

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/kv"
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
			s, err := NewSecret(func() (string, error) { return "secret", nil }, nil)
			if err != nil {
				t.Fatal(err)
			}
			c, err := NewCache(kv.NewMemory(time.Now), nil, s, CacheOptions{EncryptionKey: make([]byte, 32), LocalBytes: 1 << 30})
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			pad := strings.Repeat("x", size-10)
			before := heapBytes()
			for i := range n {
				// A fresh string per token, as a decrypted or minted one is.
				v := stored{tok: Token{Value: fmt.Sprintf("%010d", i) + pad, Expiry: now.Add(time.Hour)}, until: now.Add(time.Hour), refreshAt: now.Add(50 * time.Minute)}
				c.live.Store(true)
				c.remember(c.tokKey(fmt.Sprintf("user-%07d", i), *c.gen.Load()), v)
			}
			measured := float64(heapBytes()-before) / n
			estimated := float64(c.local.Bytes()) / n
			runtime.KeepAlive(c)
			if got := c.local.Len(); got != n {
				t.Fatalf("%d entries cached, want %d", got, n)
			}
			t.Logf("a cached token of %d bytes takes %.0f bytes of heap; estimated %.0f", size, measured, estimated)
			if r := estimated / measured; r < 0.9 || r > 1.5 {
				t.Errorf("estimate %.0f bytes is %.2f× the measured %.0f, want within [0.9, 1.5]", estimated, r, measured)
			}
		})
	}
}

func heapBytes() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
