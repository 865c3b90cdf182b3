package nearcache_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/nearcache"
	"github.com/fintech-bff/bff/internal/testing/testclock"
)

// member is one instance's view of an in-process store whose lease
// renewals can be made to fail and whose announcements can be lost.
type member struct {
	*kv.Memory
	failRenew atomic.Bool
	loseInv   atomic.Bool
}

var errRenew = errors.New("renewal refused by the test")

func (m *member) Renew(ctx context.Context, group, id string, lease time.Duration, done []string) ([]string, error) {
	if m.failRenew.Load() {
		return nil, errRenew
	}
	return m.Memory.Renew(ctx, group, id, lease, done)
}

func (m *member) Subscribe(ctx context.Context, channel string, onMessage func(string), onReady func(bool)) {
	m.Memory.Subscribe(ctx, channel, func(msg string) {
		if m.loseInv.Load() && strings.HasPrefix(msg, "inv ") {
			return
		}
		onMessage(msg)
	}, onReady)
}

// ends records what a layer's OnEnd heard.
type ends struct {
	mu   sync.Mutex
	keys []string
}

func (e *ends) add(k string) { e.mu.Lock(); e.keys = append(e.keys, k); e.mu.Unlock() }

func (e *ends) heard(k string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, got := range e.keys {
		if got == k {
			return true
		}
	}
	return false
}

// groupLayer is a live layer in group "g" on st and clk, with strings
// that are served untracked for an hour. It is called in a synctest
// bubble: the layer's real-time waits (its renewals' period, an
// announcement waiting for a silent member) are on synctest's clock, and
// the layer's own clock, clk, moves only when the test moves it.
func groupLayer(t *testing.T, st *member, clk *testclock.Clock, e *ends) *nearcache.Layer[string] {
	t.Helper()
	o := stringLayer(func(k string) (string, bool) { return k, true })
	o.Now, o.Group, o.Members, o.OnEnd = clk.Now, "g", st, e.add
	l := nearcache.New(st, o)
	run(t, l)
	synctest.Wait()
	if !l.Live() || !l.Member() {
		t.Fatalf("the layer started: live %t, its lease held %t; want both", l.Live(), l.Member())
	}
	return l
}

// The lease is on the layer's clock: when renewals fail, the copies stop
// being served once the clock passes the lease (no sleep: the test moves
// the clock); and the first renewal after the lapse forgets every copy
// (announcements meanwhile did not wait for this instance) and tells
// OnEnd so.
func TestLeaseRunsOutOnTheLayersClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testclock.New(time.Unix(1_700_000_000, 0))
		st := &member{Memory: kv.NewMemory(clk.Now)}
		var e ends
		l := groupLayer(t, st, clk, &e)
		l.Keep("k", "v", l.BeginRead("k"))
		if _, ok := l.Serve("k"); !ok {
			t.Fatal("a fresh copy under a held lease: got no copy, want it served")
		}
		st.failRenew.Store(true)
		clk.Advance(time.Second) // the lease, and the tenth less trusted
		if l.Member() {
			t.Fatal("the lease holds a second after the last renewal, want it run out")
		}
		if _, ok := l.Serve("k"); ok {
			t.Fatal("a copy was served after the lease ran out")
		}
		st.failRenew.Store(false)
		waitFor(t, "the lease renewed", l.Member) // at the next renewal, on synctest's clock
		if n := l.Len(); n != 0 || !e.heard("") {
			t.Fatalf("after a lapsed lease: %d copies kept, OnEnd heard \"\": %v; want none kept, and heard", n, e.heard(""))
		}
	})
}

// An announcement returns only once no member can serve the keys: a
// member that got it forgot them (and OnEnd heard them) before it
// acknowledged, and the announcement returned without waiting for its
// lease; one that lost the message is waited for until its lease ran out,
// and its renewal, refused while the announcement is pending, makes it
// forget every copy first.
func TestAnnounceWaitsForEveryMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testclock.New(time.Unix(1_700_000_000, 0))
		mem := kv.NewMemory(clk.Now)
		var ea, eb ends
		a := groupLayer(t, &member{Memory: mem}, clk, &ea)
		bStore := &member{Memory: mem}
		b := groupLayer(t, bStore, clk, &eb)
		ctx := context.Background()
		for _, lost := range []bool{false, true} {
			key := map[bool]string{false: "heard", true: "lost"}[lost]
			b.Keep(key, "v", b.BeginRead(key))
			bStore.loseInv.Store(lost)
			a.Forget(key) // the caller's own copy, as it ended the key
			start := time.Now()
			if err := a.Announce(ctx, []string{key}); err != nil {
				t.Fatal(err)
			}
			// synctest's clock: only the announcement's own wait moved it.
			if took := time.Since(start); lost != (took >= time.Second) {
				t.Fatalf("message %s: the announcement returned after %v, want the other member's lease (1s) waited for only when the message was lost", key, took)
			}
			if _, ok := b.Serve(key); ok {
				t.Fatalf("message %s: the other member served %q after the announcement returned", key, key)
			}
			if want := map[bool]string{false: key, true: ""}[lost]; !eb.heard(want) {
				t.Fatalf("message %s: the other member's OnEnd did not hear %q", key, want)
			}
			waitFor(t, "the other member's lease renewed", b.Member)
		}
	})
}

// heldAcks is a member whose acknowledgements wait until released.
type heldAcks struct {
	*member
	acking  chan struct{}
	release chan struct{}
}

func (h *heldAcks) Ack(ctx context.Context, group, self, id string) error {
	h.acking <- struct{}{}
	<-h.release
	return h.member.Ack(ctx, group, self, id)
}

// Run returns only once the acknowledgements it started have: one still
// writing to the store when Run's context ends holds Run, so the process
// closes the store after it (and none starts once Run has returned).
func TestRunWaitsForItsAcknowledgements(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testclock.New(time.Unix(1_700_000_000, 0))
		mem := kv.NewMemory(clk.Now)
		var ea, eb ends
		a := groupLayer(t, &member{Memory: mem}, clk, &ea)
		bStore := &heldAcks{member: &member{Memory: mem}, acking: make(chan struct{}, 1), release: make(chan struct{})}
		o := stringLayer(func(k string) (string, bool) { return k, true })
		o.Now, o.Group, o.Members, o.OnEnd = clk.Now, "g", bStore, eb.add
		b := nearcache.New(bStore, o)
		ctx, stop := context.WithCancel(context.Background())
		ran := make(chan struct{})
		go func() { b.Run(ctx); close(ran) }()
		synctest.Wait()
		if !b.Member() {
			t.Fatal("the second member's lease is not held")
		}
		go func() { _ = a.Announce(context.Background(), []string{"k"}) }()
		<-bStore.acking // b heard the announcement and is acknowledging it
		stop()
		synctest.Wait()
		select {
		case <-ran:
			t.Fatal("Run returned while its acknowledgement was still using the store")
		default:
		}
		close(bStore.release)
		synctest.Wait()
		select {
		case <-ran:
		default:
			t.Fatal("Run did not return once its acknowledgement was done")
		}
	})
}
