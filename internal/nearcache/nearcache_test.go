//go:build integration

package nearcache_test

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/localcache"
	"github.com/fintech-bff/bff/internal/nearcache"
	"github.com/fintech-bff/bff/internal/testing/redistest"
)

// stringLayer is a layer of strings under the prefix "k:", named locally
// by localKey.
func stringLayer(localKey func(string) (string, bool)) nearcache.Options[string] {
	return nearcache.Options[string]{
		Cache: localcache.Options[string]{MaxBytes: 1 << 16,
			Append: func(b []byte, v string) []byte { return localcache.AppendString(b, v) },
			Read:   func(_ string, b []byte) string { r := localcache.Reader(b); return r.String() },
			Until:  func(string) time.Time { return time.Now().Add(time.Hour) }},
		Channel: "events", OnMessage: func(string) {},
		Prefix: "k:", LocalKey: localKey,
	}
}

func newLayer(t *testing.T) (*nearcache.Layer[string], *kv.Memory) {
	t.Helper()
	store := kv.NewMemory(nil)
	l := nearcache.New(stringLayer(func(k string) (string, bool) { return k, true }))
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

// trackedLayer is a layer on a real Redis, live and tracked, and a second
// client standing for another instance.
func trackedLayer(t *testing.T) (*nearcache.Layer[string], *kv.Redis, *kv.Redis) {
	t.Helper()
	rc, prefix := redistest.Client(t)
	store := kv.NewRedis(rc, prefix)
	other := kv.NewRedis(rc, prefix)
	l := nearcache.New(stringLayer(func(k string) (string, bool) { return strings.TrimPrefix(k, "k:"), true }))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go l.Run(ctx, store)
	waitFor(t, "the layer live and tracked", func() bool { return l.Live() && l.Tracked() })
	return l, store, other
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// reportsUpToHere waits until the store's reports of every write made so
// far have arrived: it writes a marker whose copy is kept, and waits for
// its report to drop it (reports arrive in the order of the writes).
func reportsUpToHere(t *testing.T, l *nearcache.Layer[string], store *kv.Redis) {
	t.Helper()
	marker := "marker-" + rand.Text()
	l.Keep(marker, "x", l.Version(marker))
	if err := store.Set(context.Background(), "k:"+marker, []byte("x"), time.Minute); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the marker's report", func() bool { _, ok := l.Get(marker); return !ok })
}

// An instance's own write is kept when its report arrives (no read back);
// a later write by anyone, or an instance's revocation message before the
// report, still drops it.
func TestKeepOwnWrite(t *testing.T) {
	ctx := context.Background()
	l, store, other := trackedLayer(t)

	seen := l.Version("a")
	if err := store.Set(ctx, "k:a", []byte("mine"), time.Minute); err != nil {
		t.Fatal(err)
	}
	l.KeepOwnWrite("a", "mine", seen)
	reportsUpToHere(t, l, store)
	if v, ok := l.Get("a"); !ok || v != "mine" {
		t.Fatalf("after its own write's report: got %q, %v; want the written copy kept", v, ok)
	}

	// Another instance writes after: its report drops the copy.
	if err := other.Set(ctx, "k:a", []byte("theirs"), time.Minute); err != nil {
		t.Fatal(err)
	}
	reportsUpToHere(t, l, store)
	if _, ok := l.Get("a"); ok {
		t.Fatal("a later write by another instance did not drop the kept copy")
	}

	// Another instance wrote just before this one's write: the first
	// report may be theirs, but this write's report then drops the copy.
	seen = l.Version("b")
	if err := other.Set(ctx, "k:b", []byte("theirs"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := store.Set(ctx, "k:b", []byte("mine"), time.Minute); err != nil {
		t.Fatal(err)
	}
	l.KeepOwnWrite("b", "mine", seen)
	reportsUpToHere(t, l, store)
	if v, ok := l.Get("b"); ok {
		t.Fatalf("two writes since the read began, yet %q was kept", v)
	}

	// A revocation message (an explicit drop) before the report: nothing
	// kept, whatever the order the two arrive in.
	seen = l.Version("c")
	if err := store.Set(ctx, "k:c", []byte("mine"), time.Minute); err != nil {
		t.Fatal(err)
	}
	l.KeepOwnWrite("c", "mine", seen)
	l.Drop("c")
	reportsUpToHere(t, l, store)
	if _, ok := l.Get("c"); ok {
		t.Fatal("an own write was kept after an explicit drop of the key")
	}
}
