//go:build integration

package tokens_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/testing/redistest"
	"github.com/fintech-bff/bff/internal/testing/syncbuf"
	"github.com/fintech-bff/bff/internal/tokens"
	"github.com/fintech-bff/bff/internal/upstreamsim"
)

// countingObserver counts lock-wait timeouts, refreshes and the lookups
// that read the store.
type countingObserver struct {
	timeouts  atomic.Int64
	refreshes atomic.Int64
	storeHits atomic.Int64
}

func (o *countingObserver) CacheLookup(r tokens.Lookup) {
	if r == tokens.LookupRedis {
		o.storeHits.Add(1)
	}
}
func (o *countingObserver) Minted(error, time.Duration) {}
func (o *countingObserver) LockWait(r tokens.Wait, _ time.Duration) {
	if r == tokens.WaitTimeout {
		o.timeouts.Add(1)
	}
}
func (o *countingObserver) Refreshed(error) { o.refreshes.Add(1) }

// cluster is n token managers ("instances") sharing one real Redis and
// one simulated upstream, on the simulator's clock.
type cluster struct {
	sim       *upstreamsim.Server
	simURL    string
	instances []*tokens.Cache
	secrets   []*tokens.Secret // instances[i]'s client secret
	observer  *countingObserver
	logs      *syncbuf.Buffer
	rc        *redis.Client
	prefix    string
}

// newCluster is n instances on the test Redis.
func newCluster(t *testing.T, n int, simOpts upstreamsim.Options, load func() (string, error)) *cluster {
	t.Helper()
	rc, prefix := redistest.Client(t)
	c := newClusterOn(t, kv.NewRedis(rc, prefix), n, simOpts, load)
	c.rc, c.prefix = rc, prefix
	return c
}

// newClusterOn is n instances sharing store and one simulated upstream, on
// the simulator's clock. load, when set, reads each instance's client
// secret (a file every instance reads its own copy of); else it is
// simOpts.ClientSecret for good.
func newClusterOn(t *testing.T, store tokens.Store, n int, simOpts upstreamsim.Options, load func() (string, error)) *cluster {
	t.Helper()
	if simOpts.ClientSecret == "" {
		simOpts.ClientID, simOpts.ClientSecret = "cid", testSecret
	}
	sim := upstreamsim.New(simOpts)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	c := &cluster{sim: sim, simURL: srv.URL, observer: &countingObserver{}, logs: &syncbuf.Buffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	log := slog.New(slog.NewJSONHandler(c.logs, nil))
	if load == nil {
		load = func() (string, error) { return simOpts.ClientSecret, nil }
	}
	for i := 0; i < n; i++ {
		secret, err := tokens.NewSecret(load, log)
		if err != nil {
			t.Fatal(err)
		}
		m := tokens.NewMinter(tokens.MinterOptions{
			BaseURL: srv.URL, ClientID: simOpts.ClientID, Secret: secret,
			Client: &http.Client{Timeout: 5 * time.Second}, Now: sim.Now,
		})
		cache, err := tokens.NewCache(store, m, secret, tokens.CacheOptions{
			EncryptionKey: encKey, RefreshBefore: time.Minute, MaxTTL: time.Hour, LocalBytes: 1 << 20,
			MintTimeout: 5 * time.Second, Now: sim.Now, Observe: c.observer, Logger: log,
		})
		if err != nil {
			t.Fatal(err)
		}
		go cache.Run(ctx)
		c.instances = append(c.instances, cache)
		c.secrets = append(c.secrets, secret)
	}
	// Wait until every subscription is live, so the local layer is in use.
	waitFor(t, func() bool {
		for _, in := range c.instances {
			if !in.Live() {
				return false
			}
		}
		return true
	})
	return c
}

// tokenRequests counts the token endpoint calls the simulator saw.
func (c *cluster) tokenRequests() int {
	n := 0
	for _, r := range c.sim.Requests() {
		if r.Path == "/oauth/token" {
			n++
		}
	}
	return n
}

// stampede fires n concurrent Token calls for user, spread over the
// instances, and returns the distinct tokens served.
func (c *cluster) stampede(t *testing.T, user string, n int) map[string]bool {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		seen = map[string]bool{}
	)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			tok, err := c.instances[i%len(c.instances)].Token(context.Background(), user)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			seen[tok.Value] = true
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	return seen
}

