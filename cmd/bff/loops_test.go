package main

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/testing/poll"
	"github.com/fintech-bff/bff/internal/testing/syncbuf"
)

// stop waits for every loop to return: a loop still finishing its last
// query when it is cancelled is done before stop returns, so the stores
// release closes next are touched by no loop. An error a loop returns
// while the loops run is logged with its name; one after stop is not.
func TestLoopsStopWaitsForEveryLoop(t *testing.T) {
	var logs syncbuf.Buffer
	l := newLoops(slog.New(slog.NewTextHandler(&logs, nil)))
	var finished atomic.Int32
	release := make(chan struct{})
	for range 3 {
		l.run(func(ctx context.Context) {
			<-ctx.Done()
			<-release // the loop's last query, still running when it is cancelled
			finished.Add(1)
		})
	}
	l.runErr("listener", func(context.Context) error { return errors.New("connection refused") })
	l.runErr("quiet", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
	// The listener fails while the loops run: its error is logged then.
	poll.Until(t, 10*time.Second, "the listener's error logged", func() bool { return strings.Contains(logs.String(), "loop=listener") })
	stopped := make(chan struct{})
	go func() { l.stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("stop returned while loops were still running")
	default:
	}
	close(release)
	<-stopped
	if n := finished.Load(); n != 3 {
		t.Fatalf("stop returned with %d of 3 loops finished", n)
	}
	if out := logs.String(); !strings.Contains(out, "loop=listener") || !strings.Contains(out, "connection refused") || strings.Contains(out, "loop=quiet") {
		t.Fatalf("logs:\n%s\nwant the listener's error, and nothing of the loop that ended with the stop", out)
	}
}

// watchedStore counts the uses made of it after it closed.
type watchedStore struct {
	mu          sync.Mutex
	closed      bool
	afterClose  int
	usesInTotal int
}

func (w *watchedStore) use() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.usesInTotal++
	if w.closed {
		w.afterClose++
	}
}

func (w *watchedStore) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	return nil
}

// closeOnly is the ledger's Close, which returns nothing.
type closeOnly struct{ w *watchedStore }

func (c closeOnly) Close() { _ = c.w.Close() }

// release, the end of every shutdown, stops the loops and waits for them
// before it closes Redis and the ledger: loops that use both stores until
// their context ends, and once more after it (a query still running),
// never use either after it closed.
func TestReleaseClosesTheStoresAfterEveryLoop(t *testing.T) {
	redis, ledger := &watchedStore{}, &watchedStore{}
	l := newLoops(slog.New(slog.DiscardHandler))
	for range 4 {
		l.run(func(ctx context.Context) {
			for ctx.Err() == nil {
				redis.use()
				ledger.use()
				runtime.Gosched()
			}
			redis.use() // the last query, after the cancel
			ledger.use()
		})
	}
	poll.Until(t, 10*time.Second, "the loops running", func() bool {
		redis.mu.Lock()
		defer redis.mu.Unlock()
		return redis.usesInTotal > 100
	})
	a := app{stopBackground: l.stop, closer: redis, ledger: closeOnly{ledger}}
	a.release()
	if !redis.closed || !ledger.closed {
		t.Fatalf("after release: Redis closed %t, the ledger closed %t; want both", redis.closed, ledger.closed)
	}
	if redis.afterClose != 0 || ledger.afterClose != 0 {
		t.Fatalf("%d use(s) of Redis and %d of the ledger after they closed; want none", redis.afterClose, ledger.afterClose)
	}
}
