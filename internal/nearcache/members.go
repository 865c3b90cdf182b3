package nearcache

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// A layer in a group (Options.Members: sessions) never serves a copy past
// an answered revocation: each instance trusts its copies only while its
// lease in the store holds (measured on the layer's clock, a tenth short),
// and Announce returns once every member acknowledged forgetting the keys
// or its lease ran out; a member with an announcement pending cannot renew.
// Chubby's rule for its client caches (Burrows, OSDI 2006); the protocol
// and its measured cost are in docs/operations.md ("Revocation waits for
// every instance"), the store's side in kv.Members.
const (
	// memberLease is a member's lease; the longest an announcement waits
	// for a member that does not answer.
	memberLease = time.Second
	// renewEvery is how often a member renews its lease (real time).
	renewEvery = 200 * time.Millisecond
	// trustFor is how long after a renewal began the member trusts its
	// copies: a tenth less than the lease, for the clocks' rates.
	trustFor = memberLease * 9 / 10
	// ackGrace is added to a member's lease when waiting for it.
	ackGrace = 20 * time.Millisecond
)

// Member reports whether this instance's lease in the group holds, so
// that its copies may be served (always true outside a group).
func (l *Layer[T]) Member() bool {
	return l.o.Members == nil || l.now() < l.trustUntil.Load()
}

// renew keeps this instance's lease until ctx ends.
func (l *Layer[T]) renew(ctx context.Context) {
	var done []string
	warned := false
	for ctx.Err() == nil {
		start := l.now()
		pending, err := l.o.Members.Renew(ctx, l.o.Group, l.id, memberLease, done)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			// The lease runs out by itself; the copies stop being trusted.
			done = nil
			if !warned {
				warned = true
				l.o.Logger.Warn("the "+l.o.What+" lease could not be renewed; local "+l.o.What+" copies are not used until it is", slog.String("error", err.Error()))
			}
		case len(pending) > 0:
			// Announcements this instance did not see: forget every copy
			// (it cannot tell which they named), then renew.
			l.distrust()
			done = pending
			continue
		default:
			done, warned = nil, false
			if !l.Member() {
				// The lease ran out (or never was): announcements meanwhile
				// did not wait for this instance, so nothing kept is sure.
				l.distrust()
			}
			l.trustUntil.Store(start + int64(trustFor))
		}
		t := time.NewTimer(renewEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// distrust forgets every copy and stops trusting the layer until the next
// renewal; OnEnd hears "" (every copy held open must be checked again).
func (l *Layer[T]) distrust() {
	l.trustUntil.Store(untrusted)
	l.ForgetAll()
	l.o.OnEnd("")
}

// onMessage handles the channel. In a group: "inv <from> <id> <keys>" (an
// announcement to forget and acknowledge), "ack <from> <id> <to>", and an
// earlier version's "<from> <key>"; outside a group every message is the
// caller's (OnMessage).
func (l *Layer[T]) onMessage(msg string) {
	if l.o.Members == nil {
		l.o.OnMessage(msg)
		return
	}
	f := strings.Fields(msg)
	switch {
	case len(f) == 2:
		if f[0] != l.id {
			l.ended(f[1])
		}
	case len(f) == 4 && f[0] == "inv":
		if f[1] == l.id {
			return
		}
		for _, k := range strings.Split(f[3], ",") {
			l.ended(k)
		}
		l.acking.start(func() { l.ack(f[1], f[2]) })
	case len(f) == 4 && f[0] == "ack":
		if f[3] == l.id {
			l.acks.done(f[2], f[1])
		}
	default:
		l.o.OnMessage(msg)
	}
}

// ended forgets the copy of a key another member ended, and tells OnEnd,
// before the announcement is acknowledged.
func (l *Layer[T]) ended(key string) {
	l.Forget(key)
	l.o.OnEnd(key)
}

// acking are the acknowledgements being sent: each runs on its own (the
// channel's reader must not wait on the store), none starts after stop,
// and stop waits for those running. Run stops them when it ends, so none
// uses the store after Run has returned.
type acking struct {
	mu      sync.Mutex
	stopped bool
	running sync.WaitGroup
}

func (a *acking) start(f func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.stopped {
		a.running.Go(f)
	}
}

func (a *acking) stop() {
	a.mu.Lock()
	a.stopped = true
	a.mu.Unlock()
	a.running.Wait()
}

// ack tells the store and the announcing member that this one forgot the
// copies announcement id named (the caller did, before).
func (l *Layer[T]) ack(to, id string) {
	// Bounded by the lease: past it the announcer no longer waits.
	ctx, cancel := context.WithTimeout(context.Background(), memberLease)
	defer cancel()
	if err := l.o.Members.Ack(ctx, l.o.Group, l.id, id); err != nil {
		return // pending stays: this lease is not renewed until it is handled
	}
	_ = l.store.Publish(ctx, l.o.Channel, "ack "+l.id+" "+id+" "+to)
}

// Announce makes keys unservable on every member: it returns once every
// member with a lease acknowledged forgetting their copies or its lease
// ran out (or ctx ended). The caller has already deleted what they name
// from the store, and forgotten its own copies. Outside a group it only
// returns.
func (l *Layer[T]) Announce(ctx context.Context, keys []string) error {
	if len(keys) == 0 || l.o.Members == nil {
		return nil
	}
	id := newID(22)
	w := l.acks.expect(id)
	defer l.acks.forget(id)
	members, err := l.o.Members.Expect(ctx, l.o.Group, l.id, id)
	if err != nil {
		return err
	}
	// The leases left are on the store's clock, which runs in real time:
	// the wait is on real time too.
	start := time.Now()
	deadlines := make(map[string]time.Time, len(members))
	for _, ml := range members {
		deadlines[ml.Member] = start.Add(ml.Left + ackGrace)
	}
	w.want(deadlines)
	// Should the message fail, the members' leases run out: their renewal
	// is refused while the announcement is pending.
	_ = l.store.Publish(ctx, l.o.Channel, "inv "+l.id+" "+id+" "+strings.Join(keys, ","))
	return w.wait(ctx)
}

// newID returns n characters of a fresh random URL-safe id (n <= 43).
func newID(n int) string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])[:n]
}

