package tokens

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"golang.org/x/sync/singleflight"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/nearcache"
	"github.com/fintech-bff/bff/internal/seal"
	"github.com/fintech-bff/bff/internal/telemetry"
)

// ErrStoreUnavailable wraps failures to reach the shared store.
var ErrStoreUnavailable = kv.ErrUnavailable

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
)

// CacheOptions configures a Cache.
type CacheOptions struct {
	// EncryptionKey is the 32-byte AES-256-GCM key tokens are stored under.
	EncryptionKey []byte
	// RefreshBefore: a token is not served this close to its expiry.
	RefreshBefore time.Duration
	// MaxTTL caps how long any token is cached.
	MaxTTL time.Duration
	// LocalBytes bounds the memory of the in-process copies; 0 disables
	// them.
	LocalBytes int64
	// MintTimeout bounds one mint; the cross-instance lock lives a little
	// longer. Default 15s.
	MintTimeout time.Duration
	// Now is the clock token lifetimes are measured on (serve-until,
	// refresh-ahead) and the local copies' ages (nearcache); default
	// time.Now. The mint lock's waits use real time (see mintShared).
	Now func() time.Time
	// Observe, when set, is told of lookups, mints and lock waits (metrics).
	Observe Observer
	Logger  *slog.Logger
}

// Observer receives the cache's events. Implementations must be cheap and
// safe for concurrent use.
type Observer interface {
	// CacheLookup reports where a lookup found the token: a hit of
	// either layer, or a miss (labels.go names them).
	CacheLookup(result Lookup)
	Minted(err error, took time.Duration)
	// LockWait reports how one step of a wait for another instance's
	// mint ended, and how long the wait had taken.
	LockWait(result Wait, took time.Duration)
	// Refreshed reports a background refresh-ahead mint.
	Refreshed(err error)
}

type nopObserver struct{}

func (nopObserver) CacheLookup(Lookup)           {}
func (nopObserver) Minted(error, time.Duration)  {}
func (nopObserver) LockWait(Wait, time.Duration) {}
func (nopObserver) Refreshed(error)              {}

// Cache is the token manager: each user's upstream token from an
// in-process copy (nearcache), else the shared store (AES-256-GCM encrypted, the user id
// as associated data), else minted through its Source — at most one mint
// per user at a time across every instance (singleflight in process, a
// fenced SET NX PX lock in the store, pub/sub to wake waiters). Tokens near
// expiry are refreshed in the background by one instance. It is safe for
// concurrent use; Run must be running for the local copies to be used.
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
	secret  *Secret
	id      string

	group singleflight.Group
	gen   atomic.Pointer[string]
	// local are the in-process copies, by store key, and everything that
	// decides whether one may be served (nearcache): a copy is served
	// until its serve-until time while the layer is Tracked, else for
	// localMaxAge.
	local   *nearcache.Layer[localEntry]
	hmacs   sync.Pool // keyed HMACs for mac
	waiters waiters
	alerted atomic.Bool
	refresh sync.Map // store key -> struct{}: refresh-ahead in flight here
	// ahead owns the refreshes ahead: Run's end cancels and waits for them.
	ahead ahead
}

var _ Source = (*Cache)(nil)

// NewCache returns a cache in front of source, subscribed to secret (the
// one source itself mints with): the secret's keyed fingerprint scopes every
// key, so tokens minted under an older secret are never served once the
// secret changes. The cache re-reads secret when the token endpoint refuses
// the credentials and when another instance announces a rotation, so a
// secret file replaced before SIGHUP is picked up without a lost request.
func NewCache(store Store, source Source, secret *Secret, o CacheOptions) (*Cache, error) {
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
	mk := hmac.New(sha256.New, o.EncryptionKey)
	mk.Write([]byte("bff token cache key derivation"))
	var id [8]byte
	_, _ = rand.Read(id[:])
	c := &Cache{
		store: store, source: source, box: box, macKey: mk.Sum(nil),
		before: o.RefreshBefore, maxTTL: o.MaxTTL, mintTTL: o.MintTimeout, now: o.Now,
		observe: o.Observe, log: o.Logger, secret: secret, id: hex.EncodeToString(id[:]),
	}
	c.ahead.ctx, c.ahead.cancel = context.WithCancel(context.Background())
	c.local = nearcache.New(store, nearcache.Options[localEntry]{
		MaxBytes: o.LocalBytes, Append: appendEntry, Read: readEntry,
		Expires: func(e localEntry) time.Time { return time.Unix(0, e.until) },
		MaxAge:  localMaxAge, Now: o.Now,
		Channel: channel, OnMessage: c.onMessage,
		Prefix: "tok:", LocalKey: func(key string) (string, bool) { return key, true },
		What: "token", Logger: o.Logger,
	})
	secret.subscribe(c)
	return c, nil
}

// Run keeps the local copies correct until ctx ends, and returns once
// everything it started has (nearcache): messages from other instances
// forget local copies and wake waiters. While the subscription is down the
// copies are bypassed (and forgotten), never trusted. When ctx ends it
// also cancels the refreshes ahead in flight and waits for them, and
// starts no more: once Run has returned, the cache uses the store only
// for its callers, so the store may close after them.
func (c *Cache) Run(ctx context.Context) {
	c.local.Run(ctx)
	c.ahead.stop()
}

