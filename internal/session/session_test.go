//go:build integration

package session_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/session"
	"github.com/fintech-bff/bff/internal/testing/poll"
	"github.com/fintech-bff/bff/internal/testing/redistest"
	"github.com/fintech-bff/bff/internal/testing/testclock"
)

// countingStore counts writes, to check the idle timeout slides without a
// write on every request, and can run a hook right after a read: the
// moment between a Lookup's read and its write-back.
type countingStore struct {
	session.Store
	sets     atomic.Int64
	gets     atomic.Int64
	lastTTL  atomic.Int64 // of the last write
	afterGet atomic.Pointer[func()]
}

func (c *countingStore) Set(ctx context.Context, k string, v []byte, ttl time.Duration) error {
	c.sets.Add(1)
	c.lastTTL.Store(int64(ttl))
	return c.Store.Set(ctx, k, v, ttl)
}

func (c *countingStore) SetIfExists(ctx context.Context, k string, v []byte, ttl time.Duration) (bool, error) {
	c.sets.Add(1)
	c.lastTTL.Store(int64(ttl))
	return c.Store.SetIfExists(ctx, k, v, ttl)
}

func (c *countingStore) Get(ctx context.Context, k string) ([]byte, error) {
	c.gets.Add(1)
	b, err := c.Store.Get(ctx, k)
	if f := c.afterGet.Swap(nil); f != nil {
		(*f)()
	}
	return b, err
}

// onNextGet runs f once, right after the store's next read returns.
func (c *countingStore) onNextGet(f func()) { c.afterGet.Store(&f) }

// sessionKey is the store key of a session record.
func sessionKey(id string) string { return "sess:" + session.Handle(id) }

// managerSuite runs the behaviour suite without and with the in-process
// layer: the rules must not depend on it.
func managerSuite(t *testing.T, newStore func(now func() time.Time) session.Store) {
	for _, entries := range []int{0, 100} {
		t.Run(fmt.Sprintf("local entries %d", entries), func(t *testing.T) {
			managerRules(t, newStore, entries)
			limitRules(t, newStore, entries)
		})
	}
}

// startRun runs m's subscription until the test ends and waits until it is live.
func startRun(t *testing.T, m *session.Manager) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go m.Run(ctx)
	poll.Until(t, 5*time.Second, "the invalidation subscription up", m.Live)
}