func TestStampedeAcrossInstancesMintsOnce(t *testing.T) {
	c := newCluster(t, 4, upstreamsim.Options{TokenTTL: 10 * time.Minute}, nil)
	seen := c.stampede(t, "fresh-user", 1000)
	if got := c.sim.Mints("fresh-user"); got != 1 || len(seen) != 1 {
		t.Fatalf("got %d mints and %d distinct tokens for 1000 concurrent calls on 4 instances, want 1 and 1", got, len(seen))
	}

	// Into the refresh-ahead window (the last fifth of the cached life):
	// requests keep getting the valid token while one instance refreshes.
	c.sim.Advance(8*time.Minute + 30*time.Second)
	seen = c.stampede(t, "fresh-user", 1000)
	if len(seen) > 2 {
		t.Fatalf("got %d distinct tokens in the refresh window, want the old and at most the new", len(seen))
	}
	// Every refresh the stampede started has ended (each is registered
	// before its Token call returns): a second one would have minted.
	waitFor(t, func() bool {
		for _, in := range c.instances {
			if in.Refreshing() != 0 {
				return false
			}
		}
		return true
	})
	if got := c.sim.Mints("fresh-user"); got != 2 {
		t.Fatalf("after entering the refresh window: got %d mints, want exactly 2", got)
	}

	// Past the end of the cached life: every instance misses at once.
	c.sim.Advance(10 * time.Minute)
	seen = c.stampede(t, "fresh-user", 1000)
	if got := c.sim.Mints("fresh-user"); got != 3 || len(seen) != 1 {
		t.Fatalf("after expiry: got %d mints and %d distinct tokens, want 3 and 1", got, len(seen))
	}
	if n := c.observer.timeouts.Load(); n != 0 {
		t.Fatalf("got %d lock-wait timeouts, want 0", n)
	}
}

func TestMintStormOfDistinctUsers(t *testing.T) {
	c := newCluster(t, 4, upstreamsim.Options{TokenTTL: time.Hour}, nil)
	var wg sync.WaitGroup
	var failures atomic.Int64
	for i := 0; i < 500; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.instances[i%4].Token(context.Background(), fmt.Sprintf("storm-%d", i)); err != nil {
				failures.Add(1)
			}
		}()
	}
	wg.Wait()
	if got := c.sim.TotalMints(); got != 500 || failures.Load() != 0 || c.observer.timeouts.Load() != 0 {
		t.Fatalf("got %d mints, %d failures, %d lock timeouts; want 500, 0, 0", got, failures.Load(), c.observer.timeouts.Load())
	}
}

// A token invalidated on one instance stops being served on the others as
// soon as the invalidation message arrives; the latency is measured.
func TestInvalidationReachesEveryInstance(t *testing.T) {
	c := newCluster(t, 2, upstreamsim.Options{TokenTTL: time.Hour}, nil)
	a, b := c.instances[0], c.instances[1]
	ctx := context.Background()
	old, _ := a.Token(ctx, "ivy")
	if got, _ := b.Token(ctx, "ivy"); got.Value != old.Value {
		t.Fatal("instances disagree before invalidation")
	}
	start := time.Now()
	if err := a.Invalidate(ctx, "ivy"); err != nil {
		t.Fatal(err)
	}
	var fresh tokens.Token
	waitFor(t, func() bool {
		fresh, _ = b.Token(ctx, "ivy")
		return fresh.Value != old.Value
	})
	t.Logf("invalidation reached the other instance in %v", time.Since(start))
	for i := 0; i < 100; i++ {
		if got, _ := b.Token(ctx, "ivy"); got.Value == old.Value {
			t.Fatal("the invalidated token was served again")
		}
		if got, _ := a.Token(ctx, "ivy"); got.Value == old.Value {
			t.Fatal("the invalidated token was served again by the invalidating instance")
		}
	}
	if got := c.sim.Mints("ivy"); got != 2 {
		t.Fatalf("got %d mints, want 2", got)
	}
}

