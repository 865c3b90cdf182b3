//go:build integration

package nearcache_test

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/nearcache"
	"github.com/fintech-bff/bff/internal/testing/redistest"
)

// trackedLayer is a layer on a real Redis, live and tracked, and a second
// client standing for another instance.
func trackedLayer(t *testing.T) (*nearcache.Layer[string], *kv.Redis, *kv.Redis) {
	t.Helper()
	rc, prefix := redistest.Client(t)
	store := kv.NewRedis(rc, prefix)
	other := kv.NewRedis(rc, prefix)
	l := nearcache.New(store, stringLayer(func(k string) (string, bool) { return strings.TrimPrefix(k, "k:"), true }))
	run(t, l)
	waitFor(t, "the layer live and tracked", func() bool { return l.Live() && l.Tracked() })
	return l, store, other
}

// reportsUpToHere waits until the store's reports of every write made so
// far have arrived: it writes a marker whose copy is kept, and waits for
// its report to forget it (reports arrive in the order of the writes).
func reportsUpToHere(t *testing.T, l *nearcache.Layer[string], store *kv.Redis) {
	t.Helper()
	marker := "marker-" + rand.Text()
	l.Keep(marker, "x", l.BeginRead(marker))
	if err := store.Set(context.Background(), "k:"+marker, []byte("x"), time.Minute); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the marker's report", func() bool { _, ok := l.Serve(marker); return !ok })
}

// An instance's own write is kept when its report arrives (no read back);
// a later write by anyone, or an instance's revocation message before the
// report, still forgets it.
func TestKeepOwnWrite(t *testing.T) {
	ctx := context.Background()
	l, store, other := trackedLayer(t)

	read := l.BeginRead("a")
	if err := store.Set(ctx, "k:a", []byte("mine"), time.Minute); err != nil {
		t.Fatal(err)
	}
	l.KeepOwnWrite("a", "mine", read)
	reportsUpToHere(t, l, store)
	if v, ok := l.Serve("a"); !ok || v != "mine" {
		t.Fatalf("after its own write's report: got %q, %v; want the written copy kept", v, ok)
	}

	// Another instance writes after: its report forgets the copy.
	if err := other.Set(ctx, "k:a", []byte("theirs"), time.Minute); err != nil {
		t.Fatal(err)
	}
	reportsUpToHere(t, l, store)
	if _, ok := l.Serve("a"); ok {
		t.Fatal("a later write by another instance did not forget the kept copy")
	}

	// Another instance wrote just before this one's write: the first
	// report may be theirs, but this write's report then forgets the copy.
	read = l.BeginRead("b")
	if err := other.Set(ctx, "k:b", []byte("theirs"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := store.Set(ctx, "k:b", []byte("mine"), time.Minute); err != nil {
		t.Fatal(err)
	}
	l.KeepOwnWrite("b", "mine", read)
	reportsUpToHere(t, l, store)
	if v, ok := l.Serve("b"); ok {
		t.Fatalf("two writes since the read began, yet %q was kept", v)
	}

	// A revocation message (an explicit forget) before the report: nothing
	// kept, whatever the order the two arrive in.
	read = l.BeginRead("c")
	if err := store.Set(ctx, "k:c", []byte("mine"), time.Minute); err != nil {
		t.Fatal(err)
	}
	l.KeepOwnWrite("c", "mine", read)
	l.Forget("c")
	reportsUpToHere(t, l, store)
	if _, ok := l.Serve("c"); ok {
		t.Fatal("an own write was kept after an explicit forget of the key")
	}
}
