package tokens

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/telemetry"
)

// ErrLockTimeout means another instance held the user's mint lock for
// longer than a mint may take and no token appeared.
var ErrLockTimeout = errors.New("tokens: timed out waiting for another instance's mint")

// errSecretChanged makes Token start over under a new secret generation.
var errSecretChanged = errors.New("tokens: client secret changed")

// mintShared gets a token for a user whose cache is empty, with at most one
// mint in flight across every instance. The caller holds the in-process
// singleflight for k.tok.
func (c *Cache) mintShared(ctx context.Context, userID string, gen *string, k keys) (Token, error) {
	wake := c.waiters.add(k.tok)
	defer c.waiters.remove(k.tok, wake)
	// The deadline, the lock waits and the latencies reported to Observe
	// (here and in mintLocked, refreshAhead) are in real time, not on
	// CacheOptions.Now: they bound real waits (timers, a mint under
	// context.WithTimeout) for a lock whose TTL Redis counts in real time,
	// while Now is the clock token lifetimes are measured on. A test clock
	// that is frozen or moved by hours must neither keep a waiter here for
	// ever nor end its wait at once.
	deadline := time.Now().Add(c.mintTTL + 2*time.Second)
	var waitStart time.Time
	// The span covers the wait for the cross-instance lock, until this
	// instance holds it or another's result is found.
	_, span := telemetry.Start(ctx, tracer, "tokens.lock")
	defer span.End()
	for {
		// Check again: another instance may have finished since our read.
		if v, ok, err := c.recheck(ctx, gen, userID, k); err != nil || ok {
			return v.tok, err
		}
		if err := c.recentFailure(ctx, k.neg); err != nil {
			return Token{}, err
		}
		fence := make([]byte, 16)
		_, _ = rand.Read(fence)
		got, err := c.store.SetNX(ctx, k.lock, fence, c.mintTTL+time.Second)
		if err != nil {
			return Token{}, err
		}
		if got {
			span.End()
			return c.mintLocked(ctx, userID, gen, k, fence)
		}
		if waitStart.IsZero() {
			waitStart = time.Now()
		}
		t := time.NewTimer(pollEvery)
		select {
		case <-wake:
			t.Stop()
			c.observe.LockWait(WaitNotified, time.Since(waitStart))
		case <-t.C:
			c.observe.LockWait(WaitPolled, time.Since(waitStart))
		}
		if time.Now().After(deadline) {
			c.observe.LockWait(WaitTimeout, time.Since(waitStart))
			return Token{}, ErrLockTimeout
		}
	}
}

// mintLocked mints while holding the user's lock, stores the result (or the
// failure, briefly) and wakes every waiter on every instance.
func (c *Cache) mintLocked(ctx context.Context, userID string, gen *string, k keys, fence []byte) (Token, error) {
	ctx, span := telemetry.Start(ctx, tracer, "tokens.mint")
	defer span.End()
	defer func() { _, _ = c.store.DelIf(ctx, k.lock, fence) }()
	// Check again under the lock: the previous holder may have stored a
	// token, or failed and left a negative entry, between our last reads
	// and our taking the lock. Without the second check two instances
	// could each mint once per negative window.
	if v, ok, err := c.recheck(ctx, gen, userID, k); err != nil || ok {
		return v.tok, err
	}
	if err := c.recentFailure(ctx, k.neg); err != nil {
		return Token{}, err
	}
	start := time.Now()
	mctx, cancel := context.WithTimeout(ctx, c.mintTTL)
	tok, err := c.source.Token(mctx, userID)
	cancel()
	c.observe.Minted(err, time.Since(start))
	if err != nil {
		var me *MintError
		if errors.As(err, &me) && me.Kind == KindAuth {
			if changed, _ := c.secret.Rotate(ctx); changed {
				c.log.Warn("the token endpoint refused the client secret; a new one was found in client_secret_file and is used from now on")
				return Token{}, errSecretChanged
			}
			if c.alerted.CompareAndSwap(false, true) {
				c.log.Error("ALERT: the upstream token endpoint refuses the client credentials; every API call fails with 502 UPSTREAM_AUTH_FAILED until upstream.client_id / the client secret are fixed",
					slog.Int("status", me.Status))
			}
		}
		c.rememberFailure(ctx, k.neg, err)
		_ = c.publish(ctx, "neg", k.tok)
		return Token{}, err
	}
	if c.alerted.CompareAndSwap(true, false) {
		c.log.Info("the upstream token endpoint accepts the client credentials again")
	}
	if err := c.put(ctx, gen, userID, k.tok, tok); err != nil {
		return Token{}, err
	}
	return tok, nil
}