func managerRules(t *testing.T, newStore func(now func() time.Time) session.Store, entries int) {
	ctx := context.Background()
	setupIdle := func(idle time.Duration) (*session.Manager, *testclock.Clock, *countingStore) {
		clk := testclock.New(time.Unix(1_700_000_000, 0))
		st := &countingStore{Store: newStore(clk.Now)}
		m := session.NewManager(st, session.Options{IdleTimeout: idle, AbsoluteTimeout: 12 * time.Hour, Now: clk.Now, LocalBytes: int64(entries) << 10})
		if entries > 0 {
			startRun(t, m)
		}
		return m, clk, st
	}
	setup := func() (*session.Manager, *testclock.Clock, *countingStore) { return setupIdle(30 * time.Minute) }
	// other is a second instance on the same store and clock.
	other := func(st *countingStore, clk *testclock.Clock) *session.Manager {
		m := session.NewManager(st, session.Options{IdleTimeout: 30 * time.Minute, AbsoluteTimeout: 12 * time.Hour, Now: clk.Now, LocalBytes: int64(entries) << 10})
		if entries > 0 {
			startRun(t, m)
		}
		return m
	}
	t.Run("create then lookup", func(t *testing.T) {
		m, _, _ := setup()
		id, rec, err := m.Create(ctx, session.New{UserID: "alice", Method: session.MethodDev})
		if err != nil {
			t.Fatal(err)
		}
		got, err := m.Lookup(ctx, id)
		if err != nil || got.UserID != "alice" || got.Method != session.MethodDev || !got.CreatedAt.Equal(rec.CreatedAt) {
			t.Fatalf("got %+v, %v; want alice's dev session", got, err)
		}
	})
	t.Run("every login gets a new id", func(t *testing.T) {
		m, _, _ := setup()
		a, _, _ := m.Create(ctx, session.New{UserID: "alice", Method: session.MethodDev})
		b, _, _ := m.Create(ctx, session.New{UserID: "alice", Method: session.MethodDev})
		if a == b || len(a) < 43 {
			t.Fatalf("got ids %q and %q; want two distinct 256-bit ids", a, b)
		}
	})
	t.Run("unknown and empty ids are not found", func(t *testing.T) {
		m, _, _ := setup()
		for _, id := range []string{"", "nope", session.NewID()} {
			if _, err := m.Lookup(ctx, id); !errors.Is(err, session.ErrNotFound) {
				t.Fatalf("id %q: got %v, want ErrNotFound", id, err)
			}
		}
	})
	t.Run("idle timeout", func(t *testing.T) {
		m, clk, _ := setup()
		id, _, _ := m.Create(ctx, session.New{UserID: "alice", Method: session.MethodDev})
		clk.Advance(29 * time.Minute)
		if _, err := m.Lookup(ctx, id); err != nil {
			t.Fatalf("after 29m idle: got %v, want the session", err)
		}
		clk.Advance(29 * time.Minute) // slid at the last lookup: still alive
		if _, err := m.Lookup(ctx, id); err != nil {
			t.Fatalf("after sliding: got %v, want the session", err)
		}
		clk.Advance(30 * time.Minute)
		if _, err := m.Lookup(ctx, id); !errors.Is(err, session.ErrNotFound) {
			t.Fatalf("after 30m idle: got %v, want ErrNotFound", err)
		}
	})
	t.Run("absolute timeout despite activity", func(t *testing.T) {
		m, clk, _ := setup()
		id, _, _ := m.Create(ctx, session.New{UserID: "alice", Method: session.MethodDev})
		for i := 0; i < 12*4-1; i++ { // every 15 minutes for just under 12h
			clk.Advance(15 * time.Minute)
			if _, err := m.Lookup(ctx, id); err != nil {
				t.Fatalf("at %v: got %v, want the session", time.Duration(i+1)*15*time.Minute, err)
			}
		}
		clk.Advance(15 * time.Minute)
		if _, err := m.Lookup(ctx, id); !errors.Is(err, session.ErrNotFound) {
			t.Fatalf("at 12h: got %v, want ErrNotFound", err)
		}
	})
	t.Run("sliding writes once a quarter of the idle timeout", func(t *testing.T) {
		m, clk, st := setup() // 30 min idle: a write-back every 7.5 min
		id, _, _ := m.Create(ctx, session.New{UserID: "alice", Method: session.MethodDev})
		before := st.sets.Load()
		for i := 0; i < 900; i++ { // 15 minutes of a request every second
			clk.Advance(time.Second)
			if _, err := m.Lookup(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		if got := st.sets.Load() - before; got != 2 {
			t.Fatalf("got %d writes for 900 lookups over 15 minutes, want 2 (one per 7.5 min)", got)
		}
	})
	t.Run("a long idle timeout still writes back every 15 minutes", func(t *testing.T) {
		m, clk, st := setupIdle(8 * time.Hour)
		id, _, _ := m.Create(ctx, session.New{UserID: "alice", Method: session.MethodDev})
		before := st.sets.Load()
		for i := 0; i < 60; i++ { // an hour of a request a minute
			clk.Advance(time.Minute)
			if _, err := m.Lookup(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		if got := st.sets.Load() - before; got != 4 {
			t.Fatalf("got %d writes for an hour of use, want 4 (one per 15 min)", got)
		}
	})
	// A short idle timeout slides with use like a long one: the write-back
	// comes after a quarter of the idle window (at most 15 minutes), not
	// once every 15 minutes whatever the window.
	for _, tc := range []struct {
		idle, every, span time.Duration
	}{
		{idle: 30 * time.Second, every: 5 * time.Second, span: 2 * time.Minute},
		{idle: 30 * time.Second, every: 22 * time.Second, span: 5 * time.Minute}, // gaps just under 3/4 of the window
		{idle: 5 * time.Minute, every: 5 * time.Second, span: 20 * time.Minute},
		{idle: 5 * time.Minute, every: 3*time.Minute + 40*time.Second, span: 30 * time.Minute},
		{idle: 2 * time.Second, every: 250 * time.Millisecond, span: time.Minute},
	} {
		t.Run(fmt.Sprintf("idle %v slides with a request every %v", tc.idle, tc.every), func(t *testing.T) {
			m, clk, st := setupIdle(tc.idle)
			id, _, err := m.Create(ctx, session.New{UserID: "alice", Method: session.MethodDev})
			if err != nil {
				t.Fatal(err)
			}
			before := st.sets.Load()
			n := int(tc.span / tc.every)
			for i := 1; i <= n; i++ {
				clk.Advance(tc.every)
				if _, err := m.Lookup(ctx, id); err != nil {
					t.Fatalf("request %d at %v of continuous use (idle timeout %v): got %v, want the session", i, time.Duration(i)*tc.every, tc.idle, err)
				}
			}
			if got := st.sets.Load() - before; got > int64(n)/2 && tc.every < tc.idle/4 {
				t.Fatalf("got %d writes for %d requests, want at most %d: the idle timeout must slide without a write per request", got, n, n/2)
			}
			// Unused from now on: it ends an idle timeout after the last
			// write-back, never more.
			clk.Advance(tc.idle)
			if _, err := m.Lookup(ctx, id); !errors.Is(err, session.ErrNotFound) {
				t.Fatalf("after %v unused: got %v, want ErrNotFound", tc.idle, err)
			}
		})
	}
	t.Run("the write-back refreshes the stored expiry", func(t *testing.T) {
		m, clk, st := setupIdle(30 * time.Second)
		id, _, _ := m.Create(ctx, session.New{UserID: "alice", Method: session.MethodDev})
		st.lastTTL.Store(0)
		clk.Advance(10 * time.Second)
		if _, err := m.Lookup(ctx, id); err != nil {
			t.Fatal(err)
		}
		if ttl := time.Duration(st.lastTTL.Load()); ttl != 30*time.Second {
			t.Fatalf("the write-back set a ttl of %v, want the whole idle timeout (30s)", ttl)
		}
	})
	// Revocation always wins: a request whose write-back is due, racing a
	// logout, must not bring the record back.
	t.Run("logout between a lookup's read and its write-back wins", func(t *testing.T) {
		m, clk, st := setup()
		id, _, _ := m.Create(ctx, session.New{UserID: "alice", Method: session.MethodDev})
		clk.Advance(8 * time.Minute) // the write-back is due
		st.onNextGet(func() {
			if err := m.Delete(ctx, id); err != nil {
				t.Error(err)
			}
		})
		if _, err := m.Lookup(ctx, id); !errors.Is(err, session.ErrNotFound) {
			t.Fatalf("lookup racing the logout: got %v, want ErrNotFound (its write-back found the record gone)", err)
		}
		assertRevoked(t, st, id, m)
	})
	t.Run("revocation on another instance between a lookup's read and its write-back wins", func(t *testing.T) {
		m, clk, st := setup()
		admin := other(st, clk)
		id, _, _ := m.Create(ctx, session.New{UserID: "alice", Method: session.MethodOIDC, Sub: "sub-a", SID: "sid-a"})
		for _, revoke := range []func() error{
			func() error { _, err := admin.RevokeUser(ctx, "alice"); return err },
			func() error { _, err := admin.RevokeProvider(ctx, "sub-a", "sid-a"); return err },
		} {
			if _, err := m.Lookup(ctx, id); err != nil {
				t.Fatal(err)
			}
			clk.Advance(8 * time.Minute) // the write-back is due
			st.onNextGet(func() {
				if err := revoke(); err != nil {
					t.Error(err)
				}
			})
			if _, err := m.Lookup(ctx, id); !errors.Is(err, session.ErrNotFound) {
				t.Fatalf("lookup racing the revocation: got %v, want ErrNotFound", err)
			}
			assertRevoked(t, st, id, m, admin)
			id, _, _ = m.Create(ctx, session.New{UserID: "alice", Method: session.MethodOIDC, Sub: "sub-a", SID: "sid-a"})
		}
	})
	t.Run("logout between a lookup's read and its local copy wins", func(t *testing.T) {
		m, clk, st := setup()
		peer := other(st, clk)
		for _, revoker := range []*session.Manager{m, peer} {
			id, _, _ := m.Create(ctx, session.New{UserID: "alice", Method: session.MethodDev})
			clk.Advance(10 * time.Second) // no write-back due
			st.onNextGet(func() {
				if err := revoker.Delete(ctx, id); err != nil {
					t.Error(err)
				}
			})
			_, _ = m.Lookup(ctx, id) // in flight when the logout came: may be served
			if revoker != m {
				waitInvalidated(t, m, id)
			}
			assertRevoked(t, st, id, m, peer)
		}
	})
	t.Run("expiresAt is the earlier deadline", func(t *testing.T) {
		m, clk, _ := setup()
		_, rec, _ := m.Create(ctx, session.New{UserID: "alice", Method: session.MethodDev})
		if got, want := m.ExpiresAt(rec), clk.Now().Add(30*time.Minute); !got.Equal(want) {
			t.Fatalf("got %v, want %v", got, want)
		}
		rec.LastSeen = rec.CreatedAt.Add(11*time.Hour + 50*time.Minute)
		if got, want := m.ExpiresAt(rec), rec.CreatedAt.Add(12*time.Hour); !got.Equal(want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
	t.Run("list, revoke one, revoke all", func(t *testing.T) {
		m, _, _ := setup()
		a, _, _ := m.Create(ctx, session.New{UserID: "lia", Method: session.MethodDev})
		b, _, _ := m.Create(ctx, session.New{UserID: "lia", Method: session.MethodOIDC, Sub: "sub-1", SID: "sid-1"})
		other, _, _ := m.Create(ctx, session.New{UserID: "max", Method: session.MethodDev})
		list, err := m.List(ctx, "lia")
		if err != nil || len(list) != 2 {
			t.Fatalf("got %d sessions, %v; want 2", len(list), err)
		}
		for _, in := range list {
			if in.Handle == a || in.Handle == b || in.UserID != "lia" {
				t.Fatalf("listed %+v: a handle must not be the session id", in)
			}
		}
		if ok, err := m.DeleteForUser(ctx, "max", session.Handle(a)); ok || err != nil {
			t.Fatalf("another user deleted lia's session: %v, %v", ok, err)
		}
		if ok, err := m.DeleteForUser(ctx, "lia", session.Handle(a)); !ok || err != nil {
			t.Fatalf("got %v, %v; want lia's session deleted", ok, err)
		}
		if _, err := m.Lookup(ctx, a); !errors.Is(err, session.ErrNotFound) {
			t.Fatalf("deleted session: got %v, want ErrNotFound", err)
		}
		revoked, err := m.RevokeProvider(ctx, "sub-1", "sid-1")
		if err != nil || len(revoked) != 1 {
			t.Fatalf("back-channel by sid: got %d, %v; want 1", len(revoked), err)
		}
		if _, err := m.Lookup(ctx, b); !errors.Is(err, session.ErrNotFound) {
			t.Fatalf("after back-channel logout: got %v, want ErrNotFound", err)
		}
		if list, _ := m.List(ctx, "lia"); len(list) != 0 {
			t.Fatalf("got %d sessions left, want 0", len(list))
		}
		revoked, _ = m.RevokeUser(ctx, "max")
		if _, err := m.Lookup(ctx, other); len(revoked) != 1 || !errors.Is(err, session.ErrNotFound) {
			t.Fatalf("revoke user: got %d revoked, lookup %v", len(revoked), err)
		}
	})
	t.Run("delete ends the session", func(t *testing.T) {
		m, _, _ := setup()
		id, _, _ := m.Create(ctx, session.New{UserID: "alice", Method: session.MethodDev})
		if err := m.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Lookup(ctx, id); !errors.Is(err, session.ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
	})
}

// assertRevoked checks that no manager serves the session and that its
// record is gone from the store.
func assertRevoked(t *testing.T, st session.Store, id string, ms ...*session.Manager) {
	t.Helper()
	ctx := context.Background()
	for i, m := range ms {
		for range 3 {
			if rec, err := m.Lookup(ctx, id); !errors.Is(err, session.ErrNotFound) {
				t.Fatalf("instance %d after the revocation: got %+v, %v; want ErrNotFound", i, rec, err)
			}
		}
	}
	if b, err := st.Get(ctx, sessionKey(id)); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("the revoked session's record is in the store: %s, %v", b, err)
	}
}

// waitInvalidated waits until m refuses the session: an invalidation
// published on another instance arrives asynchronously over Redis pub/sub.
// The test clock stands still, so a local copy that outlived its
// invalidation would be served for ever: the wait then fails.
func waitInvalidated(t *testing.T, m *session.Manager, id string) {
	t.Helper()
	poll.Until(t, 2*time.Second, "the instance refuses its local copy of a session revoked elsewhere", func() bool {
		_, err := m.Lookup(context.Background(), id)
		return errors.Is(err, session.ErrNotFound)
	})
}

func TestManagerMemory(t *testing.T) {
	managerSuite(t, func(now func() time.Time) session.Store { return kv.NewMemory(now) })
}

func TestManagerRedis(t *testing.T) {
	t.Parallel()
	c, prefix := redistest.Client(t)
	managerSuite(t, func(func() time.Time) session.Store { return kv.NewRedis(c, prefix) })
}

// Two managers on one Redis are two instances: a session made on one is
// served by the other, and a logout on one is seen by the other at once.
func TestRedisSharedAcrossInstances(t *testing.T) {
	c, prefix := redistest.Client(t)
	ctx := context.Background()
	opts := session.Options{IdleTimeout: time.Hour, AbsoluteTimeout: 2 * time.Hour}
	a := session.NewManager(kv.NewRedis(c, prefix), opts)
	b := session.NewManager(kv.NewRedis(c, prefix), opts)
	id, _, err := a.Create(ctx, session.New{UserID: "bob", Method: session.MethodDev})
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := b.Lookup(ctx, id); err != nil || rec.UserID != "bob" {
		t.Fatalf("other instance: got %+v, %v; want bob", rec, err)
	}
	if err := a.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Lookup(ctx, id); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("after logout elsewhere: got %v, want ErrNotFound", err)
	}
}

// Redis holds neither the session id (it is the session token) nor any
// value that could be replayed as one.
func TestRedisHoldsNoSessionID(t *testing.T) {
	c, prefix := redistest.Client(t)
	ctx := context.Background()
	m := session.NewManager(kv.NewRedis(c, prefix), session.Options{IdleTimeout: time.Hour, AbsoluteTimeout: 2 * time.Hour})
	id, _, err := m.Create(ctx, session.New{UserID: "carol", Method: session.MethodDev})
	if err != nil {
		t.Fatal(err)
	}
	keys := redistest.Keys(ctx, c, prefix)
	if len(keys) != 2 {
		t.Fatalf("got keys %v, want the session and the user's index", keys)
	}
	for _, k := range keys {
		v := c.Get(ctx, k).Val() + strings.Join(c.SMembers(ctx, k).Val(), ",")
		if strings.Contains(k, id) || strings.Contains(v, id) {
			t.Fatalf("Redis holds the session id in key %q or its value", k)
		}
	}
}

// With the local layer, a session ended on one instance is refused by
// every other at once when the revocation answers (each acknowledged
// dropping its copy, or its lease ran out: no poll, no slack), and as soon
// as Redis reports the key's delete even if no message came at all.
func TestRevocationReachesOtherInstances(t *testing.T) {
	c, prefix := redistest.Client(t)
	ctx := context.Background()
	opts := session.Options{IdleTimeout: time.Hour, AbsoluteTimeout: 2 * time.Hour, LocalBytes: 1 << 20}
	a := session.NewManager(kv.NewRedis(c, prefix), opts)
	startRun(t, a)
	others := make([]*session.Manager, 3)
	for i := range others {
		others[i] = session.NewManager(kv.NewRedis(c, prefix), opts)
		startRun(t, others[i])
		waitUntil(t, "a member of the sessions' group", others[i].Member) // its local copies are trusted
	}
	var slowest time.Duration
	for try := range 50 {
		id, _, _ := a.Create(ctx, session.New{UserID: "rev", Method: session.MethodDev})
		for _, o := range others {
			if _, err := o.Lookup(ctx, id); err != nil { // o now holds it locally
				t.Fatal(err)
			}
		}
		start := time.Now()
		if err := a.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
		slowest = max(slowest, time.Since(start))
		for n, o := range others {
			if _, err := o.Lookup(ctx, id); !errors.Is(err, session.ErrNotFound) {
				t.Fatalf("try %d: instance %d once the logout answered: got %v, want ErrNotFound", try, n+1, err)
			}
		}
	}
	t.Logf("the slowest of 50 logouts answered in %v, every other instance refusing the session by then", slowest)

	// No message at all: the key vanishes behind b's back (its deleter
	// died before publishing). Redis tracks the session keys and reports
	// the delete itself: b refuses the session at once, while a copy
	// older than localTTL that nothing changed is still served.
	clk := testclock.New(time.Unix(1_700_000_000, 0))
	opts.Now = clk.Now
	store := &countingGets{Tracked: redistest.NewTracked(c, prefix)}
	b2 := session.NewManager(store, opts)
	startRun(t, b2)
	waitUntil(t, "session keys tracked", b2.Tracked)
	id, _, _ := a.Create(ctx, session.New{UserID: "rev2", Method: session.MethodDev})
	// Redis reports the create's own write to b2 too, on another
	// connection than b2's read: let it arrive first, or it forgets the copy
	// b2 keeps next. A marker written after it is reported after it.
	if err := store.Sync(ctx, "sess:"); err != nil {
		t.Fatal(err)
	}
	if _, err := b2.Lookup(ctx, id); err != nil {
		t.Fatal(err)
	}
	// Past localTTL on b2's clock, which its lease is measured on too:
	// moved in steps, each followed by renewals, as real time would be.
	advanceRenewing(t, clk, &store.renews, 2*time.Second)
	waitUntil(t, "session keys tracked", b2.Tracked) // a lease that lapsed under load would send the next read to the store
	gets := store.gets.Load()
	if _, err := b2.Lookup(ctx, id); err != nil {
		t.Fatalf("a tracked copy past localTTL, unchanged: got %v, want the session", err)
	}
	if n := store.gets.Load() - gets; n != 0 {
		t.Fatalf("a tracked copy past localTTL read the store %d times, want 0", n)
	}
	redistest.DeletePrefix(ctx, c, prefix+"sess:")
	start := time.Now()
	waitUntil(t, "the deleted session refused", func() bool {
		_, err := b2.Lookup(ctx, id)
		return errors.Is(err, session.ErrNotFound)
	})
	if took := time.Since(start); took > time.Second {
		t.Fatalf("a session deleted with no message was served for %v, want under 1s", took)
	} else {
		t.Logf("a delete with no message reached the other instance in %v", took)
	}
}

// countingGets is a Redis store that counts its GETs; it is still a
// kv.Tracker (the embedded Redis's Track).
type countingGets struct {
	*redistest.Tracked
	gets   atomic.Int64
	renews atomic.Int64 // renewals of the instance's lease begun
}

func (s *countingGets) Get(ctx context.Context, key string) ([]byte, error) {
	s.gets.Add(1)
	return s.Tracked.Get(ctx, key)
}

func (s *countingGets) Renew(ctx context.Context, group, member string, lease time.Duration, done []string) ([]string, error) {
	s.renews.Add(1)
	return s.Tracked.Renew(ctx, group, member, lease, done)
}

// advanceRenewing moves clk on by d in steps shorter than an instance's
// lease, and after each waits for two renewals to begin (so that one began
// after the step): the lease, measured on clk, holds throughout, as it
// does while real time passes.
func advanceRenewing(t *testing.T, clk *testclock.Clock, renews *atomic.Int64, d time.Duration) {
	t.Helper()
	for d > 0 {
		step := min(d, 500*time.Millisecond)
		clk.Advance(step)
		d -= step
		n := renews.Load()
		waitUntil(t, "two renewals of the lease", func() bool { return renews.Load() >= n+2 })
	}
}

// Without key tracking (the in-process store here; a Redis Cluster), a
// session deleted with no message is still served from the local copy
// for at most localTTL.
func TestUntrackedLostMessageIsBoundedByLocalTTL(t *testing.T) {
	ctx := context.Background()
	clk := testclock.New(time.Unix(1_700_000_000, 0))
	store := kv.NewMemory(clk.Now)
	opts := session.Options{IdleTimeout: time.Hour, AbsoluteTimeout: 2 * time.Hour, LocalBytes: 1 << 20, Now: clk.Now}
	a, b := session.NewManager(store, opts), session.NewManager(store, opts)
	startRun(t, b)
	id, _, _ := a.Create(ctx, session.New{UserID: "rev3", Method: session.MethodDev})
	if _, err := b.Lookup(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := store.Del(ctx, "sess:"+session.Handle(id)); err != nil { // no message
		t.Fatal(err)
	}
	if _, err := b.Lookup(ctx, id); err != nil {
		t.Fatalf("within localTTL: got %v, want the local copy", err)
	}
	clk.Advance(time.Second)
	if _, err := b.Lookup(ctx, id); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("after localTTL: got %v, want ErrNotFound", err)
	}
}

// waitUntil polls cond for up to 5 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, 5*time.Second, what, cond)
}