// acks are the announcements this instance waits on, by id.
type acks struct {
	mu      sync.Mutex
	waiting map[string]*ackWait
}

type ackWait struct {
	mu      sync.Mutex
	pending map[string]time.Time // member → when its lease runs out
	changed chan struct{}        // a member acknowledged
}

func (a *acks) expect(id string) *ackWait {
	w := &ackWait{pending: map[string]time.Time{}, changed: make(chan struct{}, 1)}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.waiting == nil {
		a.waiting = map[string]*ackWait{}
	}
	a.waiting[id] = w
	return w
}

// forget stops waiting on announcement id.
func (a *acks) forget(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.waiting, id)
}

func (a *acks) done(id, member string) {
	a.mu.Lock()
	w := a.waiting[id]
	a.mu.Unlock()
	if w == nil {
		return
	}
	w.mu.Lock()
	delete(w.pending, member)
	w.mu.Unlock()
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

func (w *ackWait) want(deadlines map[string]time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, v := range deadlines {
		w.pending[k] = v
	}
}

// wait returns once no member is pending: each acknowledged or its lease
// ran out.
func (w *ackWait) wait(ctx context.Context) error {
	for {
		w.mu.Lock()
		now := time.Now()
		var next time.Time
		for member, until := range w.pending {
			if !now.Before(until) {
				delete(w.pending, member)
				continue
			}
			if next.IsZero() || until.Before(next) {
				next = until
			}
		}
		w.mu.Unlock()
		if next.IsZero() {
			return nil
		}
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-w.changed:
			t.Stop()
		case <-t.C:
		}
	}
}
