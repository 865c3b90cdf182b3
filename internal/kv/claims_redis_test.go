//go:build integration

package kv_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/testing/poll"
	"github.com/fintech-bff/bff/internal/testing/redistest"
)

// claimsSuite is what Claims must do on every topology: rc is a client of
// it and prefix a key prefix of the test's own.
func claimsSuite(t *testing.T, rc redis.UniversalClient, prefix string) {
	ctx := context.Background()
	t.Run("a batch gives each caller its own result", func(t *testing.T) {
		p := fmt.Sprintf("%sbatch%d:", prefix, rand.Uint64())
		taken := kv.NewRedis(rc, p)
		if ok, err := taken.SetNX(ctx, "taken", []byte("someone-else"), time.Minute); !ok || err != nil {
			t.Fatalf("setnx taken: got %v, %v", ok, err)
		}
		g := newGate(rc)
		c := kv.NewClaims(kv.NewRedis(rc, p), 0)
		// Keys spread over a Cluster's slots, one claimed before, and one
		// claimed three times in the batch.
		keys := []string{"k1", "dup", "k2", "taken", "dup", "k3", "k4", "dup", "k5"}
		lead, got := claimHeld(t, c, g, "first", keys)
		if !lead.ok || lead.err != nil {
			t.Errorf("the first claim: got %v, %v; want true", lead.ok, lead.err)
		}
		dups := 0
		for i, k := range keys {
			o := got[i]
			if o.err != nil {
				t.Errorf("claim %d of %s: got %v", i, k, o.err)
				continue
			}
			switch k {
			case "dup":
				if o.ok {
					dups++
				}
			case "taken":
				if o.ok {
					t.Errorf("claim of a taken key: got true, want false")
				}
			default:
				if !o.ok {
					t.Errorf("claim of %s: got false, want true", k)
				}
			}
		}
		if dups != 1 {
			t.Errorf("three claims of dup in one batch: got %d won, want 1", dups)
		}
		// One pipeline of them all (a Cluster's is split by node within it).
		if sent := g.sent(); len(sent) != 1 || sent[0] != len(keys) {
			t.Errorf("got pipelines of %v claims, want one of %d", sent, len(keys))
		}
		if !c.Idle() {
			t.Errorf("after: got %d queued or a batch being sent, want none", c.Queued())
		}
	})
	t.Run("keys, value and ttl are SetNX's", func(t *testing.T) {
		p := fmt.Sprintf("%sttl%d:", prefix, rand.Uint64())
		c := kv.NewClaims(kv.NewRedis(rc, p), 0)
		if ok, err := c.SetNX(ctx, "dpop:jti:x", []byte("mine"), 1500*time.Millisecond); !ok || err != nil {
			t.Fatalf("got %v, %v; want true", ok, err)
		}
		if v, err := rc.Get(ctx, p+"dpop:jti:x").Result(); v != "mine" || err != nil {
			t.Fatalf("got %q, %v at %sdpop:jti:x; want mine", v, err, p)
		}
		if ttl := rc.PTTL(ctx, p+"dpop:jti:x").Val(); ttl <= time.Second || ttl > 1500*time.Millisecond {
			t.Fatalf("got ttl %v, want about 1.5s", ttl)
		}
		// SetNX's re-send rule: the key holding the caller's own value is
		// its claim; another value is not.
		if ok, err := c.SetNX(ctx, "dpop:jti:x", []byte("mine"), time.Minute); !ok || err != nil {
			t.Fatalf("the same value again: got %v, %v; want true", ok, err)
		}
		if ok, err := c.SetNX(ctx, "dpop:jti:x", []byte("other"), time.Minute); ok || err != nil {
			t.Fatalf("another value: got %v, %v; want false", ok, err)
		}
	})
	t.Run("many goroutines claiming one key: exactly one wins", func(t *testing.T) {
		p := fmt.Sprintf("%sone%d:", prefix, rand.Uint64())
		// Two Claims on one prefix: two instances sharing the store.
		a, b := kv.NewClaims(kv.NewRedis(rc, p), 0), kv.NewClaims(kv.NewRedis(rc, p), 8)
		for round := range 20 {
			key := fmt.Sprintf("jti-%d", round)
			var won, failed atomic.Int64
			var wg sync.WaitGroup
			for i := range 64 {
				c := a
				if i%2 == 1 {
					c = b
				}
				wg.Go(func() {
					ok, err := c.SetNX(ctx, key, fmt.Appendf(nil, "caller-%d", i), time.Minute)
					if err != nil {
						failed.Add(1)
					}
					if ok {
						won.Add(1)
					}
				})
			}
			wg.Wait()
			if won.Load() != 1 || failed.Load() != 0 {
				t.Fatalf("round %d: got %d winners and %d errors, want 1 and 0", round, won.Load(), failed.Load())
			}
		}
	})
}

