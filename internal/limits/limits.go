// Package limits holds the BFF's shared request budgets: a rate per key
// (GCRA in one Lua script on Redis's clock, exact across instances at one
// round trip a decision) and a once-per-interval hold per key (the credit
// guard of the 20-credit refresh). Both have an in-process twin for the
// single-instance development store. Plain Go, no HTTP framework.
//
// The rate was github.com/go-redis/redis_rate/v10, whose keys always begin
// with its own "rate:", outside redis.key_prefix: under a Redis ACL user
// restricted to the prefix every decision failed, and the per-address
// budgets let every request through (TestKeysStayUnderThePrefix;
// docs/operations.md, "Sharing a Redis").
package limits

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Decision is the answer to "may this key act now?".
type Decision struct {
	Allowed    bool
	RetryAfter time.Duration // when refused: how long until it would be allowed
	// Token identifies a hold, for Release; "" when refused.
	Token string
}

// ErrUnavailable wraps a store failure.
var ErrUnavailable = errors.New("limits: store unavailable")

// Redis keeps the budgets in Redis, shared by every instance. Safe for
// concurrent use.
type Redis struct {
	client redis.UniversalClient
	prefix string
}

// NewRedis returns budgets kept in Redis under prefix.
func NewRedis(client redis.UniversalClient, prefix string) *Redis {
	return &Redis{client: client, prefix: prefix}
}

// Allow spends one of perMinute requests a minute (burst perMinute) of key.
func (r *Redis) Allow(ctx context.Context, key string, perMinute int) (Decision, error) {
	return r.AllowPer(ctx, key, perMinute, time.Minute)
}

// AllowPer spends one of n requests per period (burst n) of key.
func (r *Redis) AllowPer(ctx context.Context, key string, n int, per time.Duration) (Decision, error) {
	interval := max((per / time.Duration(n)).Microseconds(), 1)
	wait, err := gcraScript.Run(ctx, r.client, []string{r.prefix + key}, interval, n).Int64()
	if err != nil {
		return Decision{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if wait > 0 {
		return Decision{RetryAfter: time.Duration(wait) * time.Microsecond}, nil
	}
	return Decision{Allowed: true}, nil
}

// gcraScript is Local.AllowPer on Redis's clock, in microseconds: KEYS[1]
// holds the theoretical arrival time, ARGV[1] is the emission interval and
// ARGV[2] the burst. It returns 0 when allowed, else the wait. The numbers
// stay below 2^53, exact in Lua; redis.call writes them in full.
var gcraScript = redis.NewScript(`
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tat = tonumber(redis.call("GET", KEYS[1]) or now)
if tat < now then tat = now end
local allow_at = tat + interval - interval * tonumber(ARGV[2])
if allow_at > now then return allow_at - now end
redis.call("SET", KEYS[1], tat + interval, "PX", math.ceil((tat + interval - now) / 1000))
return 0
`)

// Hold takes key for every, unless it is held already: at most one holder
// per interval across instances. The refusal says how long is left.
func (r *Redis) Hold(ctx context.Context, key string, every time.Duration) (Decision, error) {
	token := newToken()
	n, err := holdScript.Run(ctx, r.client, []string{r.prefix + key}, token, every.Milliseconds()).Int64()
	if err != nil {
		return Decision{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if n == 0 {
		return Decision{Allowed: true, Token: token}, nil
	}
	return Decision{RetryAfter: time.Duration(n) * time.Millisecond}, nil
}

// Release gives a hold back (the held action did not happen), if it is
// still the caller's.
func (r *Redis) Release(ctx context.Context, key, token string) error {
	if err := releaseScript.Run(ctx, r.client, []string{r.prefix + key}, token).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

// holdScript sets KEYS[1] to ARGV[1] for ARGV[2] ms when absent and
// returns 0, else the milliseconds left (at least 1).
var holdScript = redis.NewScript(`
if redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then return 0 end
local left = redis.call("PTTL", KEYS[1])
if left < 1 then return 1 end
return left
`)

var releaseScript = redis.NewScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end
return 0
`)

// Local keeps the budgets in this process, for the single-instance
// development store. Safe for concurrent use.
type Local struct {
	mu    sync.Mutex
	now   func() time.Time
	tat   map[string]time.Time // GCRA theoretical arrival time per key
	holds map[string]localHold
}

type localHold struct {
	token string
	until time.Time
}

// NewLocal returns in-process budgets; now is the clock (nil: time.Now).
func NewLocal(now func() time.Time) *Local {
	if now == nil {
		now = time.Now
	}
	return &Local{now: now, tat: map[string]time.Time{}, holds: map[string]localHold{}}
}

// Allow is Redis.Allow in process.
func (l *Local) Allow(ctx context.Context, key string, perMinute int) (Decision, error) {
	return l.AllowPer(ctx, key, perMinute, time.Minute)
}

// AllowPer is Redis.AllowPer in process: GCRA with emission interval
// per/n and burst n.
func (l *Local) AllowPer(_ context.Context, key string, n int, per time.Duration) (Decision, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	interval := per / time.Duration(n)
	burst := time.Duration(n) * interval
	tat := l.tat[key]
	if tat.Before(now) {
		tat = now
	}
	next := tat.Add(interval)
	if allowAt := next.Add(-burst); allowAt.After(now) {
		return Decision{RetryAfter: allowAt.Sub(now)}, nil
	}
	l.tat[key] = next
	l.pruneLocked(now)
	return Decision{Allowed: true}, nil
}

// Hold is Redis.Hold in process.
func (l *Local) Hold(_ context.Context, key string, every time.Duration) (Decision, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if h, ok := l.holds[key]; ok && now.Before(h.until) {
		return Decision{RetryAfter: h.until.Sub(now)}, nil
	}
	token := newToken()
	l.holds[key] = localHold{token: token, until: now.Add(every)}
	l.pruneLocked(now)
	return Decision{Allowed: true, Token: token}, nil
}

// Release is Redis.Release in process.
func (l *Local) Release(_ context.Context, key, token string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h, ok := l.holds[key]; ok && h.token == token {
		delete(l.holds, key)
	}
	return nil
}

// pruneLocked drops idle entries once the maps grow, so a flood of
// addresses cannot grow them without bound.
func (l *Local) pruneLocked(now time.Time) {
	if len(l.tat)+len(l.holds) < 10000 {
		return
	}
	for k, t := range l.tat {
		if t.Before(now) {
			delete(l.tat, k)
		}
	}
	for k, h := range l.holds {
		if !now.Before(h.until) {
			delete(l.holds, k)
		}
	}
}

func newToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}
