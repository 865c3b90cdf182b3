//go:build integration

package kv_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/testing/redistest"
)

type store interface {
	Get(ctx context.Context, key string) ([]byte, error)
	Set(ctx context.Context, key string, value []byte, ttl time.Duration) error
	Del(ctx context.Context, key string) error
	Ping(ctx context.Context) error
	GetDel(ctx context.Context, key string) ([]byte, error)
	SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error)
	SetIfExists(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error)
	DelIf(ctx context.Context, key string, prefix []byte) (bool, error)
	SAdd(ctx context.Context, key, member string, ttl time.Duration) error
	SRem(ctx context.Context, key, member string) error
	SMembers(ctx context.Context, key string) ([]string, error)
	Publish(ctx context.Context, channel, msg string) error
	Subscribe(ctx context.Context, channel string, onMessage func(string), onReady func(bool))
	kv.Members
}

// suite is the behaviour every store must have.
func suite(t *testing.T, s store) {
	ctx := context.Background()
	t.Run("a member with a pending invalidation renews only after handling it", func(t *testing.T) {
		group := fmt.Sprintf("g%d", time.Now().UnixNano())
		for _, m := range []string{"a", "b"} {
			if p, err := s.Renew(ctx, group, m, time.Minute, nil); err != nil || len(p) != 0 {
				t.Fatalf("renew %s: got %v, %v", m, p, err)
			}
		}
		got, err := s.Expect(ctx, group, "a", "n1")
		if err != nil || len(got) != 1 || got[0].Member != "b" || got[0].Left <= 50*time.Second || got[0].Left > time.Minute {
			t.Fatalf("expect from a: got %+v, %v; want b with about a minute left", got, err)
		}
		if p, _ := s.Renew(ctx, group, "b", time.Minute, nil); len(p) != 1 || p[0] != "n1" {
			t.Fatalf("renew b with n1 pending: got %v, want [n1] and no renewal", p)
		}
		if err := s.Ack(ctx, group, "b", "n1"); err != nil {
			t.Fatal(err)
		}
		if p, err := s.Renew(ctx, group, "b", time.Minute, nil); err != nil || len(p) != 0 {
			t.Fatalf("renew b after its ack: got %v, %v", p, err)
		}
		_, _ = s.Expect(ctx, group, "a", "n2")
		if p, err := s.Renew(ctx, group, "b", time.Minute, []string{"n2"}); err != nil || len(p) != 0 {
			t.Fatalf("renew b with n2 handled: got %v, %v", p, err)
		}
		if got, _ := s.Expect(ctx, group, "b", "n3"); len(got) != 1 || got[0].Member != "a" {
			t.Fatalf("expect from b: got %+v, want a", got)
		}
	})
	t.Run("missing key is ErrNotFound", func(t *testing.T) {
		if _, err := s.Get(ctx, "nope"); !errors.Is(err, kv.ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
	})
	t.Run("set then get returns the value", func(t *testing.T) {
		if err := s.Set(ctx, "a", []byte("value-a"), time.Minute); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, "a")
		if err != nil || !bytes.Equal(got, []byte("value-a")) {
			t.Fatalf("got %q, %v; want value-a", got, err)
		}
	})
	t.Run("set overwrites", func(t *testing.T) {
		_ = s.Set(ctx, "b", []byte("one"), time.Minute)
		_ = s.Set(ctx, "b", []byte("two"), time.Minute)
		if got, _ := s.Get(ctx, "b"); string(got) != "two" {
			t.Fatalf("got %q, want two", got)
		}
	})
	t.Run("del removes and is idempotent", func(t *testing.T) {
		_ = s.Set(ctx, "c", []byte("x"), time.Minute)
		if err := s.Del(ctx, "c"); err != nil {
			t.Fatal(err)
		}
		if err := s.Del(ctx, "c"); err != nil {
			t.Fatalf("second del: %v", err)
		}
		if _, err := s.Get(ctx, "c"); !errors.Is(err, kv.ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
	})
	t.Run("getdel is single use", func(t *testing.T) {
		_ = s.Set(ctx, "once", []byte("v"), time.Minute)
		if got, err := s.GetDel(ctx, "once"); err != nil || string(got) != "v" {
			t.Fatalf("first: got %q, %v; want v", got, err)
		}
		if _, err := s.GetDel(ctx, "once"); !errors.Is(err, kv.ErrNotFound) {
			t.Fatalf("second: got %v, want ErrNotFound", err)
		}
	})
	t.Run("setifexists updates only a live key and never brings one back", func(t *testing.T) {
		if ok, err := s.SetIfExists(ctx, "xx", []byte("ghost"), time.Minute); ok || err != nil {
			t.Fatalf("missing key: got %v, %v; want false", ok, err)
		}
		if _, err := s.Get(ctx, "xx"); !errors.Is(err, kv.ErrNotFound) {
			t.Fatalf("setifexists created a missing key: %v", err)
		}
		_ = s.Set(ctx, "xx", []byte("one"), time.Minute)
		if ok, err := s.SetIfExists(ctx, "xx", []byte("two"), time.Minute); !ok || err != nil {
			t.Fatalf("live key: got %v, %v; want true", ok, err)
		}
		if got, _ := s.Get(ctx, "xx"); string(got) != "two" {
			t.Fatalf("got %q, want two", got)
		}
		_ = s.Del(ctx, "xx")
		if ok, err := s.SetIfExists(ctx, "xx", []byte("three"), time.Minute); ok || err != nil {
			t.Fatalf("deleted key: got %v, %v; want false", ok, err)
		}
		if _, err := s.Get(ctx, "xx"); !errors.Is(err, kv.ErrNotFound) {
			t.Fatalf("a write after the delete brought the key back: %v", err)
		}
	})
	t.Run("setnx is a lock and delif releases only for its owner", func(t *testing.T) {
		if ok, err := s.SetNX(ctx, "lock", []byte("owner-1"), time.Minute); !ok || err != nil {
			t.Fatalf("first setnx: got %v, %v; want true", ok, err)
		}
		if ok, err := s.SetNX(ctx, "lock", []byte("owner-1"), time.Minute); !ok || err != nil {
			t.Fatalf("the same owner's re-sent SetNX: got %v, %v; want true (its own claim)", ok, err)
		}
		if ok, _ := s.SetNX(ctx, "lock", []byte("owner-2"), time.Minute); ok {
			t.Fatal("second setnx took a held lock")
		}
		if ok, _ := s.DelIf(ctx, "lock", []byte("owner-2")); ok {
			t.Fatal("a non-owner released the lock")
		}
		if ok, _ := s.DelIf(ctx, "lock", []byte("owner")); !ok {
			t.Fatal("delif with a prefix of the value did not delete")
		}
		if ok, _ := s.SetNX(ctx, "lock", []byte("owner-2"), time.Minute); !ok {
			t.Fatal("setnx after release failed")
		}
	})
	t.Run("sets", func(t *testing.T) {
		_ = s.SAdd(ctx, "set", "a", time.Minute)
		_ = s.SAdd(ctx, "set", "b", time.Minute)
		_ = s.SAdd(ctx, "set", "a", time.Minute)
		got, err := s.SMembers(ctx, "set")
		if err != nil || len(got) != 2 {
			t.Fatalf("got %v, %v; want [a b]", got, err)
		}
		_ = s.SRem(ctx, "set", "a")
		if got, _ := s.SMembers(ctx, "set"); len(got) != 1 || got[0] != "b" {
			t.Fatalf("after srem: got %v, want [b]", got)
		}
		if got, err := s.SMembers(ctx, "no-set"); err != nil || len(got) != 0 {
			t.Fatalf("missing set: got %v, %v", got, err)
		}
	})
	t.Run("publish reaches subscribers", func(t *testing.T) {
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		got := make(chan string, 1)
		ready := make(chan struct{}, 1)
		go s.Subscribe(sctx, "events", func(m string) { got <- m }, func(up bool) {
			if up {
				ready <- struct{}{}
			}
		})
		select {
		case <-ready:
		case <-time.After(5 * time.Second):
			t.Fatal("subscription not ready")
		}
		if err := s.Publish(ctx, "events", "hello"); err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-got:
			if m != "hello" {
				t.Fatalf("got %q, want hello", m)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no message within 5s")
		}
		// Cancelled while it waits for the next message, it returns.
		returned := make(chan struct{})
		qctx, qcancel := context.WithCancel(ctx)
		go func() {
			s.Subscribe(qctx, "quiet", func(string) {}, func(up bool) {
				if up {
					ready <- struct{}{}
				}
			})
			close(returned)
		}()
		select {
		case <-ready:
		case <-time.After(5 * time.Second):
			t.Fatal("second subscription not ready")
		}
		qcancel()
		select {
		case <-returned:
		case <-time.After(10 * time.Second):
			t.Fatal("Subscribe did not return after its context ended")
		}
	})
	t.Run("ping", func(t *testing.T) {
		if err := s.Ping(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestMemory(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	m := kv.NewMemory(func() time.Time { return now })
	suite(t, m)
	t.Run("expires on the injected clock", func(t *testing.T) {
		ctx := context.Background()
		_ = m.Set(ctx, "ttl", []byte("x"), 10*time.Second)
		now = now.Add(9 * time.Second)
		if _, err := m.Get(ctx, "ttl"); err != nil {
			t.Fatalf("before expiry: got %v, want the value", err)
		}
		now = now.Add(time.Second)
		if _, err := m.Get(ctx, "ttl"); !errors.Is(err, kv.ErrNotFound) {
			t.Fatalf("at expiry: got %v, want ErrNotFound", err)
		}
	})
	t.Run("setifexists sets a new expiry and skips an expired key", func(t *testing.T) {
		ctx := context.Background()
		_ = m.Set(ctx, "slide", []byte("x"), 10*time.Second)
		now = now.Add(9 * time.Second)
		if ok, _ := m.SetIfExists(ctx, "slide", []byte("y"), 10*time.Second); !ok {
			t.Fatal("live key not updated")
		}
		now = now.Add(9 * time.Second) // 18s after the set, 9s after the update
		if got, err := m.Get(ctx, "slide"); err != nil || string(got) != "y" {
			t.Fatalf("after the new ttl: got %q, %v; want y", got, err)
		}
		now = now.Add(time.Second)
		if ok, _ := m.SetIfExists(ctx, "slide", []byte("z"), 10*time.Second); ok {
			t.Fatal("an expired key was brought back")
		}
		if _, err := m.Get(ctx, "slide"); !errors.Is(err, kv.ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
	})
	t.Run("returned values are copies", func(t *testing.T) {
		ctx := context.Background()
		v := []byte("orig")
		_ = m.Set(ctx, "copy", v, time.Minute)
		v[0] = 'X'
		got, _ := m.Get(ctx, "copy")
		got[1] = 'Y'
		again, _ := m.Get(ctx, "copy")
		if string(again) != "orig" {
			t.Fatalf("got %q, want orig", again)
		}
	})
}

func TestRedis(t *testing.T) {
	c, prefix := redistest.Client(t)
	r := kv.NewRedis(c, prefix)
	suite(t, r)
	t.Run("keys carry the prefix and the ttl", func(t *testing.T) {
		ctx := context.Background()
		_ = r.Set(ctx, "p", []byte("x"), 30*time.Second)
		ttl := c.TTL(ctx, prefix+"p").Val()
		if ttl <= 25*time.Second || ttl > 30*time.Second {
			t.Fatalf("got ttl %v, want about 30s", ttl)
		}
		if ok, err := r.SetIfExists(ctx, "p", []byte("y"), 90*time.Second); !ok || err != nil {
			t.Fatalf("setifexists: got %v, %v", ok, err)
		}
		if ttl := c.TTL(ctx, prefix+"p").Val(); ttl <= 85*time.Second || ttl > 90*time.Second {
			t.Fatalf("after setifexists: got ttl %v, want about 90s (the new one)", ttl)
		}
		if ok, _ := r.SetIfExists(ctx, "p", []byte("z"), 1500*time.Millisecond); !ok {
			t.Fatal("setifexists with a sub-second ttl part failed")
		}
		if ttl := c.PTTL(ctx, prefix+"p").Val(); ttl <= time.Second || ttl > 1500*time.Millisecond {
			t.Fatalf("after setifexists: got ttl %v, want about 1.5s", ttl)
		}
	})
}

func TestRedisMemberLeasesRunOut(t *testing.T) {
	c, prefix := redistest.Client(t)
	r := kv.NewRedis(c, prefix)
	ctx := context.Background()
	if _, err := r.Renew(ctx, "g", "short", 50*time.Millisecond, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Expect(ctx, "g", "me", "n1"); len(got) != 1 {
		t.Fatalf("got %+v, want the member", got)
	}
	time.Sleep(100 * time.Millisecond) // deliberate: the member's lease runs out on Redis's clock, the real one
	if got, err := r.Expect(ctx, "g", "me", "n2"); err != nil || len(got) != 0 {
		t.Fatalf("after its lease: got %+v, %v; want no member", got, err)
	}
}

func TestRedisUnavailable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens here now
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	r := kv.NewRedis(c, "x:")
	ctx := context.Background()
	for name, err := range map[string]error{
		"get":         func() error { _, err := r.Get(ctx, "k"); return err }(),
		"set":         r.Set(ctx, "k", []byte("v"), time.Second),
		"del":         r.Del(ctx, "k"),
		"setifexists": func() error { _, err := r.SetIfExists(ctx, "k", []byte("v"), time.Second); return err }(),
		"ping":        r.Ping(ctx),
	} {
		if !errors.Is(err, kv.ErrUnavailable) {
			t.Errorf("%s: got %v, want ErrUnavailable", name, err)
		}
	}
}

func TestNewClientHidesURLPassword(t *testing.T) {
	_, err := kv.NewClient(kv.ClientOptions{URL: "notredis://user:hunter2-secret@host:1/0"})
	if err == nil {
		t.Fatal("got nil error for a bad scheme")
	}
	if bytes.Contains([]byte(err.Error()), []byte("hunter2-secret")) {
		t.Fatalf("error leaks the password: %v", err)
	}
}
