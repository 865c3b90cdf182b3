//go:build integration

package session_test

import (
	"context"
	"errors"
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

// lateMessages is an instance's view of the store whose invalidation
// messages arrive late (a paused process, a slow connection) or never (a
// cut subscription), and which has no key tracking: its copies are
// forgotten only by those messages or by its lease.
type lateMessages struct {
	session.Store
	delay time.Duration
	drop  atomic.Bool
}

func (l *lateMessages) Subscribe(ctx context.Context, channel string, onMessage func(string), onReady func(bool)) {
	l.Store.Subscribe(ctx, channel, func(msg string) {
		if strings.HasPrefix(msg, "inv ") {
			if l.drop.Load() {
				return
			}
			time.Sleep(l.delay) // fake latency: holds the subscription, as a paused process does
		}
		onMessage(msg)
	}, onReady)
}

func startMember(t *testing.T, m *session.Manager) {
	t.Helper()
	startRun(t, m)
	poll.Until(t, 5*time.Second, "the instance's lease started", m.Member)
}

// A revocation answers only once no instance can serve the session: an
// instance whose invalidation arrives late is waited for, and one that
// never gets it is waited for until its lease runs out, after which it
// does not trust its copies (it cannot renew its lease while the
// invalidation is pending for it).
func TestRevocationWaitsForEveryInstance(t *testing.T) {
	t.Parallel()
	t.Run("redis", func(t *testing.T) {
		c, prefix := redistest.Client(t)
		revocationWaits(t, kv.NewRedis(c, prefix))
	})
	t.Run("cluster", func(t *testing.T) {
		cl := redistest.StartCluster(t, 3)
		revocationWaits(t, kv.NewRedis(cl.UniversalClient(t), "bff:"))
	})
}

func revocationWaits(t *testing.T, store session.Store) {
	ctx := context.Background()
	opts := session.Options{IdleTimeout: time.Hour, AbsoluteTimeout: 2 * time.Hour, LocalBytes: 1 << 20}
	late := &lateMessages{Store: store, delay: 300 * time.Millisecond}
	a, b := session.NewManager(store, opts), session.NewManager(late, opts)
	startMember(t, a)
	startMember(t, b)

	round := func(t *testing.T) {
		t.Helper()
		id, _, err := a.Create(ctx, session.New{UserID: "alice", Method: session.MethodDev})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ { // warm: b now serves it from its copy
			if _, err := b.Lookup(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Lookup(ctx, id); !errors.Is(err, session.ErrNotFound) {
			t.Fatalf("the other instance served the session after the logout returned: got %v, want ErrNotFound", err)
		}
	}

	t.Run("an instance whose message is late", func(t *testing.T) {
		for i := 0; i < 10; i++ {
			round(t)
		}
	})

	t.Run("an instance that never gets the message", func(t *testing.T) {
		late.drop.Store(true)
		round(t)
		late.drop.Store(false)
		// It caught up: forgot everything, renewed, and trusts again.
		poll.Until(t, 5*time.Second, "the instance renewed its lease after the missed invalidation", b.Member)
		round(t)
	})
}

// refusedRenewals is a store whose lease renewals fail while refuse is
// set, as a Redis the instance cannot reach would.
type refusedRenewals struct {
	session.Store
	refuse atomic.Bool
}

func (r *refusedRenewals) Renew(ctx context.Context, group, member string, lease time.Duration, done []string) ([]string, error) {
	if r.refuse.Load() {
		return nil, kv.ErrUnavailable
	}
	return r.Store.Renew(ctx, group, member, lease, done)
}

// The lease is measured on the instance's clock (Options.Now): once its
// renewals fail, it stops serving its copies when that clock passes the
// lease. The test moves the clock; nothing sleeps.
func TestLeaseRunsOutOnTheInstancesClock(t *testing.T) {
	ctx := context.Background()
	clk := testclock.New(time.Unix(1_700_000_000, 0))
	renewals := &refusedRenewals{Store: kv.NewMemory(clk.Now)}
	st := &countingStore{Store: renewals}
	m := session.NewManager(st, session.Options{IdleTimeout: time.Hour, AbsoluteTimeout: 2 * time.Hour, LocalBytes: 1 << 20, Now: clk.Now})
	startMember(t, m)
	id, _, err := m.Create(ctx, session.New{UserID: "lee", Method: session.MethodDev})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Lookup(ctx, id); err != nil { // kept
		t.Fatal(err)
	}
	gets := st.gets.Load()
	if _, err := m.Lookup(ctx, id); err != nil || st.gets.Load() != gets {
		t.Fatalf("under a held lease: got %v and %d store reads, want the session from the copy", err, st.gets.Load()-gets)
	}
	renewals.refuse.Store(true)
	clk.Advance(time.Second)
	if m.Member() {
		t.Fatal("the lease holds a second after the last renewal on the instance's clock, want it run out")
	}
	if _, err := m.Lookup(ctx, id); err != nil || st.gets.Load() != gets+1 {
		t.Fatalf("after the lease ran out: got %v and %d store reads, want the session read from the store once", err, st.gets.Load()-gets)
	}
}