// With the token keys tracked by Redis, a local copy is served past
// localMaxAge without reading the store, and a token deleted without any
// message (its deleter died before publishing) stops being served at once
// on every instance: Redis itself reports the delete.
func TestTrackedTokensNeedNoMessage(t *testing.T) {
	c := newCluster(t, 2, upstreamsim.Options{TokenTTL: time.Hour}, nil)
	a, b := c.instances[0], c.instances[1]
	waitFor(t, func() bool { return a.Tracked() && b.Tracked() })
	ctx := context.Background()
	old, _ := a.Token(ctx, "tia")
	// B reads it from the store, then serves it locally.
	waitFor(t, func() bool {
		before := c.observer.storeHits.Load()
		got, _ := b.Token(ctx, "tia")
		return got.Value == old.Value && c.observer.storeHits.Load() == before
	})
	// Each try moves the clock past localMaxAge (10 s). The tracking's
	// freshness is measured on the same clock: the jump outran the last
	// confirmation, and the next one, within a canary's period, makes the
	// copy servable again. On a loaded machine a confirmation may come
	// late, and the copy is then read from the store again (safe, and it
	// is young again): the try is made again, from an old copy. What must
	// happen is ten reads in a row of a copy older than localMaxAge served
	// without the store.
	waitFor(t, func() bool {
		c.sim.Advance(30 * time.Second)
		waitFor(t, b.Tracked)
		before := c.observer.storeHits.Load()
		for range 10 {
			if got, _ := b.Token(ctx, "tia"); got.Value != old.Value {
				t.Fatal("a tracked copy changed without a change in the store")
			}
		}
		return c.observer.storeHits.Load() == before
	})
	keys := redistest.Keys(ctx, c.rc, c.prefix+"tok:")
	if len(keys) != 1 {
		t.Fatalf("token keys %v, want one", keys)
	}
	if err := c.rc.Del(ctx, keys[0]).Err(); err != nil { // no message published
		t.Fatal(err)
	}
	start := time.Now()
	waitFor(t, func() bool {
		got, _ := b.Token(ctx, "tia")
		return got.Value != old.Value
	})
	if took := time.Since(start); took > time.Second {
		t.Fatalf("the deleted token was served for %v, want under 1s", took)
	} else {
		t.Logf("a delete with no message reached the other instance in %v", took)
	}
}

// A token read from the store while its key is deleted (the read was in
// flight) is served to that request but not kept: with tracked copies
// trusted until reported changed, keeping it would serve a deleted token
// until it expires.
func TestTrackedReadRacingADeleteIsNotKept(t *testing.T) {
	rc, prefix := redistest.Client(t)
	store := &deleteAfterGet{Tracked: redistest.NewTracked(rc, prefix), rc: rc, prefix: prefix}
	c := newClusterOn(t, store, 2, upstreamsim.Options{TokenTTL: time.Hour}, nil)
	minter, in := c.instances[0], c.instances[1]
	waitFor(t, in.Tracked)
	ctx := context.Background()
	old, err := minter.Token(ctx, "rey")
	if err != nil {
		t.Fatal(err)
	}
	// The other instance has no copy of it: its next Token reads the store.
	store.arm.Store(true)
	if got, _ := in.Token(ctx, "rey"); got.Value != old.Value {
		t.Fatalf("the in-flight read got %q, want the token it read", got.Value)
	}
	if got, _ := in.Token(ctx, "rey"); got.Value == old.Value {
		t.Fatal("a token deleted while it was being read was kept and served again")
	}
}

// deleteAfterGet is a Redis store whose next GET, once armed, deletes the
// key it read and waits for every instance to be told of the deletion
// before it answers.
type deleteAfterGet struct {
	*redistest.Tracked
	rc     *redis.Client
	prefix string
	arm    atomic.Bool
}

