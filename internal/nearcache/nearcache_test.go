package nearcache_test

import (
	"context"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/localcache"
	"github.com/fintech-bff/bff/internal/nearcache"
)

func newLayer(t *testing.T) (*nearcache.Layer[string], *kv.Memory) {
	t.Helper()
	store := kv.NewMemory(nil)
	l := nearcache.New(nearcache.Options[string]{
		Cache: localcache.Options[string]{MaxBytes: 1 << 16,
			Append: func(b []byte, v string) []byte { return localcache.AppendString(b, v) },
			Read:   func(_ string, b []byte) string { r := localcache.Reader(b); return r.String() },
			Until:  func(string) time.Time { return time.Now().Add(time.Hour) }},
		Channel: "events", OnMessage: func(string) {},
		Prefix: "k:", LocalKey: func(k string) (string, bool) { return k, true },
	})
	return l, store
}

// The invalidate-versus-fill race: a read that began before a drop never
// puts what it read back, and nothing is kept while the layer is not live.
func TestKeepAfterADropIsRefused(t *testing.T) {
	l, store := newLayer(t)
	seen := l.Version("a")
	l.Keep("a", "before it was live", seen)
	if _, ok := l.Get("a"); ok {
		t.Fatal("a copy was kept while the layer was not live")
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go l.Run(ctx, store)
	for !l.Live() {
		time.Sleep(time.Millisecond)
	}
	seen = l.Version("a")
	l.Drop("a") // an invalidation lands while the read is in flight
	l.Keep("a", "stale", seen)
	if _, ok := l.Get("a"); ok {
		t.Fatal("a read that raced a drop put its stale copy back")
	}
	seen = l.Version("a")
	l.Keep("a", "fresh", seen)
	if v, ok := l.Get("a"); !ok || v != "fresh" {
		t.Fatalf("got %q, %v; want the fresh copy kept", v, ok)
	}
	seen = l.Version("b")
	l.DropAll()
	l.Keep("b", "stale", seen)
	if _, ok := l.Get("b"); ok {
		t.Fatal("a read that raced a clear put its copy back")
	}
	if l.Tracked() {
		t.Fatal("the in-process store tracks nothing, yet the layer says tracked")
	}
}
