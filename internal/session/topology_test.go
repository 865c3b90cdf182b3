//go:build integration

package session_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/session"
	"github.com/fintech-bff/bff/internal/testing/poll"
	"github.com/fintech-bff/bff/internal/testing/redistest"
)

func managerSuiteOnPrefixes(t *testing.T, c redis.UniversalClient) {
	redistest.OnFlushedPrefixes(t, c, func(t *testing.T, prefix string) {
		managerSuite(t, func(func() time.Time) session.Store { return kv.NewRedis(c, prefix) })
	})
}

func TestManagerRedisCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	managerSuiteOnPrefixes(t, cl.UniversalClient(t))
}

func TestManagerRedisSentinel(t *testing.T) {
	t.Parallel()
	s := redistest.StartSentinel(t)
	managerSuiteOnPrefixes(t, s.UniversalClient(t))
}

// When the Sentinel fails the master over, the same Manager on the same
// client keeps every session made before (no one is logged out), makes new
// ones, and in between fails closed (ErrUnavailable, never ErrNotFound).
func TestSessionsSurviveSentinelFailover(t *testing.T) {
	t.Parallel()
	s := redistest.StartSentinel(t)
	c := s.UniversalClient(t)
	m := session.NewManager(kv.NewRedis(c, "bff:"), session.Options{IdleTimeout: time.Hour, AbsoluteTimeout: 2 * time.Hour})
	ctx := context.Background()
	var before []string
	for i := range 20 {
		id, _, err := m.Create(ctx, session.New{UserID: fmt.Sprintf("user-%d", i%5), Method: session.MethodDev})
		if err != nil {
			t.Fatal(err)
		}
		before = append(before, id)
	}
	s.WaitReplicated(t)

	s.KillMaster(t)
	killed := time.Now()
	var (
		after             string
		outages           int
		errRead, errWrite error
	)
	if !poll.Within(30*time.Second-time.Since(killed), func() bool { // the failover's end
		actx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, errRead = m.Lookup(actx, before[0])
		cancel()
		actx, cancel = context.WithTimeout(ctx, 500*time.Millisecond)
		var id string
		id, _, errWrite = m.Create(actx, session.New{UserID: "after-failover", Method: session.MethodDev})
		cancel()
		if errRead == nil && errWrite == nil {
			after = id
			return true
		}
		for _, err := range []error{errRead, errWrite} {
			if err != nil && !errors.Is(err, session.ErrUnavailable) {
				t.Fatalf("during the failover: got %v, want ErrUnavailable (fail closed, never logged out)", err)
			}
		}
		outages++
		return false
	}) {
		t.Fatalf("the manager did not recover within 30s of the master's death: read %v, write %v\n%s", errRead, errWrite, s.Logs())
	}
	recovered := time.Since(killed)
	promoted := s.WaitFailover(t)
	t.Logf("failover: sessions readable and writable again %v after the master was killed (%d failed attempts); promotion confirmed at %v",
		recovered, outages, promoted)

	for i, id := range before {
		rec, err := m.Lookup(ctx, id)
		if want := fmt.Sprintf("user-%d", i%5); err != nil || rec.UserID != want {
			t.Fatalf("session %d made before the failover: got %+v, %v; want %s's", i, rec, err, want)
		}
	}
	if rec, err := m.Lookup(ctx, after); err != nil || rec.UserID != "after-failover" {
		t.Fatalf("session made after the failover: got %+v, %v", rec, err)
	}
	if list, err := m.List(ctx, "user-0"); err != nil || len(list) != 4 {
		t.Fatalf("user-0's sessions after the failover: got %d, %v; want 4", len(list), err)
	}
	revoked, err := m.RevokeUser(ctx, "user-1")
	if err != nil || len(revoked) != 4 {
		t.Fatalf("revoking user-1 after the failover: got %d, %v; want 4", len(revoked), err)
	}
	if _, err := m.Lookup(ctx, before[1]); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("revoked session: got %v, want ErrNotFound", err)
	}
}
