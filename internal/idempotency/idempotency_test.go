package idempotency_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/idempotency"
	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/redistest"
)

var key32 = []byte("0123456789abcdef0123456789abcdef")

func suite(t *testing.T, newStore func() idempotency.Store) {
	ctx := context.Background()
	newKeeper := func() *idempotency.Keeper {
		k, err := idempotency.New(newStore(), key32, nil, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	fp := idempotency.Fingerprint("POST", "/v2/payments", "", []byte(`{"amount":1}`))
	resp := idempotency.Response{Status: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"id":"p1"}`)}

	t.Run("first runs, retry replays", func(t *testing.T) {
		k := newKeeper()
		claim, stored, err := k.Begin(ctx, "u", "key-1", fp)
		if err != nil || claim == nil || stored != nil {
			t.Fatalf("first: got %v %v %v, want a claim", claim, stored, err)
		}
		if _, _, err := k.Begin(ctx, "u", "key-1", fp); !errors.Is(err, idempotency.ErrInProgress) {
			t.Fatalf("while running: got %v, want ErrInProgress", err)
		}
		if err := k.Finish(ctx, claim, resp); err != nil {
			t.Fatal(err)
		}
		_, stored, err = k.Begin(ctx, "u", "key-1", fp)
		if err != nil || stored == nil || stored.Status != 201 || string(stored.Body) != `{"id":"p1"}` {
			t.Fatalf("retry: got %+v %v, want the stored 201", stored, err)
		}
	})
	t.Run("same key, other body", func(t *testing.T) {
		k := newKeeper()
		claim, _, _ := k.Begin(ctx, "u", "key-2", fp)
		other := idempotency.Fingerprint("POST", "/v2/payments", "", []byte(`{"amount":2}`))
		if _, _, err := k.Begin(ctx, "u", "key-2", other); !errors.Is(err, idempotency.ErrKeyReused) {
			t.Fatalf("in progress: got %v, want ErrKeyReused", err)
		}
		_ = k.Finish(ctx, claim, resp)
		if _, _, err := k.Begin(ctx, "u", "key-2", other); !errors.Is(err, idempotency.ErrKeyReused) {
			t.Fatalf("done: got %v, want ErrKeyReused", err)
		}
	})
	t.Run("keys are per user", func(t *testing.T) {
		k := newKeeper()
		a, _, _ := k.Begin(ctx, "alice", "shared-key", fp)
		b, _, err := k.Begin(ctx, "bob", "shared-key", fp)
		if a == nil || b == nil || err != nil {
			t.Fatalf("got %v %v %v, want two independent claims", a, b, err)
		}
	})
	t.Run("release lets a retry run again", func(t *testing.T) {
		k := newKeeper()
		claim, _, _ := k.Begin(ctx, "u", "key-3", fp)
		if err := k.Release(ctx, claim); err != nil {
			t.Fatal(err)
		}
		if again, _, err := k.Begin(ctx, "u", "key-3", fp); again == nil || err != nil {
			t.Fatalf("got %v %v, want a new claim", again, err)
		}
	})
	t.Run("a late release does not drop a stored response", func(t *testing.T) {
		k := newKeeper()
		claim, _, _ := k.Begin(ctx, "u", "key-4", fp)
		_ = k.Finish(ctx, claim, resp)
		_ = k.Release(ctx, claim)
		if _, stored, _ := k.Begin(ctx, "u", "key-4", fp); stored == nil {
			t.Fatal("the stored response was released")
		}
	})
	t.Run("invalid keys", func(t *testing.T) {
		k := newKeeper()
		for _, key := range []string{"", strings.Repeat("k", 256), "has space", "tab\t", "é"} {
			if _, _, err := k.Begin(ctx, "u", key, fp); !errors.Is(err, idempotency.ErrInvalidKey) {
				t.Errorf("%q: got %v, want ErrInvalidKey", key, err)
			}
		}
	})
	t.Run("concurrent duplicates: exactly one claim", func(t *testing.T) {
		k := newKeeper()
		var claims, inProgress atomic.Int64
		var wg sync.WaitGroup
		for i := 0; i < 50; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, _, err := k.Begin(ctx, "u", "race-key", fp)
				if c != nil {
					claims.Add(1)
				}
				if errors.Is(err, idempotency.ErrInProgress) {
					inProgress.Add(1)
				}
			}()
		}
		wg.Wait()
		if claims.Load() != 1 || inProgress.Load() != 49 {
			t.Fatalf("got %d claims and %d in-progress, want 1 and 49", claims.Load(), inProgress.Load())
		}
	})
}

func TestMemory(t *testing.T) {
	suite(t, func() idempotency.Store { return kv.NewMemory(nil) })
}

func TestRedis(t *testing.T) {
	c, _ := redistest.Client(t)
	suite(t, func() idempotency.Store {
		p := redistest.Prefix()
		t.Cleanup(func() { redistest.DeletePrefix(context.Background(), c, p) })
		return kv.NewRedis(c, p)
	})
}

// Stored responses hold payment data: Redis sees only ciphertext, and no
// user id or key in the clear.
func TestRedisHoldsCiphertextOnly(t *testing.T) {
	c, prefix := redistest.Client(t)
	ctx := context.Background()
	k, _ := idempotency.New(kv.NewRedis(c, prefix), key32, nil, time.Minute)
	claim, _, _ := k.Begin(ctx, "user-ffff", "key-visible", "fp")
	_ = k.Finish(ctx, claim, idempotency.Response{Status: 201, Body: []byte(`{"iban":"DE89370400440532013000"}`)})
	for _, key := range redistest.Keys(ctx, c, prefix) {
		v := c.Get(ctx, key).Val()
		for _, s := range []string{"DE89370400440532013000", "user-ffff", "key-visible"} {
			if strings.Contains(key, s) || strings.Contains(v, s) {
				t.Fatalf("Redis holds %q in plain text", s)
			}
		}
	}
}

// A retry after redis.encryption_key rotated still gets the stored answer
// when the old key is among the decryption keys; without it the record does
// not open and Begin fails closed (an error, never a second run).
func TestKeyRotation(t *testing.T) {
	ctx := context.Background()
	store := kv.NewMemory(nil)
	newKey := []byte("fedcba9876543210fedcba9876543210")
	before, _ := idempotency.New(store, key32, nil, time.Minute)
	fp := idempotency.Fingerprint("POST", "/v2/payments", "", []byte(`{"amount":1}`))
	claim, _, err := before.Begin(ctx, "u", "rotated", fp)
	if err != nil {
		t.Fatal(err)
	}
	_ = before.Finish(ctx, claim, idempotency.Response{Status: 201, Body: []byte(`{"id":"p1"}`)})

	rotated, err := idempotency.New(store, newKey, [][]byte{key32}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	claim, stored, err := rotated.Begin(ctx, "u", "rotated", fp)
	if err != nil || claim != nil || stored == nil || string(stored.Body) != `{"id":"p1"}` {
		t.Fatalf("after rotation: got claim %v, stored %+v, %v; want the stored 201", claim, stored, err)
	}
	forgot, _ := idempotency.New(store, newKey, nil, time.Minute)
	if claim, stored, err := forgot.Begin(ctx, "u", "rotated", fp); err == nil || claim != nil || stored != nil {
		t.Fatalf("without the old key: got claim %v, stored %+v, %v; want an error", claim, stored, err)
	}
}
