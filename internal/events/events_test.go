package events

import (
	"errors"
	"sync/atomic"
	"testing"
)

// signals counts what a stream is told.
type signals struct{ n, cuts atomic.Int64 }

func (s *signals) Signal() { s.n.Add(1) }
func (s *signals) Cut()    { s.cuts.Add(1) }

func stream(user, handle string, sig Signaler) *Stream {
	return &Stream{UserID: user, Handle: handle, Signaler: sig}
}

// A change wakes only that user's streams; a session's end ends only its
// streams; "" asks every stream to check its session; the cap is per user;
// shutdown ends every stream and refuses new ones; Close unregisters.
func TestHub(t *testing.T) {
	h := NewHub(2)
	var sigA, sigB signals
	a1, a2, b := stream("alice", "ha1", &sigA), stream("alice", "ha2", &sigA), stream("bob", "hb", &sigB)
	for _, s := range []*Stream{a1, a2, b} {
		if err := h.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Add(stream("alice", "ha3", &sigA)); !errors.Is(err, ErrTooMany) {
		t.Fatalf("a third stream of alice: got %v, want ErrTooMany", err)
	}
	if got := h.Count(); got != 3 {
		t.Fatalf("Count: got %d, want 3", got)
	}

	h.Changed("alice")
	if sigA.n.Load() != 2 || sigB.n.Load() != 0 || !a1.Changed() || !a2.Changed() || b.Changed() {
		t.Fatalf("alice's change: signals %d/%d, want 2/0, and only alice's streams changed", sigA.n.Load(), sigB.n.Load())
	}
	if a1.Changed() {
		t.Fatal("Changed did not clear")
	}

	h.SessionEnded("ha1")
	if a1.Why() != EndRevoked || a2.Why() != "" || b.Why() != "" {
		t.Fatalf("ending ha1: got %q %q %q, want revoked, open, open", a1.Why(), a2.Why(), b.Why())
	}
	if sigA.cuts.Load() != 1 || sigB.cuts.Load() != 0 {
		t.Fatalf("ending ha1 cut %d of alice's and %d of bob's, want 1 and 0", sigA.cuts.Load(), sigB.cuts.Load())
	}

	h.SessionEnded("")
	if !a2.Recheck() || !b.Recheck() || a2.Recheck() {
		t.Fatal(`SessionEnded("") must ask every stream to check its session, once`)
	}

	h.Close(a1)
	h.Close(a1) // twice is harmless
	if got := h.Count(); got != 2 {
		t.Fatalf("after Close: got %d, want 2", got)
	}
	if err := h.Add(stream("alice", "ha4", &sigA)); err != nil {
		t.Fatalf("a closed stream still counts against the cap: %v", err)
	}
	seen := 0
	h.Each(func(*Stream) { seen++ })
	if seen != 3 {
		t.Fatalf("Each: got %d streams, want 3", seen)
	}

	h.Shutdown()
	if a2.Why() != EndShutdown || b.Why() != EndShutdown {
		t.Fatalf("shutdown: got %q %q", a2.Why(), b.Why())
	}
	if sigA.cuts.Load() != 1 || sigB.cuts.Load() != 0 {
		t.Fatal("shutdown cut a stream: its retry hint must still be written")
	}
	if err := h.Add(stream("carol", "hc", &sigB)); !errors.Is(err, ErrClosing) {
		t.Fatalf("add after shutdown: got %v, want ErrClosing", err)
	}
}
