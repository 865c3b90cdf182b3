//go:build integration

package kv_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/testing/poll"
	"github.com/fintech-bff/bff/internal/testing/redistest"
)

// trackEvents runs Track on r and returns what it reports, in order:
// "key <key>" and "ready <bool>"; its confirmations go to onConfirmed.
func trackEvents(t *testing.T, r *kv.Redis, onConfirmed func(time.Time), prefixes ...string) <-chan string {
	t.Helper()
	events := make(chan string, 256)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- r.Track(ctx, prefixes, func(k string) { events <- "key " + k }, func(up bool) { events <- fmt.Sprint("ready ", up) }, onConfirmed)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Track: %v", err)
		}
	})
	return events
}

// next fails t unless the next event is want, within 5 s (Track notices a
// lost connection within about a second).
func next(t *testing.T, events <-chan string, want string) {
	t.Helper()
	select {
	case got := <-events:
		if got != want {
			t.Fatalf("got event %q, want %q", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no event within 5s, want %q", want)
	}
}

// Track reports every change under its prefixes, whoever makes it, with
// the key prefix removed, and nothing else; a flush is the key "".
func TestTrackReportsEveryChange(t *testing.T) {
	srv := redistest.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c.Close() })
	r := kv.NewRedis(c, "app:")
	events := trackEvents(t, r, ignoreConfirmations, "sess:", "tok:")
	next(t, events, "ready true")
	ctx := context.Background()

	other := redis.NewClient(&redis.Options{Addr: srv.Addr}) // another instance
	t.Cleanup(func() { _ = other.Close() })
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(other.Set(ctx, "app:sess:a", "1", time.Minute).Err())
	next(t, events, "key sess:a")
	must(other.Set(ctx, "app:other:x", "1", time.Minute).Err()) // not tracked
	must(other.Set(ctx, "elsewhere:sess:x", "1", time.Minute).Err())
	must(r.Del(ctx, "sess:a"))
	next(t, events, "key sess:a")
	must(other.Set(ctx, "app:tok:b", "1", 0).Err())
	next(t, events, "key tok:b")
	must(other.PExpire(ctx, "app:tok:b", 100*time.Millisecond).Err())
	next(t, events, "key tok:b") // the new expiry
	next(t, events, "key tok:b") // the expiry itself
	must(other.FlushDB(ctx).Err())
	next(t, events, "key ")
	must(other.Set(ctx, "app:sess:c", "1", time.Minute).Err())
	next(t, events, "key sess:c")
}

// A killed subscription or tracking connection is reported lost, then
// live again once Track has set both up afresh, and changes are reported
// again.
func TestTrackRecoversFromKilledConnections(t *testing.T) {
	srv := redistest.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c.Close() })
	r := kv.NewRedis(c, "app:")
	events := trackEvents(t, r, ignoreConfirmations, "sess:")
	next(t, events, "ready true")
	ctx := context.Background()

	kill := func(subscription bool) {
		t.Helper()
		list, err := c.ClientList(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		killed := 0
		for _, line := range strings.Split(list, "\n") {
			if !strings.Contains(line, "name=bff-track-") || strings.Contains(line, " sub=1 ") != subscription {
				continue
			}
			for _, f := range strings.Fields(line) {
				if id, ok := strings.CutPrefix(f, "id="); ok {
					if err := c.Do(ctx, "CLIENT", "KILL", "ID", id).Err(); err != nil {
						t.Fatal(err)
					}
					killed++
				}
			}
		}
		if killed != 1 {
			t.Fatalf("killed %d tracking connections (subscription %t), want 1:\n%s", killed, subscription, list)
		}
	}
	for _, tt := range []struct {
		name         string
		subscription bool
	}{{"the subscription", true}, {"the tracking connection", false}} {
		t.Run(tt.name, func(t *testing.T) {
			kill(tt.subscription)
			next(t, events, "ready false")
			next(t, events, "ready true")
			if err := c.Set(ctx, "app:sess:"+tt.name, "1", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			next(t, events, "key sess:"+tt.name)
		})
	}
}

// A Cluster client is refused: tracking there is per node.
func TestTrackRefusesCluster(t *testing.T) {
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { _ = c.Close() })
	err := kv.NewRedis(c, "").Track(context.Background(), []string{"x"}, func(string) {}, func(bool) {}, func(time.Time) {})
	if !errors.Is(err, kv.ErrTrackingUnsupported) {
		t.Fatalf("got %v, want ErrTrackingUnsupported", err)
	}
}