func TestClaims(t *testing.T) {
	rc, prefix := redistest.Client(t)
	claimsSuite(t, rc, prefix)
}

func TestClaimsCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	rc := cl.UniversalClient(t)
	claimsSuite(t, rc, "bff:")
	// The batches' keys were spread over every master: the pipeline was
	// split by node, not sent to one.
	ctx := context.Background()
	c := kv.NewClaims(kv.NewRedis(rc, "spread:"), 0)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := range 200 {
		wg.Go(func() {
			if ok, err := c.SetNX(ctx, fmt.Sprintf("k%d", i), []byte("v"), time.Minute); !ok || err != nil {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("got %d of 200 claims of new keys failed, want none", failed.Load())
	}
	for _, n := range cl.Nodes {
		nc := n.Client()
		keys := redistest.Keys(ctx, nc, "spread:")
		_ = nc.Close()
		if len(keys) == 0 {
			t.Fatalf("got no key on %s, want keys on every master", n.Name)
		}
	}
}

// A caller whose context ends while its claim waits for the next batch
// returns at once with its context's error, and the others' claims go on.
func TestClaimsCanceledCallerDoesNotBlockOthers(t *testing.T) {
	rc, prefix := redistest.Client(t)
	g := newGate(rc)
	c := kv.NewClaims(kv.NewRedis(rc, prefix), 0)
	ctx := context.Background()
	var wg sync.WaitGroup
	var lead outcome
	wg.Go(func() { lead.ok, lead.err = c.SetNX(ctx, "first", []byte("v"), time.Minute) })
	<-g.entered
	cctx, cancel := context.WithCancel(ctx)
	canceled := make(chan outcome, 1)
	go func() {
		ok, err := c.SetNX(cctx, "canceled", []byte("v"), time.Minute)
		canceled <- outcome{ok, err}
	}()
	others := make([]outcome, 3)
	for i := range others {
		wg.Go(func() {
			others[i].ok, others[i].err = c.SetNX(ctx, fmt.Sprintf("other-%d", i), []byte("v"), time.Minute)
		})
	}
	poll.Until(t, 10*time.Second, "every claim waiting for the next batch", func() bool { return c.Queued() == 4 })
	cancel()
	select {
	case o := <-canceled:
		if o.ok || !errors.Is(o.err, context.Canceled) || !errors.Is(o.err, kv.ErrUnavailable) {
			t.Fatalf("the canceled claim: got %v, %v; want false, context.Canceled and ErrUnavailable", o.ok, o.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the canceled caller still waits while the round trip before its batch is held")
	}
	close(g.release)
	wg.Wait()
	for i, o := range append(others, lead) {
		if !o.ok || o.err != nil {
			t.Errorf("claim %d: got %v, %v; want true", i, o.ok, o.err)
		}
	}
	if n := len(redistest.Keys(ctx, rc, prefix+"canceled")); n != 0 {
		t.Errorf("the canceled claim, which left before its batch, was made (%d keys)", n)
	}
	if !c.Idle() {
		t.Errorf("after: got %d queued or a batch being sent, want none", c.Queued())
	}
}

// Callers whose contexts end at any moment (while queued, when told to
// send the next batch, while theirs is sent) never leave the others
// waiting, and a claim reported won was made exactly once per key.
func TestClaimsCancellationsNeverStall(t *testing.T) {
	rc, prefix := redistest.Client(t)
	c := kv.NewClaims(kv.NewRedis(rc, prefix), 4)
	seed := rand.Uint64()
	r := rand.New(rand.NewPCG(seed, 0))
	var mu sync.Mutex
	delays := make([]time.Duration, 2000)
	for i := range delays {
		delays[i] = time.Duration(r.IntN(400)) * time.Microsecond
	}
	won := make(map[string]int)
	var wg sync.WaitGroup
	for i := range delays {
		key := fmt.Sprintf("k%d", i%100)
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), delays[i])
			defer cancel()
			ok, err := c.SetNX(ctx, key, fmt.Appendf(nil, "caller-%d", i), time.Minute)
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("caller %d: got %v, want nil or its deadline", i, err)
			}
			if ok {
				mu.Lock()
				won[key]++
				mu.Unlock()
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("seed %d: callers still waiting after 30s (%d queued)", seed, c.Queued())
	}
	for k, n := range won {
		if n != 1 {
			t.Errorf("seed %d: %s won by %d callers, want 1", seed, k, n)
		}
	}
	if !c.Idle() {
		t.Errorf("seed %d: after: got %d queued or a batch being sent, want none", seed, c.Queued())
	}
}