// Live reports whether the invalidation subscription is up, so the local
// layer is in use.
func (c *Cache) Live() bool { return c.local.Live() }

// Tracked reports whether local copies are served until they expire: the
// store reports every change of a token key, and confirmed it did so
// within kv.LeaseFor.
func (c *Cache) Tracked() bool { return c.local.Tracked() }

// setSecret switches to a new client secret generation; only the Secret
// the cache subscribed to calls it. Every instance given the same secret
// computes the same generation, and none serves a token minted under
// another.
func (c *Cache) setSecret(secret string) {
	g := c.fingerprint("secret", secret, 12)
	if old := c.gen.Load(); old != nil && *old == g {
		return
	}
	c.gen.Store(&g)
	c.local.ForgetAll()
}

// Token returns the user's token: local copy, shared store, or a mint.
func (c *Cache) Token(ctx context.Context, userID string) (_ Token, err error) {
	ctx, span := telemetry.Start(ctx, tracer, "tokens.get")
	source := "local"
	defer func() {
		if span.IsRecording() {
			span.SetAttributes(attribute.String("bff.token.source", source))
			if err != nil {
				span.SetStatus(codes.Error, "no token")
			}
		}
		span.End()
	}()
	for range 2 { // a second pass only after a secret change found mid-mint
		gen := c.gen.Load()
		now := c.now()
		tok := c.tokKey(userID, *gen)
		if e, ok := c.local.Serve(tok); ok {
			c.observe.CacheLookup(LookupLocal)
			if now.UnixNano() >= e.refreshAt {
				c.refreshAhead(userID, gen, tok)
			}
			return e.token(), nil
		}
		k := keysOf(tok)
		v, ok, err := c.read(ctx, k.tok, userID)
		if err != nil {
			return Token{}, err
		}
		if ok {
			source = "store"
			c.observe.CacheLookup(LookupRedis)
			c.remember(k.tok, v)
			if !now.Before(v.refreshAt) {
				c.refreshAhead(userID, gen, k.tok)
			}
			return v.tok, nil
		}
		c.observe.CacheLookup(LookupMiss)
		source = "mint"
		sctx, sf := telemetry.Start(ctx, tracer, "tokens.singleflight")
		res, err, shared := c.group.Do(k.tok, func() (any, error) {
			return c.mintShared(context.WithoutCancel(sctx), userID, gen, k)
		})
		if sf.IsRecording() {
			sf.SetAttributes(attribute.Bool("bff.shared", shared))
		}
		sf.End()
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

var tracer = telemetry.Tracer("tokens")

// stored is a decrypted cache value.
type stored struct {
	tok       Token
	until     time.Time // served until then
	refreshAt time.Time // refreshed in the background from then
	// read is noted before the value was read or written: remember keeps
	// it only if no change of its key came since.
	read nearcache.Read
}

func (c *Cache) read(ctx context.Context, key, userID string) (stored, bool, error) {
	read := c.local.BeginRead(key)
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
	v.read = read
	return v, true, nil
}

// remember keeps v as a local copy, unless a change of its key came since
// it was read or written: it may be of a token changed meanwhile, which a
// tracked copy would otherwise serve until it expires.
func (c *Cache) remember(storeKey string, v stored) {
	c.local.Keep(storeKey, newLocalEntry(v), v.read)
}

// recheck reads the user's token again, on the mint path (before and after
// taking the lock): if another instance stored one meanwhile, it is
// remembered locally and returned, and no mint is needed.
func (c *Cache) recheck(ctx context.Context, gen *string, userID string, k keys) (stored, bool, error) {
	v, ok, err := c.read(ctx, k.tok, userID)
	if ok {
		c.remember(k.tok, v)
	}
	return v, ok, err
}

// Invalidate deletes the user's token from the store and every instance's
// copy.
func (c *Cache) Invalidate(ctx context.Context, userID string) error {
	gen := c.gen.Load()
	k := c.keys(userID, *gen)
	err := c.store.Del(ctx, k.tok)
	// After the delete: a read that got the token before it must not
	// keep it (nearcache's Forget counts a change of the key).
	c.local.Forget(k.tok)
	if err != nil {
		return err
	}
	return c.publish(ctx, "inv", k.tok)
}

// InvalidateToken deletes the user's token from the store and every
// instance's copy if it is still the given one (the token the upstream just refused): concurrent 401s for one
// expired token cause one re-mint, not one each.
func (c *Cache) InvalidateToken(ctx context.Context, userID, token string) error {
	gen := c.gen.Load()
	k := c.keys(userID, *gen)
	deleted, err := c.store.DelIf(ctx, k.tok, c.tokenFP(token))
	c.local.Forget(k.tok) // after the delete, as in Invalidate
	if err != nil || !deleted {
		return err
	}
	return c.publish(ctx, "inv", k.tok)
}
