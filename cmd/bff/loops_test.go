package main

import (
	"context"
	"errors"
	"log/slog"
	"strings"
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
