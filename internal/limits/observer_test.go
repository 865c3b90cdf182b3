package limits_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fintech-bff/bff/internal/limits"
)

// failingRegistry is a Registry whose store does not answer; it says each
// heartbeat on beats.
type failingRegistry struct{ beats chan struct{} }

func (r failingRegistry) Heartbeat(context.Context) (int, error) {
	select {
	case r.beats <- struct{}{}:
	default:
	}
	return 0, errors.New("store down")
}

// failures hands the first failed exchange it hears of to the test.
type failures chan error

func (f failures) ExchangeFailed(err error) {
	select {
	case f <- err:
	default:
	}
}

// Run tells its observer of a failed exchange at its first tick and goes
// on; without an observer it runs on the no-op default. The ticks are on
// synctest's clock: no real time goes by.
func TestRunReportsFailedExchanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := limits.NewBudget(10, 10, nil, nil)
		ctx, cancel := context.WithCancel(context.Background())
		obs := make(failures, 1)
		done := make(chan struct{})
		go func() { b.Run(ctx, time.Second, failingRegistry{}, obs); close(done) }()
		synctest.Wait()
		select {
		case err := <-obs:
			t.Fatalf("got %v reported before the first tick, want nothing", err)
		default:
		}
		time.Sleep(time.Second)
		synctest.Wait()
		select {
		case err := <-obs:
			if err == nil || err.Error() != "store down" {
				t.Fatalf("got %v, want the heartbeat's error", err)
			}
		default:
			t.Fatal("no failed exchange reported at the first tick")
		}
		cancel()
		<-done

		ctx, cancel = context.WithCancel(context.Background())
		defer cancel()
		beats := make(chan struct{})
		done = make(chan struct{})
		go func() { b.Run(ctx, time.Second, failingRegistry{beats: beats}, nil); close(done) }()
		<-beats // the heartbeat failed, and Run did not stop on a nil observer
		cancel()
		<-done
	})
}
