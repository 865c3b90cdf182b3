package tokens

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/lru"
	"github.com/fintech-bff/bff/internal/seal"
)

// ErrStoreUnavailable wraps failures to reach the shared store.
var ErrStoreUnavailable = kv.ErrUnavailable

// ErrLockTimeout means another instance held the user's mint lock for
// longer than a mint may take and no token appeared.
var ErrLockTimeout = errors.New("tokens: timed out waiting for another instance's mint")

// errSecretChanged makes Token start over under a new secret generation.
var errSecretChanged = errors.New("tokens: client secret changed")

// Store is what the token cache needs of the shared store.
type Store interface {
	Get(ctx context.Context, key string) ([]byte, error)
	Set(ctx context.Context, key string, value []byte, ttl time.Duration) error
	Del(ctx context.Context, key string) error
	SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error)
	DelIf(ctx context.Context, key string, prefix []byte) (bool, error)
	Publish(ctx context.Context, channel, msg string) error
	Subscribe(ctx context.Context, channel string, onMessage func(string), onReady func(bool))
}

var (
	_ Store = (*kv.Redis)(nil)
	_ Store = (*kv.Memory)(nil)
)

// channel carries the cache's events between instances.
const channel = "tokens:events"

// Timing rules of the cache.
const (
	// localMaxAge bounds how long this process serves a token without
	// reading the shared store, whatever pub/sub says (a safety net), and
	// so how long an idle user's token stays in the heap.
	localMaxAge = 10 * time.Second
	// pollEvery is how often a waiter re-reads the store should a
	// notification be lost.
	pollEvery = 250 * time.Millisecond
	// negativeTTL is how long a failed mint is remembered, per user and
	// cluster-wide, so a broken credential or a down token endpoint is not
	// hammered: at most about one mint attempt per user per negativeTTL.
	negativeTTL = time.Second
	// refreshShare: a token is refreshed in the background once this share
	// of its cached life is left.
	refreshShare = 5 // the last fifth
	// pruneEvery is how often unservable local entries are dropped.
	pruneEvery = 2 * time.Second
)

// CacheOptions configures a Cache.
type CacheOptions struct {
	// EncryptionKey is the 32-byte AES-256-GCM key tokens are stored under.
	EncryptionKey []byte
	// RefreshBefore: a token is not served this close to its expiry.
	RefreshBefore time.Duration
	// MaxTTL caps how long any token is cached.
	MaxTTL time.Duration
	// LocalEntries bounds the in-process layer; 0 disables it.
	LocalEntries int
	// MintTimeout bounds one mint; the cross-instance lock lives a little
	// longer. Default 15s.
	MintTimeout time.Duration
	// Reload re-reads the client secret (from its file) and reports whether
	// it changed. It is called when the token endpoint refuses the
	// credentials and when another instance announces a rotation, so a
	// secret file replaced before SIGHUP is picked up without a lost request.
	Reload func() (secret string, changed bool)
	Now    func() time.Time
	// Observe, when set, is told of lookups, mints and lock waits (metrics).
	Observe Observer
	Logger  *slog.Logger
}

// Observer receives the cache's events. Implementations must be cheap and
// safe for concurrent use.
type Observer interface {
	// CacheLookup: result is "local", "redis" (hits of either layer) or "miss".
	CacheLookup(result string)
	Minted(err error, took time.Duration)
	// LockWait: result is "notified", "polled" or "timeout".
	LockWait(result string, took time.Duration)
	// Refreshed reports a background refresh-ahead mint.
	Refreshed(err error)
}

type nopObserver struct{}

func (nopObserver) CacheLookup(string)             {}
func (nopObserver) Minted(error, time.Duration)    {}
func (nopObserver) LockWait(string, time.Duration) {}
func (nopObserver) Refreshed(error)                {}

// Cache is the token manager: each user's upstream token from an
// in-process LRU, else the shared store (AES-256-GCM encrypted, the user id
// as associated data), else minted through its Source — at most one mint
// per user at a time across every instance (singleflight in process, a
// fenced SET NX PX lock in the store, pub/sub to wake waiters). Tokens near
// expiry are refreshed in the background by one instance. It is safe for
// concurrent use; Run must be running for the local layer to be used.
type Cache struct {
	store   Store
	source  Source
	box     *seal.Box
	macKey  []byte
	before  time.Duration
	maxTTL  time.Duration
	mintTTL time.Duration
	now     func() time.Time
	observe Observer
	log     *slog.Logger
	reload  func() (string, bool)
	id      string

	group   singleflight.Group
	gen     atomic.Pointer[string]
	local   *lru.Cache[localKey, localEntry]
	live    atomic.Bool // the invalidation subscription is up
	waiters waiters
	alerted atomic.Bool
	refresh sync.Map // store key -> struct{}: refresh-ahead in flight here
}