// A Redis restart loses every tracking state: Track reports it lost, and
// live again once Redis is back and tracking is on anew.
func TestTrackSurvivesARestart(t *testing.T) {
	srv := redistest.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c.Close() })
	events := trackEvents(t, kv.NewRedis(c, "app:"), ignoreConfirmations, "sess:")
	next(t, events, "ready true")
	srv.Restart(t)
	next(t, events, "ready false")
	next(t, events, "ready true")
	if err := c.Set(context.Background(), "app:sess:after", "1", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	next(t, events, "key sess:after")
}

func ignoreConfirmations(time.Time) {}

// confirmations keeps the latest time Track confirmed (its onConfirmed).
type confirmations struct {
	mu   sync.Mutex
	last time.Time
}

func (c *confirmations) confirmed(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if at.After(c.last) {
		c.last = at
	}
}

// fresh reports whether the latest confirmation is within kv.LeaseFor,
// the bound the near-cache trusts its copies by.
func (c *confirmations) fresh() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.last.IsZero() && time.Since(c.last) < kv.LeaseFor
}

// Track's confirmations are a time bound on what it may have missed: they
// keep coming while canary writes come back, the latest is older than
// kv.LeaseFor soon after they stop (writes paused here), though the
// tracking itself still looks healthy, and they come again once writes
// resume. The canaries are never reported as keys.
func TestTrackConfirmationsStopWhenWritesPause(t *testing.T) {
	srv := redistest.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c.Close() })
	var conf confirmations
	events := trackEvents(t, kv.NewRedis(c, "app:"), conf.confirmed, "sess:")
	next(t, events, "ready true")
	waitFresh(t, &conf, true)
	ctx := context.Background()
	paused := time.Now()
	if err := c.Do(ctx, "CLIENT", "PAUSE", 3000, "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	waitFresh(t, &conf, false)
	if took := time.Since(paused); took > kv.LeaseFor+500*time.Millisecond {
		t.Fatalf("the last confirmation grew older than kv.LeaseFor %v after confirmations stopped, want within %v", took, kv.LeaseFor+500*time.Millisecond)
	}
	if err := c.Do(ctx, "CLIENT", "UNPAUSE").Err(); err != nil {
		t.Fatal(err)
	}
	waitFresh(t, &conf, true)
	select {
	case e := <-events:
		t.Fatalf("unexpected event %q: the canaries must not be reported, nor the pause end the tracking", e)
	default:
	}
}

func waitFresh(t *testing.T, c *confirmations, fresh bool) {
	t.Helper()
	if !poll.Within(5*time.Second, func() bool { return c.fresh() == fresh }) {
		t.Fatalf("confirmed within kv.LeaseFor %t, want %t within 5s", c.fresh(), fresh)
	}
}

// holdCanary holds the first canary write until released.
type holdCanary struct {
	writing, release chan struct{}
	once             sync.Once
}

func (h *holdCanary) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *holdCanary) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *holdCanary) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); cmd.Name() == "set" && len(args) > 1 && strings.Contains(fmt.Sprint(args[1]), "track-canary:") {
			h.once.Do(func() { close(h.writing); <-h.release })
		}
		return next(ctx, cmd)
	}
}

// Track returns only once its canary writes have: one still writing when
// its context ends holds it, so the caller closes the store after it.
func TestTrackWaitsForItsCanaries(t *testing.T) {
	srv := redistest.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c.Close() })
	h := &holdCanary{writing: make(chan struct{}), release: make(chan struct{})}
	c.AddHook(h)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- kv.NewRedis(c, "").Track(ctx, []string{"x"}, func(string) {}, func(bool) {}, func(time.Time) {})
	}()
	select {
	case <-h.writing:
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("no canary written within 10s")
	}
	cancel()
	select {
	case err := <-done:
		t.Fatalf("Track returned (%v) while a canary write was still using the store", err)
	case <-time.After(3 * kv.TrackCheckEvery): // deliberate: a Track that did not wait would have returned (its receive wakes every trackCheckEvery)
	}
	close(h.release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Track did not return within 10s of its canary's end")
	}
}