// put caches tok when its lifetime allows, and tells the other instances.
// A token that expires within RefreshBefore is returned but not cached.
func (c *Cache) put(ctx context.Context, gen *string, userID, key string, tok Token) error {
	now := c.now()
	ttl := tok.Expiry.Sub(now) - c.before
	if ttl > c.maxTTL {
		ttl = c.maxTTL
	}
	if ttl <= 0 {
		return nil
	}
	v := stored{tok: tok, until: now.Add(ttl), refreshAt: now.Add(ttl - ttl/refreshShare), read: c.local.BeginRead(key)}
	if err := c.store.Set(ctx, key, c.seal(v, userID), ttl); err != nil {
		return err
	}
	// Kept when Redis's report of this very write comes back, so the next
	// request does not read back the token just written.
	c.local.KeepOwnWrite(key, newLocalEntry(v), v.read)
	return c.publish(ctx, "set", key)
}

// refreshAhead mints a new token in the background, once per user across
// every instance (whoever takes the lock), while the current one is served.
// It runs under c.ahead: none starts after Run's end, and Run waits for
// those running.
func (c *Cache) refreshAhead(userID string, gen *string, key string) {
	if _, busy := c.refresh.LoadOrStore(key, struct{}{}); busy {
		return
	}
	started := c.ahead.start(func(actx context.Context) {
		defer c.refresh.Delete(key)
		ctx, cancel := context.WithTimeout(actx, c.mintTTL+2*time.Second)
		defer cancel()
		k := c.keys(userID, *gen)
		fence := make([]byte, 16)
		_, _ = rand.Read(fence)
		got, err := c.store.SetNX(ctx, k.lock, fence, c.mintTTL+time.Second)
		if err != nil || !got {
			return // another instance is minting
		}
		defer func() {
			// Released even when Run's end cancelled the mint: the lock
			// would otherwise hold other instances' refreshes off until
			// it expires.
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			defer cancel()
			_, _ = c.store.DelIf(uctx, k.lock, fence)
		}()
		// Check again under the lock: another instance may have refreshed.
		if v, ok, _ := c.recheck(ctx, gen, userID, k); ok && c.now().Before(v.refreshAt) {
			return
		}
		start := time.Now()
		tok, err := c.source.Token(ctx, userID)
		c.observe.Minted(err, time.Since(start))
		c.observe.Refreshed(err)
		if err != nil {
			return // the current token is still served; a later request retries
		}
		_ = c.put(ctx, gen, userID, k.tok, tok)
	})
	if !started {
		c.refresh.Delete(key)
	}
}

// ahead are the cache's background refreshes: start runs one unless stop
// has been called; stop cancels those running and waits for each.
type ahead struct {
	ctx     context.Context
	cancel  context.CancelFunc
	mu      sync.Mutex
	stopped bool
	running sync.WaitGroup
}

func (a *ahead) start(f func(ctx context.Context)) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopped {
		return false
	}
	a.running.Go(func() { f(a.ctx) })
	return true
}

func (a *ahead) stop() {
	a.mu.Lock()
	a.stopped = true
	a.mu.Unlock()
	a.cancel()
	a.running.Wait()
}

// recentFailure returns the remembered failure of a mint under this key in
// the last negativeTTL, cluster-wide, or nil.
func (c *Cache) recentFailure(ctx context.Context, negKey string) error {
	b, err := c.store.Get(ctx, negKey)
	if errors.Is(err, kv.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(b) != 3 {
		return nil
	}
	return &MintError{Kind: Kind(b[0]), Status: int(binary.BigEndian.Uint16(b[1:])),
		Err: errors.New("a mint for this user failed moments ago; backing off")}
}

func (c *Cache) rememberFailure(ctx context.Context, negKey string, err error) {
	kind, status := KindUpstream, 0
	var me *MintError
	if errors.As(err, &me) {
		kind, status = me.Kind, me.Status
	}
	b := []byte{byte(kind), 0, 0}
	binary.BigEndian.PutUint16(b[1:], uint16(status))
	_ = c.store.Set(ctx, negKey, b, negativeTTL)
}
