package ledger

import (
	"bytes"
	"cmp"
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// memFollow is the in-process ledger's share of following: the stream's
// sequence, the announcements' listeners and the delivery ids seen.
type memFollow struct {
	seq        map[string]int64 // each user's last position
	deliveries map[string]time.Time
	lmu        sync.Mutex // guards listeners, apart from m.mu: announcing runs unlocked
	listeners  map[int]func(string)
	nextL      int
}

// changed is the trigger of migrations 005 and 006 for r, whose fields were
// before: it moves r in its user's stream when a listed field of a done,
// unknown, held or declined record changed, and starts following a payment when r became
// done with a payment id. It reports whether to announce. The caller holds
// m.mu.
func (m *Memory) changed(before, r *memRecord) bool {
	moved := false
	if r.State == StateDone || r.State == StateUnknown || r.State == StateAwaiting || r.State == StateDeclined {
		if before.State != r.State || before.PaymentID != r.PaymentID || before.paymentStatus != r.paymentStatus ||
			!bytes.Equal(before.response, r.response) {
			if m.follow.seq == nil {
				m.follow.seq = map[string]int64{}
			}
			m.follow.seq[r.UserID]++
			r.seq = m.follow.seq[r.UserID]
			moved = true
		}
	}
	if r.State == StateDone && r.PaymentID != "" && r.watchNext.IsZero() &&
		(before.State != StateDone || before.PaymentID != r.PaymentID) && !Final(r.paymentStatus) {
		r.watchNext = m.now()
	}
	return moved
}

// notify tells the listeners that userID's stream moved. The caller does
// not hold m.mu.
func (m *Memory) notify(userID string) {
	m.follow.lmu.Lock()
	fs := make([]func(string), 0, len(m.follow.listeners))
	for _, f := range m.follow.listeners {
		fs = append(fs, f)
	}
	m.follow.lmu.Unlock()
	for _, f := range fs {
		f(userID)
	}
}

// Listen is Postgres.Listen: in one process nothing is lost, so resync is
// called once, at the start.
func (m *Memory) Listen(ctx context.Context, changed func(userID string), resync func(), _ *slog.Logger) error {
	m.follow.lmu.Lock()
	if m.follow.listeners == nil {
		m.follow.listeners = map[int]func(string){}
	}
	id := m.follow.nextL
	m.follow.nextL++
	m.follow.listeners[id] = changed
	m.follow.lmu.Unlock()
	resync()
	<-ctx.Done()
	m.follow.lmu.Lock()
	delete(m.follow.listeners, id)
	m.follow.lmu.Unlock()
	return ctx.Err()
}

// Watches is Postgres.Watches.
func (m *Memory) Watches(_ context.Context, limit int, lease time.Duration) ([]Watch, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	owner := newOwner()
	var out []Watch
	for id := int64(1); id <= m.nextID && len(out) < limit; id++ {
		r := m.byID[id]
		if r.watchNext.IsZero() || r.watchNext.After(now) {
			continue
		}
		r.watchNext, r.watchOwner = now.Add(lease), owner
		out = append(out, Watch{ID: r.ID, UserID: r.UserID, RequestID: r.RequestID, PaymentID: r.PaymentID,
			Status: r.paymentStatus, StatusAt: r.statusAt, CreatedAt: r.created, Wait: r.watchWait, Owner: owner})
	}
	return out, nil
}

// Watched is Postgres.Watched.
func (m *Memory) Watched(_ context.Context, w Watch, o Observed) (StatusWrite, error) {
	now := m.now()
	at := o.At.Truncate(time.Microsecond) // as PostgreSQL keeps it
	if o.Undated {
		at = now.Truncate(time.Microsecond) // dated by the ledger's clock (Observed.Undated)
	}
	res := StatusStored
	held := m.update(w.ID, func(r *memRecord) bool { return r.watchOwner == w.Owner }, func(r *memRecord) {
		if o.Status != "" {
			res = write(o.Status, at, r.paymentStatus, r.statusAt, now)
		}
		if o.Status != "" && res == StatusStored {
			r.paymentStatus, r.statusAt = o.Status, at
		}
		r.watchNext, r.watchOwner, r.watchWait = time.Time{}, "", o.Wait.Truncate(time.Millisecond)
		if !o.Stop && !Final(r.paymentStatus) {
			r.watchNext = now.Add(o.Wait)
		}
	})
	if !held {
		return StatusFenced, nil
	}
	return res, nil
}

// Webhook is Postgres.Webhook.
func (m *Memory) Webhook(_ context.Context, deliveryID string, u StatusUpdate, later time.Duration) (Delivery, StatusWrite, error) {
	m.mu.Lock()
	now := m.now()
	if m.follow.deliveries == nil {
		m.follow.deliveries = map[string]time.Time{}
	}
	if _, seen := m.follow.deliveries[deliveryID]; seen {
		m.mu.Unlock()
		return DeliveryReplayed, StatusKept, nil
	}
	m.follow.deliveries[deliveryID] = now
	at := u.At.Truncate(time.Microsecond) // as PostgreSQL keeps it
	var users []string
	hit, res := false, StatusKept
	for _, r := range m.byID {
		if r.PaymentID != u.PaymentID || r.State != StateDone {
			continue
		}
		hit = true
		w := write(u.Status, at, r.paymentStatus, r.statusAt, now)
		res = notable(res, w)
		if w != StatusStored {
			continue
		}
		before := *r
		r.paymentStatus, r.statusAt = u.Status, at
		switch {
		case Final(u.Status):
			r.watchNext = time.Time{}
		case !r.watchNext.IsZero() && r.watchNext.Before(now.Add(later)):
			r.watchNext = now.Add(later)
		}
		if m.changed(&before, r) {
			users = append(users, r.UserID)
		}
	}
	m.mu.Unlock()
	for _, u := range users {
		m.notify(u)
	}
	if !hit {
		return DeliveryUnmatched, StatusKept, nil
	}
	return DeliveryApplied, res, nil
}

// PruneDeliveries is Postgres.PruneDeliveries.
func (m *Memory) PruneDeliveries(_ context.Context, age time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cut := m.now().Add(-age)
	for id, at := range m.follow.deliveries {
		if at.Before(cut) {
			delete(m.follow.deliveries, id)
		}
	}
	return nil
}

// Changes is Postgres.Changes.
func (m *Memory) Changes(_ context.Context, userID string, after int64, limit int) ([]Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Entry
	for _, r := range m.byID {
		if r.UserID == userID && r.seq > after {
			out = append(out, m.entry(r))
		}
	}
	slices.SortFunc(out, func(a, b Entry) int { return cmp.Compare(a.Seq, b.Seq) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Position is Postgres.Position.
func (m *Memory) Position(_ context.Context, userID string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for _, r := range m.byID {
		if r.UserID == userID && r.seq > n {
			n = r.seq
		}
	}
	return n, nil
}
