package session

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/fintech-bff/bff/internal/localcache"
)

// Revocation wins at once on every instance (contract: a cached copy never
// outlives an answered revocation). Each instance is a member of a group in
// the store, with a lease on the store's clock, and trusts its local copies
// only while its own lease holds, measured on its own clock from before the
// renewal began (so it stops trusting before the store lets the lease go).
// A revocation, once the record is deleted, marks its invalidation pending
// for every member with a lease (kv.Members.Expect), publishes it, and
// answers only when each member has acknowledged dropping its copies or its
// lease has run out; a member cannot renew its lease while an invalidation
// is pending for it, so one that missed the message (its subscription cut,
// the process frozen) stops trusting its copies by the time the lease runs
// out, and drops them all before it renews. This is the rule Chubby keeps
// for its client caches (Burrows, OSDI 2006). Typical cost: one message
// round trip; worst case: the lease.
const (
	// memberGroup names the sessions' group in the store.
	memberGroup = "sessions"
	// memberLease is a member's lease; the longest a revocation waits for
	// an instance that does not answer.
	memberLease = time.Second
	// renewEvery is how often a member renews its lease.
	renewEvery = 200 * time.Millisecond
	// trustFor is how long after a renewal began the member trusts its
	// copies: a tenth less than the lease, for the clocks' rates.
	trustFor = memberLease * 9 / 10
	// ackGrace is added to a member's lease when waiting for it.
	ackGrace = 20 * time.Millisecond
)

// mono is now as a monotonic time kept in an atomic (localcache.Mono):
// a wall-clock step cannot stretch or shrink a lease.
func mono() int64 { return localcache.Mono(time.Now()) }

// member reports whether this instance's lease holds: only then are its
// local copies trusted.
func (m *Manager) member() bool { return mono() < m.trustUntil.Load() }

// Member reports whether this instance's lease in the sessions' group
// holds, so that it may serve sessions from its local copies.
func (m *Manager) Member() bool { return m.member() }

// renew keeps this instance's lease until ctx ends.
func (m *Manager) renew(ctx context.Context) {
	var done []string
	warned := false
	for ctx.Err() == nil {
		start := mono()
		pending, err := m.store.Renew(ctx, memberGroup, m.id, memberLease, done)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			// The lease runs out by itself; the copies stop being trusted.
			done = nil
			if !warned {
				warned = true
				m.log.Warn("the sessions' lease could not be renewed; local session copies are not used until it is", slog.String("error", err.Error()))
			}
		case len(pending) > 0:
			// Invalidations this instance did not see: drop every copy
			// (it cannot tell which they named), then renew.
			m.distrust()
			done = pending
			continue
		default:
			done, warned = nil, false
			if !m.member() {
				// The lease ran out (or never was): revocations meanwhile
				// did not wait for this instance, so nothing kept is sure.
				m.distrust()
			}
			m.trustUntil.Store(start + int64(trustFor))
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

// distrust drops every local copy and stops trusting the layer until the
// next renewal.
func (m *Manager) distrust() {
	m.trustUntil.Store(0)
	m.local.DropAll()
	if f := m.onEnd.Load(); f != nil {
		(*f)("")
	}
}

// onMessage handles the sessions' channel: "inv <from> <id> <handles>"
// (an invalidation to drop and acknowledge), "ack <from> <id> <to>", and an
// earlier version's "<from> <handle>".
func (m *Manager) onMessage(msg string) {
	f := strings.Fields(msg)
	switch {
	case len(f) == 2:
		if f[0] != m.id {
			m.invalidate(f[1])
		}
	case len(f) == 4 && f[0] == "inv":
		if f[1] == m.id {
			return
		}
		for _, h := range strings.Split(f[3], ",") {
			m.invalidate(h)
		}
		go m.ack(f[1], f[2])
	case len(f) == 4 && f[0] == "ack":
		if f[3] == m.id {
			m.acks.done(f[2], f[1])
		}
	}
}

// ack tells the store and the revoking instance that this one dropped the
// copies invalidation id named (the caller did, before).
func (m *Manager) ack(to, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), memberLease)
	defer cancel()
	if err := m.store.Ack(ctx, memberGroup, m.id, id); err != nil {
		return // pending stays: this lease is not renewed until it is handled
	}
	_ = m.store.Publish(ctx, channel, "ack "+m.id+" "+id+" "+to)
}

// announce makes the ended sessions' handles unservable everywhere: it
// returns once every member with a lease acknowledged dropping them or its
// lease ran out (or ctx ended). The records are already deleted.
func (m *Manager) announce(ctx context.Context, handles []string) error {
	if len(handles) == 0 {
		return nil
	}
	id := NewID()[:22]
	w := m.acks.expect(id)
	defer m.acks.forget(id)
	members, err := m.store.Expect(ctx, memberGroup, m.id, id)
	if err != nil {
		return err
	}
	start := time.Now()
	deadlines := make(map[string]time.Time, len(members))
	for _, ml := range members {
		deadlines[ml.Member] = start.Add(ml.Left + ackGrace)
	}
	w.want(deadlines)
	// Should the message fail, the members' leases run out: their renewal
	// is refused while the invalidation is pending.
	_ = m.store.Publish(ctx, channel, "inv "+m.id+" "+id+" "+strings.Join(handles, ","))
	return w.wait(ctx)
}

// acks are the revocations this instance waits on, by invalidation id.
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
