package events

import (
	"errors"
	"sync/atomic"
	"testing"
	"unsafe"
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
	h := NewHub(Limits{PerUser: 2})
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

// The per-address bound counts a client's streams whatever their users,
// the instance bound every stream; the user's is checked first, then the
// address's, then the instance's; Close frees each place, and a Client of
// "" is not counted by address.
func TestHubBounds(t *testing.T) {
	h := NewHub(Limits{PerUser: 2, PerAddress: 3, PerInstance: 5})
	var sig signals
	add := func(user, client string) (*Stream, error) {
		s := &Stream{UserID: user, Handle: user + "/" + client, Client: client, Signaler: &sig}
		return s, h.Add(s)
	}
	mustAdd := func(user, client string) *Stream {
		t.Helper()
		s, err := add(user, client)
		if err != nil {
			t.Fatalf("%s from %s: %v", user, client, err)
		}
		return s
	}
	a1 := mustAdd("u1", "198.51.100.7")
	mustAdd("u2", "198.51.100.7")
	mustAdd("u3", "198.51.100.7")
	for _, tc := range []struct {
		user, client string
		want         error
	}{
		{"u4", "198.51.100.7", ErrTooManyFromAddress}, // a fourth user from the same address
		{"u1", "198.51.100.7", ErrTooManyFromAddress}, // u1 holds 1 of 2: the address refuses
	} {
		if _, err := add(tc.user, tc.client); !errors.Is(err, tc.want) {
			t.Fatalf("%s from %s: got %v, want %v", tc.user, tc.client, err, tc.want)
		}
	}
	mustAdd("u1", "2001:db8:1:2::/64")
	if _, err := add("u1", "2001:db8:1:3::/64"); !errors.Is(err, ErrTooMany) {
		t.Fatalf("u1's third stream: got %v, want ErrTooMany (the user's bound is checked first)", err)
	}
	mustAdd("u5", "") // not counted by address
	if got := h.Count(); got != 5 {
		t.Fatalf("Count: got %d, want 5", got)
	}
	if _, err := add("u6", "203.0.113.9"); !errors.Is(err, ErrFull) {
		t.Fatalf("a sixth stream: got %v, want ErrFull", err)
	}
	if _, err := add("u6", ""); !errors.Is(err, ErrFull) {
		t.Fatalf("a sixth stream without an address: got %v, want ErrFull", err)
	}

	h.Close(a1)
	h.Close(a1) // twice frees one place only
	mustAdd("u6", "203.0.113.9")
	if _, err := add("u7", "203.0.113.10"); !errors.Is(err, ErrFull) {
		t.Fatalf("after one close and one open: got %v, want ErrFull", err)
	}
	if got := h.byAddr["198.51.100.7"].n; got != 2 {
		t.Fatalf("198.51.100.7 holds %d after a close, want 2", got)
	}
	if got := h.Limits(); got != (Limits{PerUser: 2, PerAddress: 3, PerInstance: 5}) {
		t.Fatalf("Limits: got %+v", got)
	}
}

// Streams of one address share one Client string: an idle stream keeps
// none of its own.
func TestHubSharesClientStrings(t *testing.T) {
	h := NewHub(Limits{})
	first := &Stream{UserID: "a", Handle: "ha", Client: string([]byte("198.51.100.7")), Signaler: &signals{}}
	second := &Stream{UserID: "b", Handle: "hb", Client: string([]byte("198.51.100.7")), Signaler: &signals{}}
	for _, s := range []*Stream{first, second} {
		if err := h.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	if unsafe.StringData(first.Client) != unsafe.StringData(second.Client) {
		t.Fatal("the second stream keeps its own copy of the address")
	}
	h.Close(first)
	h.Close(second)
	if len(h.byAddr) != 0 {
		t.Fatalf("byAddr after every stream closed: %v, want empty", h.byAddr)
	}
}

func TestDerivedBound(t *testing.T) {
	for _, tc := range []struct {
		nofile uint64
		want   int
	}{
		{0, 10_000}, // unknown
		{1, 1},
		{1024, 512},
		{20_000, 10_000},
		{524_288, 262_144},
		{1 << 62, 1_000_000},
		{^uint64(0), 1_000_000}, // RLIM_INFINITY
	} {
		if got := derivedBound(tc.nofile); got != tc.want {
			t.Errorf("derivedBound(%d) = %d, want %d", tc.nofile, got, tc.want)
		}
	}
	if got := InstanceBound(7); got != 7 {
		t.Errorf("InstanceBound(7) = %d, want 7 (configured)", got)
	}
	if n := DescriptorLimit(); n > 0 {
		if got, want := InstanceBound(0), derivedBound(n); got != want {
			t.Errorf("InstanceBound(0) = %d, want %d (half of RLIMIT_NOFILE %d)", got, want, n)
		}
	}
}
