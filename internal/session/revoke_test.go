//go:build integration

package session_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/session"
	"github.com/fintech-bff/bff/internal/testing/poll"
	"github.com/fintech-bff/bff/internal/testing/redistest"
	"github.com/fintech-bff/bff/internal/testing/testclock"
)

// Revocation always wins under load: two instances on one store, 50
// sessions each used on both instances without pause, and each revoked
// (logout, admin revocation, back-channel logout, "sign out that device")
// while requests are in flight. Once the revocation has returned (the
// logout's 204), no request that starts afterwards is served the session,
// and no record of it is left in the store.
//
// There is no slack: a revocation returns only once the other instance
// acknowledged forgetting its in-process copy (or its lease ran out), so a
// request that starts after it is refused on every instance at once.
func TestRevocationWinsUnderLoad(t *testing.T) {
	for _, st := range []struct {
		name string
		new  func(t *testing.T, now func() time.Time) session.Store
	}{
		{"memory", func(_ *testing.T, now func() time.Time) session.Store { return kv.NewMemory(now) }},
		{"redis", func(t *testing.T, _ func() time.Time) session.Store {
			c, prefix := redistest.Client(t)
			return kv.NewRedis(c, prefix)
		}},
	} {
		for _, mode := range []raceMode{
			// Each request first moves the clock on a minute: every
			// request's idle write-back is due, so write-backs race every
			// revocation.
			{name: "write-back due on every request", fast: true, idle: 30 * 24 * time.Hour},
			// Real time, a 4 s idle timeout (a write-back every second per
			// instance) and the in-process copy with pub/sub invalidation.
			{name: "real clock with local copies", local: 1000, idle: 4 * time.Second},
		} {
			t.Run(st.name+"/"+mode.name, func(t *testing.T) {
				var clk *testclock.Clock
				var now func() time.Time
				if mode.fast {
					clk = testclock.New(time.Unix(1_700_000_000, 0))
					now = clk.Now
				}
				revocationRace(t, st.new(t, now), clk, mode)
			})
		}
	}
}

type raceMode struct {
	name  string
	fast  bool
	local int
	idle  time.Duration
}

type raceSession struct {
	id, user, sub, sid string
	by                 int          // the instance that revokes it
	revokedAt          atomic.Int64 // unix ns once the revocation returned
	served             [2]atomic.Int64
	after              [2]atomic.Int64 // requests started after the revocation returned, per instance
}

func revocationRace(t *testing.T, store session.Store, clk *testclock.Clock, mode raceMode) {
	const (
		sessions = 50
		// tail is how many requests for each session each instance starts
		// after its revocation returned, before the test stops them.
		tail = 100
	)
	ctx := context.Background()
	opts := session.Options{IdleTimeout: mode.idle, AbsoluteTimeout: 10 * 365 * 24 * time.Hour, LocalBytes: int64(mode.local) << 10}
	if clk != nil {
		opts.Now = clk.Now
	}
	ms := [2]*session.Manager{session.NewManager(store, opts), session.NewManager(store, opts)}
	if mode.local > 0 {
		startRun(t, ms[0])
		startRun(t, ms[1])
	}
	all := make([]*raceSession, sessions)
	for i := range all {
		s := &raceSession{user: fmt.Sprintf("user-%d", i), sub: fmt.Sprintf("sub-%d", i), sid: fmt.Sprintf("sid-%d", i), by: rand.IntN(2)}
		id, _, err := ms[i%2].Create(ctx, session.New{UserID: s.user, Method: session.MethodOIDC, Sub: s.sub, SID: s.sid})
		if err != nil {
			t.Fatal(err)
		}
		s.id = id
		all[i] = s
	}

	var (
		stop       = make(chan struct{})
		wg         sync.WaitGroup
		mu         sync.Mutex
		violations []string
	)
	for i, s := range all {
		for k, m := range ms {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					if clk != nil {
						clk.Advance(time.Minute)
					}
					rev := s.revokedAt.Load() // before the request starts
					start := time.Now()
					_, err := m.Lookup(ctx, s.id)
					if rev != 0 {
						s.after[k].Add(1)
					}
					switch {
					case err == nil && rev == 0:
						s.served[k].Add(1)
					case err == nil:
						since := start.Sub(time.Unix(0, rev))
						mu.Lock()
						violations = append(violations, fmt.Sprintf("session %d (revoked on instance %d) served by instance %d to a request started %v after the revocation returned", i, s.by, k, since))
						mu.Unlock()
					case !errors.Is(err, session.ErrNotFound):
						t.Errorf("session %d, instance %d: %v", i, k, err)
					}
					// Busy, not flat out: 100 clients on a small machine
					// must leave the revocations some CPU.
					time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond) // fake latency: a client's think time
				}
			})
		}
	}
	halt := sync.OnceFunc(func() {
		close(stop)
		wg.Wait()
	})
	defer halt()

	// Every session is in use on both instances before any revocation.
	poll.Until(t, 10*time.Second, "every session served on both instances", func() bool {
		for _, s := range all {
			if s.served[0].Load() == 0 || s.served[1].Load() == 0 {
				return false
			}
		}
		return true
	})

	for i, p := range rand.Perm(sessions) {
		s, m := all[p], ms[all[p].by]
		var (
			n   int
			err error
		)
		switch i % 4 {
		case 0: // logout
			n, err = 1, m.Delete(ctx, s.id)
		case 1: // operator revokes the user
			var list []session.Info
			list, err = m.RevokeUser(ctx, s.user)
			n = len(list)
		case 2: // back-channel logout
			var list []session.Info
			list, err = m.RevokeProvider(ctx, s.sub, s.sid)
			n = len(list)
		case 3: // the user signs out that device
			var ok bool
			ok, err = m.DeleteForUser(ctx, s.user, session.Handle(s.id))
			n = map[bool]int{true: 1}[ok]
		}
		if err != nil || n != 1 {
			t.Fatalf("revoking session %d: got %d revoked, %v; want 1 (was it still alive?)", p, n, err)
		}
		s.revokedAt.Store(time.Now().UnixNano())
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond) // fake latency: revocations spread as users' are
	}
	// The requests go on until every session was asked for tail times on
	// each instance after its revocation returned: a local copy that
	// outlived its invalidation is served to the first of them.
	poll.Until(t, 30*time.Second, fmt.Sprintf("every session asked for %d times on both instances after its revocation", tail), func() bool {
		for _, s := range all {
			if s.after[0].Load() < tail || s.after[1].Load() < tail {
				return false
			}
		}
		return true
	})
	halt()

	mu.Lock()
	for i, v := range violations {
		if i == 10 {
			t.Errorf("... and %d more", len(violations)-10)
			break
		}
		t.Error(v)
	}
	mu.Unlock()
	left := 0
	for i, s := range all {
		if b, err := store.Get(ctx, sessionKey(s.id)); !errors.Is(err, kv.ErrNotFound) {
			left++
			t.Errorf("session %d: its record is still in the store after the revocation (%d bytes, %v)", i, len(b), err)
		}
		for k, m := range ms {
			if _, err := m.Lookup(ctx, s.id); !errors.Is(err, session.ErrNotFound) {
				t.Errorf("session %d: instance %d still answers %v after the revocation", i, k, err)
			}
		}
		if list, err := ms[0].List(ctx, s.user); err != nil || len(list) != 0 {
			t.Errorf("session %d: the user still lists %d sessions, %v", i, len(list), err)
		}
	}
	if left > 0 {
		t.Errorf("%d of %d sessions survived their revocation in the store", left, sessions)
	}
}
