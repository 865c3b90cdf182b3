package kv_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/testing/poll"
)

// gate is a go-redis hook that holds the client's first round trip until
// release is closed, so that the claims a test sends meanwhile queue for
// the next batch; it records the size of every pipeline of claims sent
// (of EVALSHA).
type gate struct {
	entered, release chan struct{}
	once             sync.Once
	mu               sync.Mutex
	pipelines        []int
}

func newGate(rc redis.UniversalClient) *gate {
	g := &gate{entered: make(chan struct{}), release: make(chan struct{})}
	rc.AddHook(g)
	return g
}

func (g *gate) hold() {
	first := false
	g.once.Do(func() { first = true })
	if first {
		close(g.entered)
		<-g.release
	}
}

func (g *gate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		g.hold()
		return next(ctx, cmd)
	}
}

func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		// Not a new connection's CLIENT SETINFO, nor the claims a node
		// answered NOSCRIPT, sent again with the script.
		if cmds[0].Name() == "evalsha" {
			g.mu.Lock()
			g.pipelines = append(g.pipelines, len(cmds))
			g.mu.Unlock()
		}
		g.hold()
		return next(ctx, cmds)
	}
}

func (g *gate) sent() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]int(nil), g.pipelines...)
}

// outcome is one claim's answer.
type outcome struct {
	ok  bool
	err error
}

// claimHeld sends first, waits until its round trip is held by g, then
// sends every claim of keys (with a value of its own each) while it is, and
// releases it once they all wait: they must go as one batch. It returns
// first's outcome and theirs, in the order of keys.
func claimHeld(t *testing.T, c *kv.Claims, g *gate, first string, keys []string) (outcome, []outcome) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	var lead outcome
	wg.Go(func() { lead.ok, lead.err = c.SetNX(ctx, first, []byte("first"), time.Minute) })
	<-g.entered
	got := make([]outcome, len(keys))
	for i, k := range keys {
		wg.Go(func() { got[i].ok, got[i].err = c.SetNX(ctx, k, []byte{'v', byte(i)}, time.Minute) })
	}
	poll.Until(t, 10*time.Second, "every claim waiting for the next batch", func() bool { return c.Queued() == len(keys) })
	close(g.release)
	wg.Wait()
	return lead, got
}

// A Redis failure fails every claim of the batch with it, and none is
// reported claimed (needs no Redis: nothing listens at the address).
func TestClaimsRedisErrorFailsTheWholeBatch(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	rc := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer rc.Close()
	g := newGate(rc)
	c := kv.NewClaims(kv.NewRedis(rc, "x:"), 0)
	lead, got := claimHeld(t, c, g, "first", []string{"a", "b", "a", "c"})
	if lead.ok || !errors.Is(lead.err, kv.ErrUnavailable) {
		t.Errorf("the first claim: got %v, %v; want false, ErrUnavailable", lead.ok, lead.err)
	}
	for i, o := range got {
		if o.ok || !errors.Is(o.err, kv.ErrUnavailable) {
			t.Errorf("claim %d: got %v, %v; want false, ErrUnavailable", i, o.ok, o.err)
		}
	}
	if sent := g.sent(); len(sent) != 1 || sent[0] != 4 {
		t.Errorf("got pipelines of %v claims, want one of 4", sent)
	}
	if !c.Idle() {
		t.Errorf("after: got %d queued or a batch being sent, want none", c.Queued())
	}
}

// A claim whose context has ended is refused at once, and is not sent.
func TestClaimsEndedContext(t *testing.T) {
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer rc.Close()
	c := kv.NewClaims(kv.NewRedis(rc, "x:"), 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ok, err := c.SetNX(ctx, "k", []byte("v"), time.Minute)
	if ok || !errors.Is(err, kv.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, %v; want false, ErrUnavailable and context.Canceled", ok, err)
	}
}
