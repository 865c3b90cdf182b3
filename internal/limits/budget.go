package limits

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/redis/go-redis/v9"
)

// Budget is a request budget per key (a session): one token bucket of rate
// requests a second and burst, shared by every instance, with no Redis
// round trip on the request path.
//
// Each instance keeps two views of a key. The light view is this
// instance's share, rate/N and burst/N for N live instances: while every
// instance stays within its share, the instances together stay within the
// bucket, and nothing needs to be exchanged, so an ordinary session costs
// Redis nothing. When a key outgrows its share here, it turns shared: the
// full view (rate and burst, less what every instance spent) decides, and
// every sync interval the instance adds what it spent to a counter in
// Redis and takes from its view what the others added meanwhile.
//
// The budget is approximate. When a key's traffic is spread over the
// instances (a round-robin load balancer), it gets at most
// (N-1) × (burst + rate × sync) requests more than one exact bucket would
// allow, once (each instance spends what its view holds before it hears of
// the others), and then the rate: with rate 20/s, burst 40, a 100 ms sync
// and 3 instances, at most 84 extra requests, once. When one instance gets
// nearly all of a key's traffic and the others a trickle within their
// shares, the others' shares are not exchanged: the key then gets at most
// rate × (2 - 1/N) sustained.
//
// Safe for concurrent use.
type Budget struct {
	rate, burst float64
	now         func() time.Time
	counter     Counter
	epoch       time.Time    // origin of bucket.last: an age on the monotonic clock, not stretched by a wall-clock step
	instances   atomic.Int64 // N, at least 1

	// buckets are by a 64-bit hash of the key (xxhash: the same on every
	// instance, for the shared counters), and neither the map nor a
	// bucket holds a pointer: with a bucket per active session (100,000
	// and more), the garbage collector need not scan them.
	mu      sync.Mutex
	buckets map[uint64]bucket
	// shared holds the keys of the buckets that turned shared: Sync walks
	// these every interval, and all of buckets only every forgetAfter, so
	// its time under mu does not grow with the sessions in use.
	shared map[uint64]struct{}
	swept  time.Time
}

// forgetAfter is how long a refilled key stays idle before Sync forgets
// it, and how often Sync looks for such keys.
const forgetAfter = 10 * time.Second

type bucket struct {
	full, light float64 // tokens of the full view and of this instance's share
	last        int64   // the last spend, in ns since the Budget's epoch
	shared      bool
	spent       int64 // spent here since the last exchange (shared keys)
	seen        int64 // the counter's total after this instance's last add; 0: never
}

// Counter adds to shared per-key counters and returns their new totals
// (CounterRedis).
type Counter interface {
	Add(ctx context.Context, keys []string, n []int64) ([]int64, error)
}

// NewBudget returns a budget of rate requests a second with burst. shared
// may be nil: one instance, nothing exchanged.
func NewBudget(rate float64, burst int, shared Counter, now func() time.Time) *Budget {
	if now == nil {
		now = time.Now
	}
	b := &Budget{rate: rate, burst: float64(burst), now: now, counter: shared, buckets: map[uint64]bucket{}, shared: map[uint64]struct{}{}, swept: now(), epoch: now()}
	b.instances.Store(1)
	return b
}

// SetInstances sets N, the number of live instances sharing the budget.
func (b *Budget) SetInstances(n int) { b.instances.Store(int64(max(n, 1))) }

// Allow spends one request of key; when the bucket is empty it returns
// false and how long until a token is back.
func (b *Budget) Allow(key string) (bool, time.Duration) {
	h := xxhash.Sum64String(key)
	n := float64(b.instances.Load())
	b.mu.Lock()
	defer b.mu.Unlock()
	now := int64(b.now().Sub(b.epoch))
	k, ok := b.buckets[h]
	if !ok {
		k = bucket{full: b.burst, light: b.burst / n, last: now}
	}
	defer func() { b.buckets[h] = k }()
	dt := float64(now-k.last) / 1e9
	k.full = math.Min(b.burst, k.full+dt*b.rate)
	k.light = math.Min(b.burst/n, k.light+dt*b.rate/n)
	k.last = now
	if !k.shared {
		if k.light >= 1 {
			k.light--
			k.full--
			return true, 0
		}
		k.shared = true
		b.shared[h] = struct{}{}
	}
	if k.full < 1 {
		wait := time.Duration((1 - k.full) / b.rate * float64(time.Second))
		return false, max(wait, time.Millisecond)
	}
	k.full--
	k.spent++
	return true, 0
}