var _ Source = (*Cache)(nil)

// NewCache returns a cache in front of source. secret is the current client
// secret: its keyed fingerprint scopes every key, so tokens minted under an
// older secret are never served once SetSecret is given a new one.
func NewCache(store Store, source Source, secret string, o CacheOptions) (*Cache, error) {
	box, err := seal.New(o.EncryptionKey)
	if err != nil {
		return nil, fmt.Errorf("tokens: encryption key: %w", err)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Observe == nil {
		o.Observe = nopObserver{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MintTimeout <= 0 {
		o.MintTimeout = 15 * time.Second
	}
	if o.Reload == nil {
		o.Reload = func() (string, bool) { return "", false }
	}
	mk := hmac.New(sha256.New, o.EncryptionKey)
	mk.Write([]byte("bff token cache key derivation"))
	var id [8]byte
	_, _ = rand.Read(id[:])
	c := &Cache{
		store: store, source: source, box: box, macKey: mk.Sum(nil),
		before: o.RefreshBefore, maxTTL: o.MaxTTL, mintTTL: o.MintTimeout, now: o.Now,
		observe: o.Observe, log: o.Logger, reload: o.Reload, id: hex.EncodeToString(id[:]),
		local: lru.New[localKey, localEntry](o.LocalEntries),
	}
	c.SetSecret(secret)
	return c, nil
}

// Run keeps the invalidation subscription until ctx ends: messages from
// other instances drop local entries and wake waiters. While it is down
// the local layer is bypassed (and cleared), never trusted.
func (c *Cache) Run(ctx context.Context) {
	// Entries that would not be served any more (older than localMaxAge or
	// past their serve-until time) go, so the heap holds active users only.
	go c.local.PruneEvery(ctx, pruneEvery, c.now, func(now time.Time, e localEntry) bool {
		return now.Sub(e.added) >= localMaxAge || !now.Before(e.until)
	})
	c.store.Subscribe(ctx, channel, c.onMessage, func(up bool) {
		c.live.Store(false)
		c.local.Clear()
		c.live.Store(up)
	})
	c.live.Store(false)
}

// Live reports whether the invalidation subscription is up, so the local
// layer is in use.
func (c *Cache) Live() bool { return c.live.Load() }

// SetSecret switches to a new client secret generation. Every instance
// given the same secret computes the same generation, and none serves a
// token minted under another.
func (c *Cache) SetSecret(secret string) {
	g := c.fingerprint("secret", secret, 12)
	if old := c.gen.Load(); old != nil && *old == g {
		return
	}
	c.gen.Store(&g)
	c.local.Clear()
}

// AnnounceRotation tells every other instance to re-read its secret.
func (c *Cache) AnnounceRotation(ctx context.Context) error {
	return c.publish(ctx, "rot", "-")
}

func (c *Cache) fingerprint(label, v string, n int) string {
	m := hmac.New(sha256.New, c.macKey)
	m.Write([]byte(label))
	m.Write([]byte{0})
	m.Write([]byte(v))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:n])
}

// tokenFP is the fingerprint stored in front of each encrypted value, so a
// rejected token can be dropped only if it is still the cached one.
func (c *Cache) tokenFP(token string) []byte {
	m := hmac.New(sha256.New, c.macKey)
	m.Write([]byte("token\x00"))
	m.Write([]byte(token))
	return m.Sum(nil)[:8]
}

// keys of one user under one generation: a keyed hash of the user id (no
// user id in Redis), in a hash tag so they share a Redis Cluster slot.
type keys struct{ tok, lock, neg string }

func (c *Cache) keys(userID, gen string) keys {
	u := "{" + c.fingerprint("user", userID, 18) + "}:" + gen
	return keys{tok: "tok:" + u, lock: "lock:" + u, neg: "neg:" + u}
}

// Token returns the user's token: local layer, shared store, or a mint.
func (c *Cache) Token(ctx context.Context, userID string) (Token, error) {
	for range 2 { // a second pass only after a secret change found mid-mint
		gen := c.gen.Load()
		now := c.now()
		if c.live.Load() {
			if e, ok := c.local.Get(localKey{gen, userID}); ok {
				if now.Before(e.until) && now.Sub(e.added) < localMaxAge {
					c.observe.CacheLookup("local")
					if !now.Before(e.refreshAt) {
						c.refreshAhead(userID, gen, e.storeKey)
					}
					return e.tok, nil
				}
				c.local.Drop(localKey{gen, userID})
			}
		}
		k := c.keys(userID, *gen)
		v, ok, err := c.read(ctx, k.tok, userID)
		if err != nil {
			return Token{}, err
		}
		if ok {
			c.observe.CacheLookup("redis")
			c.remember(gen, userID, k.tok, v)
			if !now.Before(v.refreshAt) {
				c.refreshAhead(userID, gen, k.tok)
			}
			return v.tok, nil
		}
		c.observe.CacheLookup("miss")
		res, err, _ := c.group.Do(k.tok, func() (any, error) {
			return c.mintShared(context.WithoutCancel(ctx), userID, gen, k)
		})
		if errors.Is(err, errSecretChanged) {
			continue
		}
		if err != nil {
			return Token{}, err
		}
		return res.(Token), nil
	}
	return Token{}, &MintError{Kind: KindAuth, Err: errors.New("client credentials refused after a secret change")}
}

// stored is a decrypted cache value.
type stored struct {
	tok       Token
	until     time.Time // served until then
	refreshAt time.Time // refreshed in the background from then
}

func (c *Cache) read(ctx context.Context, key, userID string) (stored, bool, error) {
	b, err := c.store.Get(ctx, key)
	if errors.Is(err, kv.ErrNotFound) {
		return stored{}, false, nil
	}
	if err != nil {
		return stored{}, false, err
	}
	v, err := c.open(b, userID)
	if err != nil { // undecryptable (other key, moved from another user): a miss
		return stored{}, false, nil
	}
	if !c.now().Before(v.until) { // the store's TTL is the safety net; this is the rule
		return stored{}, false, nil
	}
	return v, true, nil
}

func (c *Cache) remember(gen *string, userID, storeKey string, v stored) {
	if !c.live.Load() {
		return
	}
	c.local.Put(localKey{gen, userID}, storeKey, localEntry{
		storeKey: storeKey, tok: v.tok, until: v.until, refreshAt: v.refreshAt, added: c.now(),
	})
}

// mintShared gets a token for a user whose cache is empty, with at most one
// mint in flight across every instance. The caller holds the in-process
// singleflight for k.tok.
func (c *Cache) mintShared(ctx context.Context, userID string, gen *string, k keys) (Token, error) {
	wake := c.waiters.add(k.tok)
	defer c.waiters.remove(k.tok, wake)
	deadline := time.Now().Add(c.mintTTL + 2*time.Second)
	var waitStart time.Time
	for {
		// Check again: another instance may have finished since our read.
		if v, ok, err := c.read(ctx, k.tok, userID); err != nil || ok {
			if ok {
				c.remember(gen, userID, k.tok, v)
			}
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
			return c.mintLocked(ctx, userID, gen, k, fence)
		}
		if waitStart.IsZero() {
			waitStart = time.Now()
		}
		t := time.NewTimer(pollEvery)
		select {
		case <-wake:
			t.Stop()
			c.observe.LockWait("notified", time.Since(waitStart))
		case <-t.C:
			c.observe.LockWait("polled", time.Since(waitStart))
		}
		if time.Now().After(deadline) {
			c.observe.LockWait("timeout", time.Since(waitStart))
			return Token{}, ErrLockTimeout
		}
	}
}

// mintLocked mints while holding the user's lock, stores the result (or the
// failure, briefly) and wakes every waiter on every instance.
func (c *Cache) mintLocked(ctx context.Context, userID string, gen *string, k keys, fence []byte) (Token, error) {
	defer func() { _, _ = c.store.DelIf(ctx, k.lock, fence) }()
	// Check again under the lock: the previous holder may have stored a
	// token, or failed and left a negative entry, between our last reads
	// and our taking the lock. Without the second check two instances
	// could each mint once per negative window.
	if v, ok, err := c.read(ctx, k.tok, userID); err != nil || ok {
		if ok {
			c.remember(gen, userID, k.tok, v)
		}
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
			if s, changed := c.reload(); changed {
				c.log.Warn("the token endpoint refused the client secret; a new one was found in client_secret_file and is used from now on")
				c.SetSecret(s)
				_ = c.AnnounceRotation(ctx)
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
	v := stored{tok: tok, until: now.Add(ttl), refreshAt: now.Add(ttl - ttl/refreshShare)}
	if err := c.store.Set(ctx, key, c.seal(v, userID), ttl); err != nil {
		return err
	}
	c.remember(gen, userID, key, v)
	return c.publish(ctx, "set", key)
}

// refreshAhead mints a new token in the background, once per user across
// every instance (whoever takes the lock), while the current one is served.
func (c *Cache) refreshAhead(userID string, gen *string, key string) {
	if _, busy := c.refresh.LoadOrStore(key, struct{}{}); busy {
		return
	}
	go func() {
		defer c.refresh.Delete(key)
		ctx, cancel := context.WithTimeout(context.Background(), c.mintTTL+2*time.Second)
		defer cancel()
		k := c.keys(userID, *gen)
		fence := make([]byte, 16)
		_, _ = rand.Read(fence)
		got, err := c.store.SetNX(ctx, k.lock, fence, c.mintTTL+time.Second)
		if err != nil || !got {
			return // another instance is minting
		}
		defer func() { _, _ = c.store.DelIf(ctx, k.lock, fence) }()
		// Check again under the lock: another instance may have refreshed.
		if v, ok, _ := c.read(ctx, k.tok, userID); ok && c.now().Before(v.refreshAt) {
			c.remember(gen, userID, k.tok, v)
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
	}()
}

// Invalidate drops the user's token everywhere.
func (c *Cache) Invalidate(ctx context.Context, userID string) error {
	gen := c.gen.Load()
	k := c.keys(userID, *gen)
	c.local.Drop(localKey{gen, userID})
	if err := c.store.Del(ctx, k.tok); err != nil {
		return err
	}
	return c.publish(ctx, "inv", k.tok)
}

// InvalidateToken drops the user's token everywhere if it is still the
// given one (the token the upstream just refused): concurrent 401s for one
// expired token cause one re-mint, not one each.
func (c *Cache) InvalidateToken(ctx context.Context, userID, token string) error {
	gen := c.gen.Load()
	k := c.keys(userID, *gen)
	c.local.Drop(localKey{gen, userID})
	dropped, err := c.store.DelIf(ctx, k.tok, c.tokenFP(token))
	if err != nil || !dropped {
		return err
	}
	return c.publish(ctx, "inv", k.tok)
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

// publish sends "<instance> <op> <key>" to every instance.
func (c *Cache) publish(ctx context.Context, op, key string) error {
	return c.store.Publish(ctx, channel, c.id+" "+op+" "+key)
}

func (c *Cache) onMessage(msg string) {
	from, rest, ok := strings.Cut(msg, " ")
	if !ok {
		return
	}
	op, key, ok := strings.Cut(rest, " ")
	if !ok {
		return
	}
	switch op {
	case "set", "inv", "neg":
		if from != c.id {
			c.local.DropStoreKey(key)
		}
		c.waiters.notify(key)
	case "rot":
		if from == c.id {
			return
		}
		if s, changed := c.reload(); changed {
			c.SetSecret(s)
			c.log.Info("client secret re-read after another instance announced a rotation")
		}
	}
}

// seal encrypts v with the user id as associated data, so a value copied
// under another user's key does not decrypt. Layout: token fingerprint (8) |
// nonce | ciphertext of (expiry | until | refreshAt, 8-byte Unix ns each |
// token). The fingerprint is a keyed hash: it reveals nothing of the token.
func (c *Cache) seal(v stored, userID string) []byte {
	plain := make([]byte, 24, 24+len(v.tok.Value))
	binary.BigEndian.PutUint64(plain, uint64(v.tok.Expiry.UnixNano()))
	binary.BigEndian.PutUint64(plain[8:], uint64(v.until.UnixNano()))
	binary.BigEndian.PutUint64(plain[16:], uint64(v.refreshAt.UnixNano()))
	plain = append(plain, v.tok.Value...)
	out := make([]byte, 0, 8+len(plain)+c.box.Overhead())
	return c.box.Seal(append(out, c.tokenFP(v.tok.Value)...), plain, []byte(userID))
}

func (c *Cache) open(b []byte, userID string) (stored, error) {
	if len(b) < 8 {
		return stored{}, errors.New("tokens: short cache value")
	}
	plain, err := c.box.Open(nil, b[8:], []byte(userID))
	if err != nil || len(plain) < 24 {
		return stored{}, errors.New("tokens: cache value does not decrypt")
	}
	at := func(i int) time.Time { return time.Unix(0, int64(binary.BigEndian.Uint64(plain[i:i+8]))) }
	return stored{tok: Token{Value: string(plain[24:]), Expiry: at(0)}, until: at(8), refreshAt: at(16)}, nil
}