func (s *deleteAfterGet) Get(ctx context.Context, key string) ([]byte, error) {
	b, err := s.Tracked.Get(ctx, key)
	if err == nil && s.arm.CompareAndSwap(true, false) {
		if err := s.Reported(ctx, key, func(ctx context.Context) error { return s.rc.Del(ctx, s.prefix+key).Err() }); err != nil {
			return nil, err
		}
	}
	return b, err
}

// Concurrent 401s for one token cause one re-mint: InvalidateToken deletes
// only the token it names.
func TestInvalidateTokenIsCompareAndDelete(t *testing.T) {
	c := newCluster(t, 2, upstreamsim.Options{TokenTTL: time.Hour}, nil)
	ctx := context.Background()
	old, _ := c.instances[0].Token(ctx, "jo")
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := c.instances[i%2]
			if err := in.InvalidateToken(ctx, "jo", old.Value); err != nil {
				t.Error(err)
			}
			if tok, err := in.Token(ctx, "jo"); err != nil || tok.Value == old.Value {
				t.Errorf("got %v, want a fresh token", err)
			}
		}()
	}
	wg.Wait()
	if got := c.sim.Mints("jo"); got != 2 {
		t.Fatalf("got %d mints after 50 concurrent invalidations of one token, want 2", got)
	}
}

// A token endpoint that refuses the credentials is not hammered: attempts
// per user are bounded cluster-wide, the error is typed, and the operator
// alert is logged once.
func TestBrokenCredentialsAreNotHammered(t *testing.T) {
	c := newCluster(t, 4, upstreamsim.Options{TokenTTL: time.Hour}, nil)
	c.sim.RotateSecret("rotated-elsewhere") // our secret is now wrong
	deadline := time.Now().Add(2 * time.Second)
	var calls, authErrors atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10_000 && time.Now().Before(deadline); i++ {
				_, err := c.instances[w%4].Token(context.Background(), "kim")
				calls.Add(1)
				var me *tokens.MintError
				if errors.As(err, &me) && me.Kind == tokens.KindAuth {
					authErrors.Add(1)
				}
				time.Sleep(time.Millisecond) // deliberate: the callers' pace over the 2 s window
			}
		}()
	}
	wg.Wait()
	attempts := c.tokenRequests()
	t.Logf("%d Token calls over 2s caused %d token endpoint attempts", calls.Load(), attempts)
	if attempts < 1 || attempts > 4 {
		t.Fatalf("got %d token endpoint attempts in 2s, want 1 to 4 (about one per second per user)", attempts)
	}
	if authErrors.Load() != calls.Load() {
		t.Fatalf("got %d KindAuth errors for %d calls, want all", authErrors.Load(), calls.Load())
	}
	if n := strings.Count(c.logs.String(), "ALERT"); n < 1 || n > 4 {
		t.Fatalf("got %d alert lines, want one per instance at most", n)
	}
	if strings.Contains(c.logs.String(), testSecret) {
		t.Fatal("the client secret appears in the logs")
	}
}

// A secret file replaced before SIGHUP is picked up when the token endpoint
// refuses the old secret: no request is lost.
func TestRefusedSecretIsReloaded(t *testing.T) {
	file := &secretFile{v: testSecret}
	c := newCluster(t, 2, upstreamsim.Options{TokenTTL: time.Hour}, file.load)
	ctx := context.Background()
	old, err := c.instances[0].Token(ctx, "lee")
	if err != nil {
		t.Fatal(err)
	}
	c.sim.RotateSecret("the-new-secret")
	file.set("the-new-secret", nil)
	// The cached token is still served (the cache cannot know the upstream
	// purged it); the proxy's 401 path invalidates it:
	if err := c.instances[1].InvalidateToken(ctx, "lee", old.Value); err != nil {
		t.Fatal(err)
	}
	tok, err := c.instances[1].Token(ctx, "lee")
	if err != nil || tok.Value == old.Value {
		t.Fatalf("got %v, want a token minted under the reloaded secret", err)
	}
	// The other instance was told of the rotation and uses the new generation.
	waitFor(t, func() bool {
		got, err := c.instances[0].Token(ctx, "lee")
		return err == nil && got.Value == tok.Value
	})
}

