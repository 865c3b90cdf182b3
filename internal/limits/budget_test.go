//go:build integration

package limits_test

import (
	"context"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/limits"
	"github.com/fintech-bff/bff/internal/testing/redistest"
)

// A session hammering three instances round-robin at three times its rate
// for 10 s: the instances together admit about the shared budget, within
// the stated overshoot, with Redis touched only by the exchanges.
func TestBudgetIsSharedAcrossInstances(t *testing.T) {
	ctx := context.Background()
	c, prefix := redistest.Client(t)
	counter := limits.NewCounterRedis(c, prefix, time.Minute)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	const rate, burst, n = 20.0, 40, 3
	const sync = 100 * time.Millisecond
	var instances []*limits.Budget
	for i := 0; i < n; i++ {
		b := limits.NewBudget(rate, burst, counter, clock)
		b.SetInstances(n)
		instances = append(instances, b)
	}
	admitted, sent := 0, 0
	const duration = 10 * time.Second
	step := time.Second / (3 * rate) // three times the rate
	next := now.Add(sync)
	for elapsed := time.Duration(0); elapsed < duration; elapsed += step {
		now = now.Add(step)
		if ok, _ := instances[sent%n].Allow("session-1"); ok {
			admitted++
		}
		sent++
		if !now.Before(next) {
			for _, b := range instances {
				if err := b.Sync(ctx); err != nil {
					t.Fatal(err)
				}
			}
			next = next.Add(sync)
		}
	}
	exact := int(rate*duration.Seconds()) + burst
	bound := exact + (n-1)*(burst+int(rate*sync.Seconds()))
	t.Logf("sent %d, admitted %d; one exact bucket: %d; stated bound: %d", sent, admitted, exact, bound)
	if admitted > bound {
		t.Fatalf("admitted %d, over the stated bound %d", admitted, bound)
	}
	if admitted < exact-burst {
		t.Fatalf("admitted %d, far under the budget %d", admitted, exact)
	}
	if float64(admitted) > 1.5*float64(exact) {
		t.Fatalf("admitted %d, more than 1.5x the budget %d: the instances did not share it", admitted, exact)
	}
}

// Within its share a key is never exchanged: no Redis, whatever the load.
func TestBudgetLightKeysCostNothing(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	calls := &countingCounter{}
	b := limits.NewBudget(20, 40, calls, func() time.Time { return now })
	b.SetInstances(2)
	for i := 0; i < 1000; i++ { // 1000 sessions, 5 requests a second each for 2 s
		for r := 0; r < 10; r++ {
			now = now.Add(200 * time.Millisecond / 1000)
			if ok, _ := b.Allow(string(rune('a'+i%26)) + string(rune(i))); !ok {
				t.Fatal("a light session was refused")
			}
		}
	}
	if err := b.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if calls.n != 0 {
		t.Fatalf("got %d exchanges for light sessions, want 0", calls.n)
	}
}

func TestBudgetRefusesWithRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := limits.NewBudget(2, 4, nil, func() time.Time { return now })
	for i := 0; i < 4; i++ {
		if ok, _ := b.Allow("k"); !ok {
			t.Fatalf("request %d of the burst refused", i)
		}
	}
	ok, wait := b.Allow("k")
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("got %v, %v; want refused for 500ms", ok, wait)
	}
	now = now.Add(500 * time.Millisecond)
	if ok, _ := b.Allow("k"); !ok {
		t.Fatal("refused after the refill")
	}
}

type countingCounter struct{ n int }

func (c *countingCounter) Add(_ context.Context, keys []string, n []int64) ([]int64, error) {
	c.n++
	return n, nil
}
