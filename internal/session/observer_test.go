package session_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/session"
)

type countingObserver struct{ created atomic.Int64 }

func (o *countingObserver) Created() { o.created.Add(1) }

// The observer hears of each session created, and of no failed attempt;
// without one, a Manager runs on the no-op default.
func TestObserverHearsOfCreatedSessions(t *testing.T) {
	ctx := context.Background()
	obs := &countingObserver{}
	opts := session.Options{IdleTimeout: time.Hour, AbsoluteTimeout: 2 * time.Hour, Observe: obs}
	m := session.NewManager(kv.NewMemory(nil), opts)
	for range 3 {
		if _, _, err := m.Create(ctx, session.New{UserID: "alice", Method: session.MethodDev}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := session.NewManager(failingStore{}, opts).Create(ctx, session.New{UserID: "bob", Method: session.MethodDev}); err == nil {
		t.Fatal("create on a failing store: got no error")
	}
	if got := obs.created.Load(); got != 3 {
		t.Fatalf("got %d sessions created, want 3", got)
	}
	opts.Observe = nil
	if _, _, err := session.NewManager(kv.NewMemory(nil), opts).Create(ctx, session.New{UserID: "carol", Method: session.MethodDev}); err != nil {
		t.Fatalf("without an observer: %v", err)
	}
}