// Sync exchanges what shared keys spent with the other instances and
// forgets keys idle long enough to have refilled (a forgotten key starts
// again within its share). Run calls it every sync interval.
func (b *Budget) Sync(ctx context.Context) error {
	b.mu.Lock()
	now := b.now()
	if now.Sub(b.swept) >= forgetAfter {
		b.swept = now
		for h, k := range b.buckets {
			idle := now.Sub(b.epoch) - time.Duration(k.last)
			refilled := k.full+idle.Seconds()*b.rate >= b.burst
			if refilled && idle > forgetAfter && k.spent == 0 {
				delete(b.buckets, h) // idle: a fresh bucket is the same
				delete(b.shared, h)
			}
		}
	}
	var hashes []uint64
	var keys []string
	var spent []int64
	for h := range b.shared {
		if k := b.buckets[h]; k.spent > 0 && b.counter != nil {
			hashes = append(hashes, h)
			keys = append(keys, strconv.FormatUint(h, 16))
			spent = append(spent, k.spent)
		}
	}
	b.mu.Unlock()
	if len(keys) == 0 {
		return nil
	}
	totals, err := b.counter.Add(ctx, keys, spent)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, h := range hashes {
		k, ok := b.buckets[h]
		if !ok {
			continue
		}
		// The counter grew by this instance's add and whatever the others
		// spent since this instance's last add: take the latter from the
		// view too. On the first exchange the counter's past is not known
		// to belong to this bucket's life, so it is only the baseline.
		if k.seen > 0 {
			k.full -= float64(max(totals[i]-k.seen-spent[i], 0))
		}
		k.seen = totals[i]
		k.spent -= spent[i]
		b.buckets[h] = k
	}
	return nil
}

// Observer receives a Budget's events. Implementations must be cheap and
// safe for concurrent use.
type Observer interface {
	// ExchangeFailed reports an exchange with the other instances (a
	// heartbeat or a Sync) that failed; Run tries again at the next
	// interval.
	ExchangeFailed(err error)
}

type nopObserver struct{}

func (nopObserver) ExchangeFailed(error) {}

// Run calls Sync every interval, and, with a registry, keeps N current,
// until ctx ends. observe, when not nil, is told of each failed exchange.
func (b *Budget) Run(ctx context.Context, every time.Duration, reg Registry, observe Observer) {
	if observe == nil {
		observe = nopObserver{}
	}
	t := time.NewTicker(every)
	defer t.Stop()
	var beat time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if reg != nil && time.Since(beat) >= heartbeatEvery {
			beat = time.Now()
			if n, err := reg.Heartbeat(ctx); err == nil {
				b.SetInstances(n)
			} else {
				observe.ExchangeFailed(err)
			}
		}
		if err := b.Sync(ctx); err != nil {
			observe.ExchangeFailed(err)
		}
	}
}

// Registry counts the live instances sharing budgets.
type Registry interface {
	// Heartbeat marks this instance alive and returns how many are.
	Heartbeat(ctx context.Context) (int, error)
}

// heartbeatEvery is how often an instance says it is alive; an instance is
// counted for instanceTTL after its last heartbeat, so a dead one leaves N
// within that (a larger N only makes shares smaller: safe).
const (
	heartbeatEvery = 2 * time.Second
	instanceTTL    = 10 * time.Second
)

// CounterRedis keeps the shared counters and the instance registry in
// Redis: one pipeline of INCRBY and PEXPIRE per exchange, under a hash of
// each key (a session id never reaches Redis).
type CounterRedis struct {
	client redis.UniversalClient
	prefix string
	ttl    time.Duration
	id     string
}

// NewCounterRedis returns shared counters under prefix, forgotten ttl after
// their last use.
func NewCounterRedis(client redis.UniversalClient, prefix string, ttl time.Duration) *CounterRedis {
	return &CounterRedis{client: client, prefix: prefix, ttl: ttl, id: newToken()}
}

// Add implements Counter.
func (c *CounterRedis) Add(ctx context.Context, keys []string, n []int64) ([]int64, error) {
	cmds := make([]*redis.IntCmd, len(keys))
	_, err := c.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, key := range keys {
			sum := sha256.Sum256([]byte(key))
			k := c.prefix + "b:" + base64.RawURLEncoding.EncodeToString(sum[:18])
			cmds[i] = p.IncrBy(ctx, k, n[i])
			p.PExpire(ctx, k, c.ttl)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	out := make([]int64, len(keys))
	for i, cmd := range cmds {
		out[i] = cmd.Val()
	}
	return out, nil
}

// Heartbeat implements Registry with a sorted set of instance ids scored by
// their last heartbeat.
func (c *CounterRedis) Heartbeat(ctx context.Context) (int, error) {
	now := time.Now()
	key := c.prefix + "instances"
	var card *redis.IntCmd
	_, err := c.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAdd(ctx, key, redis.Z{Score: float64(now.UnixMilli()), Member: c.id})
		p.ZRemRangeByScore(ctx, key, "-inf", strconv.FormatInt(now.Add(-instanceTTL).UnixMilli(), 10))
		card = p.ZCard(ctx, key)
		p.PExpire(ctx, key, 3*instanceTTL)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return int(card.Val()), nil
}
