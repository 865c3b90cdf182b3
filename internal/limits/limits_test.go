//go:build integration

package limits_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fintech-bff/bff/internal/limits"
	"github.com/fintech-bff/bff/internal/testing/redistest"
)

type store interface {
	Allow(ctx context.Context, key string, perMinute int) (limits.Decision, error)
	Hold(ctx context.Context, key string, every time.Duration) (limits.Decision, error)
	Release(ctx context.Context, key, token string) error
}

var (
	_ store = (*limits.Redis)(nil)
	_ store = (*limits.Local)(nil)
)

// stores runs f against Redis (two instances sharing it) and the local store.
func stores(t *testing.T, f func(t *testing.T, a, b store)) {
	t.Run("redis", func(t *testing.T) {
		c, prefix := redistest.Client(t)
		f(t, limits.NewRedis(c, prefix), limits.NewRedis(c, prefix))
	})
	t.Run("local", func(t *testing.T) {
		l := limits.NewLocal(nil)
		f(t, l, l)
	})
}

func TestAllowIsOneBudgetAcrossInstances(t *testing.T) {
	ctx := context.Background()
	stores(t, func(t *testing.T, a, b store) {
		key := fmt.Sprintf("auth:%d", time.Now().UnixNano())
		var allowed atomic.Int64
		var wg sync.WaitGroup
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := a
				if i%2 == 1 {
					s = b
				}
				d, err := s.Allow(ctx, key, 6)
				if err != nil {
					t.Error(err)
				}
				if d.Allowed {
					allowed.Add(1)
				} else if d.RetryAfter <= 0 || d.RetryAfter > 10*time.Second {
					t.Errorf("a refusal's RetryAfter is %v, want (0, 10s]", d.RetryAfter)
				}
			}()
		}
		wg.Wait()
		if n := allowed.Load(); n != 6 {
			t.Fatalf("got %d allowed of 20 across two instances, want 6 (the burst of 6 a minute)", n)
		}
	})
}

func TestLocalAllowRefills(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := limits.NewLocal(func() time.Time { return now })
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if d, _ := l.Allow(ctx, "k", 3); !d.Allowed {
			t.Fatalf("request %d refused within the burst", i)
		}
	}
	d, _ := l.Allow(ctx, "k", 3)
	if d.Allowed || d.RetryAfter != 20*time.Second {
		t.Fatalf("got %+v, want refused for 20s", d)
	}
	now = now.Add(20 * time.Second)
	if d, _ := l.Allow(ctx, "k", 3); !d.Allowed {
		t.Fatal("refused after the interval")
	}
}

func TestHoldOncePerInterval(t *testing.T) {
	ctx := context.Background()
	stores(t, func(t *testing.T, a, b store) {
		key := fmt.Sprintf("refresh:%d", time.Now().UnixNano())
		first, err := a.Hold(ctx, key, time.Minute)
		if err != nil || !first.Allowed || first.Token == "" {
			t.Fatalf("first hold: got %+v, %v", first, err)
		}
		second, _ := b.Hold(ctx, key, time.Minute)
		if second.Allowed || second.RetryAfter <= 50*time.Second || second.RetryAfter > time.Minute {
			t.Fatalf("second hold on another instance: got %+v, want refused with about a minute left", second)
		}
		_ = b.Release(ctx, key, "not-the-token")
		if d, _ := b.Hold(ctx, key, time.Minute); d.Allowed {
			t.Fatal("a release with another token freed the hold")
		}
		if err := b.Release(ctx, key, first.Token); err != nil {
			t.Fatal(err)
		}
		if d, _ := a.Hold(ctx, key, time.Minute); !d.Allowed {
			t.Fatal("the hold was not given back")
		}
	})
}

// Every key the budgets write is under their prefix: run as the
// Redis user docs/operations.md gives operators, limited to the prefix,
// on a single Redis and on a Cluster, every call answers and a budget
// still refuses past its burst; no command or key was refused, and the
// servers hold no key outside the prefix. redis_rate's "rate:" keys
// failed here with NOPERM.
func TestKeysStayUnderThePrefix(t *testing.T) {
	type topology struct {
		client  func(t *testing.T, user, password string) redis.UniversalClient
		denials func(t testing.TB) []string
		keys    func(t testing.TB) []string
	}
	topologies := map[string]func(t *testing.T, prefix, password string) topology{
		"single": func(t *testing.T, prefix, password string) topology {
			s := redistest.StartServer(t)
			s.SetUser(t, "bff", redistest.DocumentedUser(t, prefix, password)...)
			return topology{
				client: func(t *testing.T, user, password string) redis.UniversalClient {
					c := redis.NewClient(&redis.Options{Addr: s.Addr, Username: user, Password: password, DialTimeout: 2 * time.Second})
					t.Cleanup(func() { _ = c.Close() })
					return c
				},
				denials: s.Denials, keys: s.AllKeys,
			}
		},
		"cluster": func(t *testing.T, prefix, password string) topology {
			c := redistest.StartCluster(t, 3)
			c.SetUser(t, "bff", redistest.DocumentedUser(t, prefix, password)...)
			return topology{
				client: func(t *testing.T, user, password string) redis.UniversalClient {
					cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), Username: user, Password: password, DialTimeout: 2 * time.Second})
					t.Cleanup(func() { _ = cc.Close() })
					return cc
				},
				denials: c.Denials, keys: c.AllKeys,
			}
		},
	}
	for name, start := range topologies {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			const prefix, password = "app7:", "limits-test-password"
			top := start(t, prefix, password)
			c := top.client(t, "bff", password)
			r := limits.NewRedis(c, prefix+"lim:")
			for i := range 4 {
				d, err := r.Allow(ctx, "auth:192.0.2.1", 3)
				if err != nil {
					t.Fatalf("Allow %d: %v", i, err)
				}
				if want := i < 3; d.Allowed != want {
					t.Fatalf("Allow %d: got allowed %v, want %v (a burst of 3)", i, d.Allowed, want)
				}
			}
			hold, err := r.Hold(ctx, "refresh:u1", time.Minute)
			if err != nil || !hold.Allowed {
				t.Fatalf("Hold: got %+v, %v", hold, err)
			}
			if err := r.Release(ctx, "refresh:u1", hold.Token); err != nil {
				t.Fatal(err)
			}
			counter := limits.NewCounterRedis(c, prefix+"lim:", time.Minute)
			if _, err := counter.Add(ctx, []string{"a", "b", "c"}, []int64{1, 2, 3}); err != nil {
				t.Fatalf("Add: %v", err)
			}
			if n, err := counter.Heartbeat(ctx); err != nil || n != 1 {
				t.Fatalf("Heartbeat: got %d, %v; want 1", n, err)
			}
			if d := top.denials(t); len(d) > 0 {
				t.Fatalf("the ACL refused:\n%s", strings.Join(d, "\n"))
			}
			keys := top.keys(t)
			if len(keys) == 0 {
				t.Fatal("no key written")
			}
			for _, k := range keys {
				if !strings.HasPrefix(k, prefix) {
					t.Errorf("key %q is outside the prefix %q", k, prefix)
				}
			}
		})
	}
}
