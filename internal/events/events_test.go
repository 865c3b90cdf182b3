package events

import (
	"errors"
	"sync/atomic"
	"testing"
)

func counter() (func(), func() int64) {
	var n atomic.Int64
	return func() { n.Add(1) }, n.Load
}

// A change wakes only that user's streams; a session's end ends only its
// streams; "" asks every stream to check its session; the cap is per user;
// shutdown ends every stream and refuses new ones; Close unregisters.
func TestHub(t *testing.T) {
	h := NewHub(2)
	sigA, nA := counter()
	sigB, nB := counter()
	a1, err := h.Open("alice", "ha1", sigA)
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := h.Open("alice", "ha2", sigA)
	b, _ := h.Open("bob", "hb", sigB)
	if _, err := h.Open("alice", "ha3", sigA); !errors.Is(err, ErrTooMany) {
		t.Fatalf("a third stream of alice: got %v, want ErrTooMany", err)
	}
	if got := h.Count(); got != 3 {
		t.Fatalf("Count: got %d, want 3", got)
	}

	h.Changed("alice")
	if nA() != 2 || nB() != 0 || !a1.Changed() || !a2.Changed() || b.Changed() {
		t.Fatalf("alice's change: signals %d/%d, want 2/0, and only alice's streams changed", nA(), nB())
	}
	if a1.Changed() {
		t.Fatal("Changed did not clear")
	}

	h.SessionEnded("ha1")
	if a1.Why() != EndRevoked || a2.Why() != "" || b.Why() != "" {
		t.Fatalf("ending ha1: got %q %q %q, want revoked, open, open", a1.Why(), a2.Why(), b.Why())
	}
	select {
	case <-a1.Ended:
	default:
		t.Fatal("Ended not closed")
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
	if _, err := h.Open("alice", "ha4", sigA); err != nil {
		t.Fatalf("a closed stream still counts against the cap: %v", err)
	}

	h.Shutdown()
	if a2.Why() != EndShutdown || b.Why() != EndShutdown {
		t.Fatalf("shutdown: got %q %q", a2.Why(), b.Why())
	}
	if _, err := h.Open("carol", "hc", sigB); !errors.Is(err, ErrClosing) {
		t.Fatalf("open after shutdown: got %v, want ErrClosing", err)
	}
}
