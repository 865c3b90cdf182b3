package nearcache_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/nearcache"
	"github.com/fintech-bff/bff/internal/testing/poll"
)

// stringLayer is a layer of strings under the prefix "k:", named locally
// by localKey, whose untracked copies may be served for an hour.
func stringLayer(localKey func(string) (string, bool)) nearcache.Options[string] {
	return nearcache.Options[string]{
		MaxBytes: 1 << 16,
		Append:   func(b []byte, v string) []byte { return nearcache.AppendString(b, v) },
		Read:     func(_ string, b []byte) string { r := nearcache.Reader(b); return r.String() },
		MaxAge:   time.Hour,
		Channel:  "events", OnMessage: func(string) {},
		Prefix: "k:", LocalKey: localKey,
	}
}

func newLayer(t *testing.T) *nearcache.Layer[string] {
	t.Helper()
	return nearcache.New(kv.NewMemory(nil), stringLayer(func(k string) (string, bool) { return k, true }))
}

// The invalidate-versus-fill race: a read that began before a forget never
// keeps what it read, and nothing is kept while the layer is not live.
func TestKeepAfterAForgetIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLayer(t)
		l.Keep("a", "before it was live", l.BeginRead("a"))
		if n := l.Len(); n != 0 {
			t.Fatalf("%d copies kept while the layer was not live, want 0", n)
		}
		run(t, l)
		synctest.Wait() // the in-process subscription is up
		if !l.Live() {
			t.Fatal("the layer is not live once its subscription is up")
		}
		read := l.BeginRead("a")
		l.Forget("a") // an invalidation lands while the read is in flight
		l.Keep("a", "stale", read)
		if _, ok := l.Serve("a"); ok {
			t.Fatal("a read that raced a forget kept its stale copy")
		}
		l.Keep("a", "fresh", l.BeginRead("a"))
		if v, ok := l.Serve("a"); !ok || v != "fresh" {
			t.Fatalf("got %q, %v; want the fresh copy kept", v, ok)
		}
		read = l.BeginRead("b")
		l.ForgetAll()
		l.Keep("b", "stale", read)
		if _, ok := l.Serve("b"); ok {
			t.Fatal("a read that raced a clear kept its copy")
		}
		if l.Tracked() {
			t.Fatal("the in-process store tracks nothing, yet the layer says tracked")
		}
	})
}

// run runs l until the test ends. It does not wait for Run to return:
// kv.Redis's Subscribe returns only at its subscription's next message.
func run[T any](t *testing.T, l *nearcache.Layer[T]) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go l.Run(ctx)
}

// waitFor fails t unless cond holds within 10 s: real time for a layer on
// Redis, synctest's clock in a bubble.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, 10*time.Second, what, cond)
}
