//go:build integration

package session_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/session"
	"github.com/fintech-bff/bff/internal/testing/redistest"
	"github.com/fintech-bff/bff/internal/testing/testclock"
)

// indexKey is the store key of the set of a user's (kind "user") or a
// provider subject's (kind "sub") session handles.
func indexKey(kind, v string) string {
	sum := sha256.Sum256([]byte(kind + "\x00" + v))
	return "sessidx:" + kind + ":" + base64.RawURLEncoding.EncodeToString(sum[:18])
}

// handles returns the handles of ids, sorted.
func handles(ids ...string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = session.Handle(id)
	}
	slices.Sort(out)
	return out
}

// members returns the set at key, sorted.
func members(t *testing.T, st session.Store, key string) []string {
	t.Helper()
	got, err := st.SMembers(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	return got
}

// unique returns a name no other test uses: the Redis suites share one
// key prefix across their subtests.
func unique(name string) string { return name + "-" + session.NewID()[:12] }

// limitRules is the part of the behaviour suite on what bounds a user's
// sessions: the per-user cap (MaxPerUser) and the pruning of the user's
// index on every login.
func limitRules(t *testing.T, newStore func(now func() time.Time) session.Store, entries int) {
	ctx := context.Background()
	// instances returns n managers (instances) on one store and clock.
	instances := func(t *testing.T, limit, n int) ([]*session.Manager, *testclock.Clock, *countingStore) {
		clk := testclock.New(time.Unix(1_700_000_000, 0))
		st := &countingStore{Store: newStore(clk.Now)}
		ms := make([]*session.Manager, n)
		for i := range ms {
			ms[i] = session.NewManager(st, session.Options{IdleTimeout: 30 * time.Minute, AbsoluteTimeout: 12 * time.Hour,
				Now: clk.Now, LocalBytes: int64(entries) << 10, MaxPerUser: limit})
			if entries > 0 {
				startRun(t, ms[i])
			}
		}
		return ms, clk, st
	}

	// A login beyond the cap ends the user's oldest sessions as a
	// revocation does: gone from the store and the user's index, and
	// refused by every instance, also by one holding a fresh local copy
	// (the clock stands still between the last lookups and the login, so
	// only the invalidation message can forget it). The newest survive.
	for _, tc := range []struct {
		limit, logins, instances int
	}{
		{limit: 3, logins: 4, instances: 1},
		{limit: 3, logins: 4, instances: 2},
		{limit: 3, logins: 7, instances: 2},
		{limit: 3, logins: 3, instances: 2},
		{limit: 1, logins: 3, instances: 2},
		{limit: 0, logins: 25, instances: 1}, // 0: no cap
		{limit: 0, logins: 25, instances: 2},
	} {
		t.Run(fmt.Sprintf("cap %d, %d logins on %d instances", tc.limit, tc.logins, tc.instances), func(t *testing.T) {
			ms, clk, st := instances(t, tc.limit, tc.instances)
			una := unique("una")
			var ids []string
			for i := range tc.logins {
				clk.Advance(time.Second)
				for _, id := range ids { // every session in use on every instance
					for _, m := range ms {
						_, _ = m.Lookup(ctx, id)
					}
				}
				id, _, err := ms[i%len(ms)].Create(ctx, session.New{UserID: una, Method: session.MethodDev})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
			}
			keep := tc.logins
			if tc.limit > 0 {
				keep = min(tc.limit, tc.logins)
			}
			ended, live := ids[:len(ids)-keep], ids[len(ids)-keep:]
			for i, id := range ended {
				if b, err := st.Get(ctx, sessionKey(id)); !errors.Is(err, kv.ErrNotFound) {
					t.Fatalf("login %d of %d (beyond the cap of %d): its record is still stored (%d bytes, %v); want it ended", i+1, tc.logins, tc.limit, len(b), err)
				}
				for _, m := range ms {
					waitInvalidated(t, m, id)
				}
				assertRevoked(t, st, id, ms...)
			}
			for i, id := range live {
				for k, m := range ms {
					if rec, err := m.Lookup(ctx, id); err != nil || rec.UserID != una {
						t.Fatalf("login %d of %d on instance %d: got %+v, %v; want una's session (one of the newest %d)", len(ended)+i+1, tc.logins, k, rec, err, keep)
					}
				}
			}
			for k, m := range ms {
				list, err := m.List(ctx, una)
				if err != nil {
					t.Fatal(err)
				}
				got := make([]string, len(list))
				for i, in := range list {
					got[i] = in.Handle
				}
				slices.Sort(got)
				if want := handles(live...); !slices.Equal(got, want) {
					t.Fatalf("instance %d lists %d sessions %v, want the newest %d %v", k, len(got), got, len(want), want)
				}
			}
			if got, want := members(t, st, indexKey("user", una)), handles(live...); !slices.Equal(got, want) {
				t.Fatalf("the user's index holds %d handles %v, want the %d live ones %v", len(got), got, len(want), want)
			}
		})
	}

	t.Run("the cap is per user", func(t *testing.T) {
		ms, clk, _ := instances(t, 2, 1)
		m := ms[0]
		vic, wes := unique("vic"), unique("wes")
		var ids []string
		for _, u := range []string{vic, wes, vic, wes, vic} {
			clk.Advance(time.Second)
			id, _, err := m.Create(ctx, session.New{UserID: u, Method: session.MethodDev})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		for i, want := range []bool{false, true, true, true, true} {
			if _, err := m.Lookup(ctx, ids[i]); (err == nil) != want {
				t.Fatalf("login %d: got %v, want live %v", i+1, err, want)
			}
		}
	})

	// Every login prunes the handles of ended sessions from the user's
	// index (and the provider subject's), without a List: the index does
	// not grow with logins that are never listed.
	for _, limit := range []int{0, 3, 20} {
		t.Run(fmt.Sprintf("a login prunes ended sessions from the index (cap %d)", limit), func(t *testing.T) {
			ms, clk, st := instances(t, limit, 1)
			m := ms[0]
			pat, sub := unique("pat"), unique("sub-p")
			var old []string
			for i := range 3 {
				clk.Advance(time.Second)
				id, _, err := m.Create(ctx, session.New{UserID: pat, Method: session.MethodOIDC, Sub: sub, SID: unique(fmt.Sprintf("sid-%d", i))})
				if err != nil {
					t.Fatal(err)
				}
				old = append(old, id)
			}
			if got, want := members(t, st, indexKey("user", pat)), handles(old...); !slices.Equal(got, want) {
				t.Fatalf("before: the user's index holds %v, want %v", got, want)
			}
			clk.Advance(31 * time.Minute) // all three idle for longer than the idle timeout
			id, _, err := m.Create(ctx, session.New{UserID: pat, Method: session.MethodOIDC, Sub: sub, SID: unique("sid-new")})
			if err != nil {
				t.Fatal(err)
			}
			for _, ix := range []string{indexKey("user", pat), indexKey("sub", sub)} {
				if got, want := members(t, st, ix), handles(id); !slices.Equal(got, want) {
					t.Fatalf("index %s holds %d handles %v, want only the new session's %v", ix, len(got), got, want)
				}
			}
		})
	}

	// Without a cap a user may keep any number of sessions: a login then
	// checks a bounded sample of the index, not all of it, and still
	// wears the ended handles away.
	t.Run("without a cap a login reads a bounded sample of the index", func(t *testing.T) {
		ms, clk, st := instances(t, 0, 1)
		m := ms[0]
		quin := unique("quin")
		for range 40 {
			if _, _, err := m.Create(ctx, session.New{UserID: quin, Method: session.MethodDev}); err != nil {
				t.Fatal(err)
			}
		}
		clk.Advance(31 * time.Minute)
		st.gets.Store(0)
		if _, _, err := m.Create(ctx, session.New{UserID: quin, Method: session.MethodDev}); err != nil {
			t.Fatal(err)
		}
		if got := st.gets.Load(); got > 32 {
			t.Fatalf("a login read %d sessions, want at most 32", got)
		}
		if got := len(members(t, st, indexKey("user", quin))); got != 1+40-32 {
			t.Fatalf("after the first login the index holds %d handles, want %d (the new one and the 8 not sampled)", got, 1+40-32)
		}
		if _, _, err := m.Create(ctx, session.New{UserID: quin, Method: session.MethodDev}); err != nil {
			t.Fatal(err)
		}
		if got := len(members(t, st, indexKey("user", quin))); got != 2 {
			t.Fatalf("after the second login the index holds %d handles, want 2 (the live ones)", got)
		}
	})
}

// Logins racing on two instances (separate Redis clients, local layers on,
// real clock) keep the cap approximately: the newest `limit` sessions
// always survive, none of the logins fails, and the next login converges
// the user to exactly `limit` sessions, refused everywhere beyond them.
func TestSessionCapConvergesAcrossInstances(t *testing.T) {
	const (
		limit  = 3
		logins = 40
	)
	c, prefix := redistest.Client(t)
	ctx := context.Background()
	opts := session.Options{IdleTimeout: time.Hour, AbsoluteTimeout: 2 * time.Hour, LocalBytes: 1 << 20, MaxPerUser: limit}
	ms := []*session.Manager{session.NewManager(kv.NewRedis(c, prefix), opts), session.NewManager(kv.NewRedis(c, prefix), opts)}
	for _, m := range ms {
		startRun(t, m)
	}
	type made struct {
		id  string
		rec session.Record
	}
	var (
		mu   sync.Mutex
		all  []made
		wg   sync.WaitGroup
		errs = make(chan error, logins)
	)
	for i := range logins {
		wg.Go(func() {
			id, rec, err := ms[i%2].Create(ctx, session.New{UserID: "race", Method: session.MethodDev})
			if err != nil {
				errs <- err
				return
			}
			_, _ = ms[(i+1)%2].Lookup(ctx, id) // the other instance holds a copy
			mu.Lock()
			all = append(all, made{id, rec})
			mu.Unlock()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a racing login failed: %v", err)
	}
	slices.SortFunc(all, func(a, b made) int {
		if c := a.rec.CreatedAt.Compare(b.rec.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(session.Handle(a.id), session.Handle(b.id))
	})
	list, err := ms[0].List(ctx, "race")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after %d racing logins with a cap of %d: %d sessions live", logins, limit, len(list))
	for _, s := range all[len(all)-limit:] {
		if _, err := ms[0].Lookup(ctx, s.id); err != nil {
			t.Fatalf("one of the newest %d sessions after the race: got %v, want it live", limit, err)
		}
	}
	if len(list) < limit {
		t.Fatalf("got %d sessions after the race, want at least %d", len(list), limit)
	}

	id, _, err := ms[1].Create(ctx, session.New{UserID: "race", Method: session.MethodDev})
	if err != nil {
		t.Fatal(err)
	}
	want := handles(id, all[len(all)-2].id, all[len(all)-1].id)
	for k, m := range ms {
		list, err := m.List(ctx, "race")
		if err != nil {
			t.Fatal(err)
		}
		got := make([]string, len(list))
		for i, in := range list {
			got[i] = in.Handle
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("instance %d after the next login: got %d sessions %v, want the newest %d %v", k, len(got), got, limit, want)
		}
	}
	for _, s := range all[:len(all)-2] {
		for _, m := range ms {
			waitInvalidated(t, m, s.id)
		}
	}
}
