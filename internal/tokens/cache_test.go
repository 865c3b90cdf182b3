//go:build integration

package tokens_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/testing/poll"
	"github.com/fintech-bff/bff/internal/testing/redistest"
	"github.com/fintech-bff/bff/internal/testing/testclock"
	"github.com/fintech-bff/bff/internal/tokens"
)

func newCache(t testing.TB, store tokens.Store, src tokens.Source, clk *testclock.Clock) *tokens.Cache {
	t.Helper()
	return newCacheWith(t, store, src, fixedSecret(t, testSecret), clk)
}

func newCacheWith(t testing.TB, store tokens.Store, src tokens.Source, secret *tokens.Secret, clk *testclock.Clock) *tokens.Cache {
	t.Helper()
	c, err := tokens.NewCache(store, src, secret, tokens.CacheOptions{
		EncryptionKey: encKey, RefreshBefore: time.Minute, MaxTTL: time.Hour, Now: clk.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func cacheSuite(t *testing.T, newStore func(clk *testclock.Clock) tokens.Store) {
	ctx := context.Background()
	setup := func(life time.Duration) (*tokens.Cache, *fakeSource, *testclock.Clock) {
		clk := testclock.New(time.Unix(1_700_000_000, 0))
		src := &fakeSource{now: clk.Now, life: life}
		return newCache(t, newStore(clk), src, clk), src, clk
	}
	t.Run("second call is a hit", func(t *testing.T) {
		c, src, _ := setup(time.Hour)
		a, err := c.Token(ctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := c.Token(ctx, "alice")
		if a.Value != b.Value || src.count("alice") != 1 {
			t.Fatalf("got %q then %q after %d mints, want one token from one mint", a.Value, b.Value, src.count("alice"))
		}
	})
	t.Run("users never share a token", func(t *testing.T) {
		c, _, _ := setup(time.Hour)
		a, _ := c.Token(ctx, "alice")
		b, _ := c.Token(ctx, "bob")
		if a.Value == b.Value || !strings.Contains(b.Value, "bob") {
			t.Fatalf("got %q for alice and %q for bob", a.Value, b.Value)
		}
	})
	// A 10-minute token is cached 9 minutes (refresh_before is 1 minute);
	// its refresh-ahead window is the last fifth of that, from 7m12s.
	t.Run("served until expiry minus refresh_before", func(t *testing.T) {
		c, src, clk := setup(10 * time.Minute)
		_, _ = c.Token(ctx, "alice")
		clk.Advance(7 * time.Minute) // before the refresh-ahead window
		_, _ = c.Token(ctx, "alice")
		if got := src.count("alice"); got != 1 {
			t.Fatalf("before expiry-refresh_before: got %d mints, want 1", got)
		}
		clk.Advance(2*time.Minute + time.Second) // past expiry-refresh_before
		_, _ = c.Token(ctx, "alice")
		if got := src.count("alice"); got != 2 {
			t.Fatalf("after expiry-refresh_before: got %d mints, want 2", got)
		}
	})
	t.Run("refreshed ahead in the background", func(t *testing.T) {
		c, src, clk := setup(10 * time.Minute)
		first, _ := c.Token(ctx, "alice")
		clk.Advance(8 * time.Minute) // in the window, still valid
		got, _ := c.Token(ctx, "alice")
		if got.Value != first.Value {
			t.Fatal("a request in the refresh window waited for a new token; want the current one at once")
		}
		waitFor(t, func() bool { return src.count("alice") == 2 })
		waitFor(t, func() bool { tok, _ := c.Token(ctx, "alice"); return tok.Value != first.Value })
	})
	t.Run("capped by max_token_ttl", func(t *testing.T) {
		c, src, clk := setup(24 * time.Hour) // cached 1h; refresh-ahead from 48m
		_, _ = c.Token(ctx, "alice")
		clk.Advance(47 * time.Minute)
		_, _ = c.Token(ctx, "alice")
		if got := src.count("alice"); got != 1 {
			t.Fatalf("before max_token_ttl: got %d mints, want 1", got)
		}
		clk.Advance(14 * time.Minute)
		_, _ = c.Token(ctx, "alice")
		if got := src.count("alice"); got != 2 {
			t.Fatalf("after max_token_ttl: got %d mints, want 2", got)
		}
	})
	t.Run("short-lived token is used once, not cached", func(t *testing.T) {
		c, src, _ := setup(30 * time.Second) // under refresh_before
		_, _ = c.Token(ctx, "alice")
		_, _ = c.Token(ctx, "alice")
		if got := src.count("alice"); got != 2 {
			t.Fatalf("got %d mints, want 2 (never cached)", got)
		}
	})
	t.Run("invalidate forces a new mint", func(t *testing.T) {
		c, src, _ := setup(time.Hour)
		a, _ := c.Token(ctx, "alice")
		if err := c.Invalidate(ctx, "alice"); err != nil {
			t.Fatal(err)
		}
		b, _ := c.Token(ctx, "alice")
		if a.Value == b.Value || src.count("alice") != 2 {
			t.Fatalf("got %q then %q, want a fresh token", a.Value, b.Value)
		}
	})
	t.Run("a new secret never serves an old token", func(t *testing.T) {
		clk := testclock.New(time.Unix(1_700_000_000, 0))
		src := &fakeSource{now: clk.Now, life: time.Hour}
		file := &secretFile{v: testSecret}
		secret := newSecret(t, file, nil)
		c := newCacheWith(t, newStore(clk), src, secret, clk)
		a, _ := c.Token(ctx, "alice")
		file.set("rotated-secret", nil)
		if changed, err := secret.Reload(); !changed || err != nil {
			t.Fatalf("Reload: got %v, %v, want true, nil", changed, err)
		}
		b, _ := c.Token(ctx, "alice")
		if a.Value == b.Value || src.count("alice") != 2 {
			t.Fatalf("got %q then %q after rotation, want a fresh token", a.Value, b.Value)
		}
	})
	t.Run("mint errors are returned and not cached", func(t *testing.T) {
		clk := testclock.New(time.Unix(1_700_000_000, 0))
		src := &fakeSource{now: clk.Now, life: time.Hour, err: &tokens.MintError{Kind: tokens.KindAuth}}
		c := newCache(t, newStore(clk), src, clk)
		_, err := c.Token(ctx, "alice")
		var me *tokens.MintError
		if !errors.As(err, &me) || me.Kind != tokens.KindAuth {
			t.Fatalf("got %v, want the KindAuth MintError", err)
		}
	})
	t.Run("concurrent callers share one mint", func(t *testing.T) {
		clk := testclock.New(time.Unix(1_700_000_000, 0))
		src := &fakeSource{now: clk.Now, life: time.Hour, delay: 20 * time.Millisecond}
		c := newCache(t, newStore(clk), src, clk)
		var wg sync.WaitGroup
		for i := 0; i < 200; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := c.Token(ctx, "stampede"); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if got := src.count("stampede"); got != 1 {
			t.Fatalf("got %d mints for 200 concurrent calls, want 1", got)
		}
	})
}

func TestCacheMemory(t *testing.T) {
	cacheSuite(t, func(clk *testclock.Clock) tokens.Store { return kv.NewMemory(clk.Now) })
}

func TestCacheRedis(t *testing.T) {
	c, prefix := redistest.Client(t)
	cacheSuite(t, func(*testclock.Clock) tokens.Store {
		p := redistest.Prefix() // a fresh namespace per subtest
		_ = prefix
		t.Cleanup(func() { redistest.DeletePrefix(context.Background(), c, p) })
		return kv.NewRedis(c, p)
	})
}

// No token is in Redis in plain text, and a value moved under another
// user's key does not decrypt (the user id is the associated data).
func TestRedisHoldsOnlyCiphertext(t *testing.T) {
	rc, prefix := redistest.Client(t)
	ctx := context.Background()
	clk := testclock.New(time.Now())
	src := &fakeSource{now: clk.Now, life: time.Hour}
	c := newCache(t, kv.NewRedis(rc, prefix), src, clk)
	alice, _ := c.Token(ctx, "alice")
	bob, _ := c.Token(ctx, "bob")
	keys := redistest.Keys(ctx, rc, prefix+"tok:")
	if len(keys) != 2 {
		t.Fatalf("got keys %v, want 2", keys)
	}
	for _, k := range keys {
		v := rc.Get(ctx, k).Val()
		for _, secret := range []string{alice.Value, bob.Value, "plaintext", "alice", "bob", testSecret} {
			if strings.Contains(k, secret) || strings.Contains(v, secret) {
				t.Fatalf("Redis key %q or its value holds %q in plain text", k, secret)
			}
		}
	}
	// Copy alice's ciphertext over bob's entry: bob must not get alice's
	// token. Invalidating bob tells which key was his.
	if err := c.Invalidate(ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	left := redistest.Keys(ctx, rc, prefix+"tok:")
	if len(left) != 1 {
		t.Fatalf("after invalidating bob: got keys %v, want alice's only", left)
	}
	aliceKey, bobKey := left[0], keys[0]
	if bobKey == aliceKey {
		bobKey = keys[1]
	}
	rc.Set(ctx, bobKey, rc.Get(ctx, aliceKey).Val(), time.Hour)
	got, err := c.Token(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if got.Value == alice.Value {
		t.Fatal("bob was served alice's token from a moved cache value")
	}
}

func TestNewCacheRejectsBadKey(t *testing.T) {
	_, err := tokens.NewCache(kv.NewMemory(nil), &fakeSource{}, fixedSecret(t, "s"), tokens.CacheOptions{EncryptionKey: []byte("short")})
	if err == nil {
		t.Fatal("got nil error for a 5-byte key, want an error")
	}
}

// The two hit paths of the cache, on a real Redis: the in-process layer
// (no Redis round trip) and the shared store (one GET). Each reports the
// Redis commands it sent per lookup, read from INFO commandstats.
func BenchmarkCacheHitLocal(b *testing.B) { benchmarkHit(b, 10000) }
func BenchmarkCacheHitRedis(b *testing.B) { benchmarkHit(b, 0) }

func benchmarkHit(b *testing.B, localEntries int) {
	rc, prefix := redistest.Client(b)
	clk := testclock.New(time.Now())
	c, err := tokens.NewCache(kv.NewRedis(rc, prefix), &fakeSource{now: clk.Now, life: time.Hour}, fixedSecret(b, testSecret), tokens.CacheOptions{
		EncryptionKey: encKey, RefreshBefore: time.Minute, MaxTTL: time.Hour, LocalBytes: int64(localEntries) << 10, Now: clk.Now,
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx)
	poll.Until(b, 10*time.Second, "the token cache live (its subscription up)", c.Live)
	if _, err := c.Token(ctx, "bench-user"); err != nil {
		b.Fatal(err)
	}
	before := redisCalls(b, rc)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Token(ctx, "bench-user"); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(redisCalls(b, rc)-before)/float64(b.N), "redis-cmds/op")
}

// redisCalls is the total of INFO commandstats calls, less the INFO itself.
func redisCalls(b *testing.B, rc *redis.Client) int64 {
	info, err := rc.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total int64
	for _, line := range strings.Split(info, "\n") {
		_, rest, ok := strings.Cut(line, ":calls=")
		if !ok || strings.HasPrefix(line, "cmdstat_info:") {
			continue
		}
		n, _ := strconv.ParseInt(strings.SplitN(rest, ",", 2)[0], 10, 64)
		total += n
	}
	return total
}

// beforeLock runs hook once, just before the first SetNX of a mint lock:
// the moment another instance's mint can finish between our checks and
// our taking the lock.
type beforeLock struct {
	tokens.Store
	hook func()
}

func (s *beforeLock) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	if h := s.hook; h != nil && strings.Contains(key, "lock:") {
		s.hook = nil
		h()
	}
	return s.Store.SetNX(ctx, key, value, ttl)
}

// A mint that failed on another instance after our negative-cache check,
// but before we took the lock, is honoured under the lock: we do not call
// the token endpoint a second time inside the same backoff window.
func TestFailureJustBeforeTheLockIsHonoured(t *testing.T) {
	ctx := context.Background()
	clk := testclock.New(time.Unix(1_700_000_000, 0))
	shared := kv.NewMemory(clk.Now)
	down := &fakeSource{now: clk.Now, life: time.Hour, err: &tokens.MintError{Kind: tokens.KindUpstream, Status: 503, Err: errors.New("down")}}
	other := newCache(t, shared, down, clk)
	ours := &fakeSource{now: clk.Now, life: time.Hour, err: down.err}
	store := &beforeLock{Store: shared, hook: func() {
		if _, err := other.Token(ctx, "nina"); err == nil {
			t.Error("the other instance's mint succeeded; want it to fail")
		}
	}}
	c := newCache(t, store, ours, clk)
	_, err := c.Token(ctx, "nina")
	var me *tokens.MintError
	if !errors.As(err, &me) || me.Kind != tokens.KindUpstream {
		t.Fatalf("got %v, want the other instance's remembered failure", err)
	}
	if n := down.count("nina") + ours.count("nina"); n != 1 {
		t.Fatalf("the token endpoint was called %d times, want 1", n)
	}
}

// An invalidation that has answered wins over a read in flight: a request
// that read the token from the store just before Invalidate deleted it is
// served that token (it was in flight), but does not put it back in the
// local layer, whether the invalidation ran on the same instance or on
// another (here untracked: the in-process store, pub/sub only).
func TestInvalidateWinsOverAReadInFlight(t *testing.T) {
	for _, remote := range []bool{false, true} {
		t.Run(fmt.Sprintf("remote=%v", remote), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			clk := testclock.New(time.Unix(1_700_000_000, 0))
			shared := kv.NewMemory(clk.Now)
			src := &fakeSource{now: clk.Now, life: time.Hour}
			open := func(st tokens.Store) *tokens.Cache {
				c, err := tokens.NewCache(st, src, fixedSecret(t, testSecret), tokens.CacheOptions{
					EncryptionKey: encKey, RefreshBefore: time.Minute, MaxTTL: time.Hour, LocalBytes: 1 << 20, Now: clk.Now,
				})
				if err != nil {
					t.Fatal(err)
				}
				go c.Run(ctx)
				waitFor(t, c.Live)
				return c
			}
			store := &hookAfterGet{Store: shared}
			reader := open(store)
			revoker := reader
			if remote {
				revoker = open(shared)
			}
			old, err := reader.Token(ctx, "u")
			if err != nil {
				t.Fatal(err)
			}
			clk.Advance(11 * time.Second) // the local copy is past localMaxAge: the next read goes to the store
			store.hook.Store(func() {
				if err := revoker.Invalidate(ctx, "u"); err != nil {
					t.Error(err)
				}
			})
			if got, err := reader.Token(ctx, "u"); err != nil || got.Value != old.Value {
				t.Fatalf("the read in flight: got %q, %v; want the token it read", got.Value, err)
			}
			if got, err := reader.Token(ctx, "u"); err != nil || got.Value == old.Value {
				t.Fatalf("after Invalidate answered: got %q, %v; want a new token", got.Value, err)
			}
		})
	}
}

// hookAfterGet is a store that runs its hook (once) after its next Get.
type hookAfterGet struct {
	tokens.Store
	hook atomic.Value // func()
}

func (s *hookAfterGet) Get(ctx context.Context, key string) ([]byte, error) {
	b, err := s.Store.Get(ctx, key)
	if f, ok := s.hook.Swap(func() {}).(func()); ok {
		f()
	}
	return b, err
}
