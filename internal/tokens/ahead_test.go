package tokens_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/testing/testclock"
	"github.com/fintech-bff/bff/internal/tokens"
)

// Run's end cancels a refresh ahead in flight and waits for it, and no
// refresh ahead starts after it: once Run has returned, the cache uses its
// store for its callers only, so the process may close the store next.
func TestRunWaitsForTheRefreshesAhead(t *testing.T) {
	ctx := context.Background()
	clk := testclock.New(time.Unix(1_700_000_000, 0))
	store := &watchedStore{Store: kv.NewMemory(clk.Now)}
	src := &heldSource{fakeSource: fakeSource{now: clk.Now, life: 10 * time.Minute}, minting: make(chan struct{}, 1)}
	c := newCacheOn(t, store, src, clk)
	first, err := c.Token(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { c.Run(runCtx); close(ran) }()

	// Into the refresh-ahead window: the request gets the current token at
	// once, and a refresh ahead starts its mint, which the source holds.
	src.hold.Store(true)
	clk.Advance(8 * time.Minute)
	if got, err := c.Token(ctx, "alice"); err != nil || got.Value != first.Value {
		t.Fatalf("got %q, %v; want the current token at once", got.Value, err)
	}
	select {
	case <-src.minting:
	case <-time.After(10 * time.Second):
		t.Fatal("no refresh ahead started within 10s")
	}

	stop()
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of its context's end")
	}
	if n := c.Refreshing(); n != 0 {
		t.Fatalf("Run returned with %d refresh(es) ahead still running: they would use the store after it closed", n)
	}
	if !src.cancelled.Load() {
		t.Fatal("the refresh ahead's mint was not cancelled by Run's end")
	}
	// The store is closed now: a request in the window serves the current
	// token and starts no refresh (no lock is taken).
	store.closed.Store(true)
	if got, err := c.Token(ctx, "alice"); err != nil || got.Value != first.Value {
		t.Fatalf("after Run: got %q, %v; want the current token", got.Value, err)
	}
	if n := store.locksAfterClose.Load(); n != 0 || c.Refreshing() != 0 {
		t.Fatalf("after Run: %d mint lock(s) taken, %d refresh(es) running; want none", n, c.Refreshing())
	}
}

func newCacheOn(t *testing.T, store tokens.Store, src tokens.Source, clk *testclock.Clock) *tokens.Cache {
	t.Helper()
	c, err := tokens.NewCache(store, src, fixedSecret(t, testSecret), tokens.CacheOptions{
		EncryptionKey: encKey, RefreshBefore: time.Minute, MaxTTL: time.Hour, Now: clk.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// heldSource is a fakeSource whose mints, once hold is set, wait for
// their context to end (and say so on minting).
type heldSource struct {
	fakeSource
	hold      atomic.Bool
	minting   chan struct{}
	cancelled atomic.Bool
}

func (h *heldSource) Token(ctx context.Context, userID string) (tokens.Token, error) {
	if !h.hold.Load() {
		return h.fakeSource.Token(ctx, userID)
	}
	h.minting <- struct{}{}
	<-ctx.Done()
	h.cancelled.Store(true)
	return tokens.Token{}, errors.New("mint cancelled")
}

// watchedStore counts the mint locks taken once closed is set.
type watchedStore struct {
	tokens.Store
	closed          atomic.Bool
	locksAfterClose atomic.Int64
}

func (w *watchedStore) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	if w.closed.Load() {
		w.locksAfterClose.Add(1)
	}
	return w.Store.SetNX(ctx, key, value, ttl)
}
