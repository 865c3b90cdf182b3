//go:build integration

package tokens_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/testing/poll"
	"github.com/fintech-bff/bff/internal/testing/redistest"
	"github.com/fintech-bff/bff/internal/testing/testclock"
	"github.com/fintech-bff/bff/internal/tokens"
	"github.com/fintech-bff/bff/internal/upstreamsim"
)

// cacheSuiteOnPrefixes runs cacheSuite under each prefix. Each subtest gets
// a namespace of its own below the prefix ("bff:3:"), as TestCacheRedis
// does: a subtest counts its own mints, and a refresh-ahead goroutine of
// the one before (same user, same keys) may still be writing; flushing the
// servers between subtests does not keep it out.
func cacheSuiteOnPrefixes(t *testing.T, c redis.UniversalClient) {
	for _, prefix := range redistest.Prefixes {
		t.Run(fmt.Sprintf("prefix %q", prefix), func(t *testing.T) {
			n := 0
			cacheSuite(t, func(*testclock.Clock) tokens.Store {
				n++
				return kv.NewRedis(c, fmt.Sprintf("%s%d:", prefix, n))
			})
		})
	}
}

func TestCacheRedisCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	cacheSuiteOnPrefixes(t, cl.UniversalClient(t))
}

func TestCacheRedisSentinel(t *testing.T) {
	t.Parallel()
	s := redistest.StartSentinel(t)
	cacheSuiteOnPrefixes(t, s.UniversalClient(t))
}

// Four instances on one Redis Cluster: the lock, the cached token and the
// failure marker of a user share a slot, and pub/sub reaches every
// instance whichever master it is connected to, so a stampede mints once.
func TestStampedeAcrossInstancesOnCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	store := kv.NewRedis(cl.UniversalClient(t), "bff:")
	c := newClusterOn(t, store, 4, upstreamsim.Options{TokenTTL: 10 * time.Minute}, nil)

	seen := c.stampede(t, "fresh-user", 1000)
	if got := c.sim.Mints("fresh-user"); got != 1 || len(seen) != 1 {
		t.Fatalf("got %d mints and %d distinct tokens for 1000 concurrent calls on 4 instances, want 1 and 1", got, len(seen))
	}
	c.sim.Advance(20 * time.Minute) // past the cached life: every instance misses at once
	seen = c.stampede(t, "fresh-user", 1000)
	if got := c.sim.Mints("fresh-user"); got != 2 || len(seen) != 1 {
		t.Fatalf("after expiry: got %d mints and %d distinct tokens, want 2 and 1", got, len(seen))
	}
	if n := c.observer.timeouts.Load(); n != 0 {
		t.Fatalf("got %d lock-wait timeouts, want 0", n)
	}

	ctx := context.Background()
	old, _ := c.instances[1].Token(ctx, "fresh-user") // now in instance 1's local layer
	if err := c.instances[0].Invalidate(ctx, "fresh-user"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		got, err := c.instances[1].Token(ctx, "fresh-user")
		return err == nil && got.Value != old.Value
	})
}

// When the Sentinel fails the master over, the same caches on the same
// client keep serving the tokens cached before (no re-mint), cache new
// ones, fail with ErrStoreUnavailable (and never mint) in between, and get
// their invalidation subscription back.
func TestTokensSurviveSentinelFailover(t *testing.T) {
	t.Parallel()
	s := redistest.StartSentinel(t)
	store := kv.NewRedis(s.UniversalClient(t), "bff:")
	src := &fakeSource{now: time.Now, life: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var instances []*tokens.Cache
	for range 2 {
		c, err := tokens.NewCache(store, src, fixedSecret(t, testSecret), tokens.CacheOptions{
			EncryptionKey: encKey, RefreshBefore: time.Minute, MaxTTL: time.Hour, LocalBytes: 1 << 20, MintTimeout: 5 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		go c.Run(ctx)
		instances = append(instances, c)
	}
	a, b := instances[0], instances[1]
	waitFor(t, func() bool { return a.Live() && b.Live() })

	users := make([]string, 10)
	before := map[string]string{}
	for i := range users {
		users[i] = fmt.Sprintf("user-%d", i)
		tok, err := a.Token(ctx, users[i])
		if err != nil {
			t.Fatal(err)
		}
		before[users[i]] = tok.Value
	}
	s.WaitReplicated(t)

	s.KillMaster(t)
	killed := time.Now()
	outages := 0
	var err error
	if !poll.Within(30*time.Second, func() bool {
		actx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err = a.Token(actx, "after-failover") // a read, a lock, a mint and a write
		cancel()
		if err == nil {
			return true
		}
		if !errors.Is(err, tokens.ErrStoreUnavailable) {
			t.Fatalf("during the failover: got %v, want ErrStoreUnavailable", err)
		}
		outages++
		return false
	}) {
		t.Fatalf("the cache did not recover within 30s of the master's death: %v\n%s", err, s.Logs())
	}
	recovered := time.Since(killed)
	if !poll.Within(30*time.Second-time.Since(killed), func() bool { return a.Live() && b.Live() }) {
		t.Fatalf("the invalidation subscriptions did not come back within 30s\n%s", s.Logs())
	}
	resubscribed := time.Since(killed)
	promoted := s.WaitFailover(t)
	t.Logf("failover: tokens readable and writable again %v after the master was killed (%d failed attempts), subscriptions live again after %v; promotion confirmed at %v",
		recovered, outages, resubscribed, promoted)

	for _, u := range users {
		for name, in := range map[string]*tokens.Cache{"a": a, "b": b} {
			if got, err := in.Token(ctx, u); err != nil || got.Value != before[u] {
				t.Fatalf("instance %s, %s's token cached before the failover: got %q, %v; want %q", name, u, got.Value, err, before[u])
			}
		}
		if n := src.count(u); n != 1 {
			t.Fatalf("%s: got %d mints, want 1 (the cached token was lost)", u, n)
		}
	}
	if n := src.count("after-failover"); n != 1 {
		t.Fatalf("after-failover: got %d mints, want 1", n)
	}

	// Pub/sub works again: an invalidation on a reaches b's local layer.
	if err := a.Invalidate(ctx, users[0]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		got, err := b.Token(ctx, users[0])
		return err == nil && got.Value != before[users[0]]
	})
}