// A read that overlaps a change of another user's token keeps its copy:
// the check is per key (nearcache's versions.go), so a wave of mints or logins
// does not send every reader of the moment back to Redis on its next
// request. (The check is per shard of keys: should the other key share
// rey's shard, 1 in 16,384, the test tries once more with another.)
func TestTrackedReadOverlappingAnotherChangeIsKept(t *testing.T) {
	rc, prefix := redistest.Client(t)
	store := &changeOtherAfterGet{Tracked: redistest.NewTracked(rc, prefix), rc: rc, prefix: prefix}
	c := newClusterOn(t, store, 1, upstreamsim.Options{TokenTTL: time.Hour}, nil)
	in := c.instances[0]
	waitFor(t, in.Tracked)
	ctx := context.Background()
	for attempt := range 2 {
		if err := in.Invalidate(ctx, "rey"); err != nil {
			t.Fatal(err)
		}
		if _, err := in.Token(ctx, "rey"); err != nil {
			t.Fatal(err)
		}
		if err := store.Sync(ctx, "tok:"); err != nil { // the mint's own write is reported: no local copy left
			t.Fatal(err)
		}
		store.other.Store(fmt.Sprintf("tok:{someone-else-%d}:x", attempt))
		if _, err := in.Token(ctx, "rey"); err != nil { // read from Redis while another key changes
			t.Fatal(err)
		}
		gets := store.gets.Load()
		if _, err := in.Token(ctx, "rey"); err != nil {
			t.Fatal(err)
		}
		if store.gets.Load() == gets {
			return // served from the local copy
		}
	}
	t.Fatal("a read that overlapped a change of another user's token was not kept: the next request read Redis again")
}

// changeOtherAfterGet is a Redis store that counts GETs and, once armed
// with a key, writes that key after its next GET and waits for the write
// to be reported before it answers.
type changeOtherAfterGet struct {
	*redistest.Tracked
	rc     *redis.Client
	prefix string
	other  atomic.Value // string
	gets   atomic.Int64
}

func (s *changeOtherAfterGet) Get(ctx context.Context, key string) ([]byte, error) {
	s.gets.Add(1)
	b, err := s.Tracked.Get(ctx, key)
	if other, ok := s.other.Swap("").(string); ok && other != "" {
		if err := s.Reported(ctx, other, func(ctx context.Context) error { return s.rc.Set(ctx, s.prefix+other, "x", time.Minute).Err() }); err != nil {
			return nil, err
		}
	}
	return b, err
}

// Rotate on one instance of a real-Redis cluster switches it to the new
// secret at once (no refused mint first) and every other instance through
// the announcement: one mint under each secret in all.
func TestRotateAcrossInstances(t *testing.T) {
	file := &secretFile{v: testSecret}
	c := newCluster(t, 3, upstreamsim.Options{TokenTTL: time.Hour}, file.load)
	ctx := context.Background()
	old, err := c.instances[1].Token(ctx, "mo")
	if err != nil {
		t.Fatal(err)
	}
	c.sim.RotateSecret("rotated-via-rotate")
	file.set("rotated-via-rotate", nil)
	if changed, err := c.secrets[0].Rotate(ctx); !changed || err != nil {
		t.Fatalf("Rotate: got %v, %v, want true, nil", changed, err)
	}
	tok, err := c.instances[0].Token(ctx, "mo")
	if err != nil || tok.Value == old.Value {
		t.Fatalf("got %v, want a token minted under the new secret", err)
	}
	for _, in := range c.instances[1:] {
		waitFor(t, func() bool {
			got, err := in.Token(ctx, "mo")
			return err == nil && got.Value == tok.Value
		})
	}
	if !strings.Contains(c.logs.String(), "client secret re-read after another instance announced a rotation") {
		t.Fatal("no instance logged the announced rotation")
	}
	if got := c.sim.Mints("mo"); got != 2 {
		t.Fatalf("got %d mints, want 2 (one under each secret)", got)
	}
	if got := c.tokenRequests(); got != 2 {
		t.Fatalf("got %d token endpoint calls, want 2 (none refused)", got)
	}
}
