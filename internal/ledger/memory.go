package ledger

import (
	"bytes"
	"context"
	"sync"
	"time"
)

// Memory is the ledger in one process: the same protocol as Postgres, for
// development without a database. It deduplicates only within the process
// and forgets everything on restart, so production refuses it. Safe for
// concurrent use.
type Memory struct {
	mu     sync.Mutex
	now    func() time.Time
	byKey  map[memKey]*memRecord
	byID   map[int64]*memRecord
	nextID int64
	sealer
}

type memKey struct{ user, route, key string }

type memRecord struct {
	Record
	key      memKey
	owner    string
	match    []byte
	created  time.Time
	response []byte // sealed, like the database's column
}

// NewMemory returns an empty in-process ledger; now is its clock (nil:
// time.Now).
func NewMemory(now func() time.Time, encryptionKey []byte, decryptionKeys [][]byte) (*Memory, error) {
	s, err := newSealer(encryptionKey, decryptionKeys)
	if err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	return &Memory{now: now, byKey: map[memKey]*memRecord{}, byID: map[int64]*memRecord{}, sealer: s}, nil
}

// Ping always succeeds.
func (m *Memory) Ping(context.Context) error { return nil }

// Close does nothing.
func (m *Memory) Close() {}

// Claim is Postgres.Claim.
func (m *Memory) Claim(_ context.Context, req Request, bound time.Duration) (*Claim, *Record, error) {
	if err := checkBound(bound); err != nil {
		return nil, nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	k := memKey{req.UserID, req.Route, req.Key}
	r, ok := m.byKey[k]
	switch {
	case !ok:
		m.nextID++
		r = &memRecord{key: k, created: now}
		r.ID = m.nextID
		r.Fingerprint = bytes.Clone(req.Fingerprint)
		m.byKey[k], m.byID[r.ID] = r, r
	case r.State == StateReleased && bytes.Equal(r.Fingerprint, req.Fingerprint):
	default:
		rec := r.Record
		rec.Expired = rec.State == StateInFlight && now.After(rec.Deadline)
		resp, err := m.open(r.ID, r.response)
		if err != nil {
			return nil, nil, err
		}
		rec.Response = resp
		return nil, &rec, nil
	}
	r.State, r.owner, r.match = StateInFlight, newOwner(), bytes.Clone(req.Match)
	r.ClaimedAt, r.Deadline = now, now.Add(bound)
	r.UpstreamStatus, r.Ending = 0, ""
	return &Claim{ID: r.ID, Owner: r.owner}, nil, nil
}

// update applies f to record id when cond holds, under the lock.
func (m *Memory) update(id int64, cond func(*memRecord) bool, f func(*memRecord)) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.byID[id]
	if !ok || !cond(r) {
		return false
	}
	f(r)
	return true
}

func (m *Memory) owned(c *Claim, states ...State) func(*memRecord) bool {
	return func(r *memRecord) bool {
		if r.owner != c.Owner {
			return false
		}
		for _, s := range states {
			if r.State == s {
				return true
			}
		}
		return false
	}
}

func (m *Memory) end(state State, o Outcome, sealed []byte) func(*memRecord) {
	return func(r *memRecord) {
		r.State, r.Ending = state, o.Ending
		if o.UpstreamStatus != 0 {
			r.UpstreamStatus = o.UpstreamStatus
		}
		if o.PaymentID != "" {
			r.PaymentID = o.PaymentID
		}
		if sealed != nil {
			r.response = sealed
		}
	}
}

// Finish is Postgres.Finish.
func (m *Memory) Finish(_ context.Context, c *Claim, o Outcome) (bool, error) {
	sealed, err := m.seal(c.ID, o.Response)
	if err != nil {
		return false, err
	}
	return m.update(c.ID, m.owned(c, StateInFlight, StateUnknown), m.end(StateDone, o, sealed)), nil
}

// Release is Postgres.Release.
func (m *Memory) Release(_ context.Context, c *Claim, o Outcome) (bool, error) {
	return m.update(c.ID, m.owned(c, StateInFlight), m.end(StateReleased, o, nil)), nil
}

// Unknown is Postgres.Unknown.
func (m *Memory) Unknown(_ context.Context, c *Claim, o Outcome) (bool, error) {
	return m.update(c.ID, m.owned(c, StateInFlight), m.end(StateUnknown, o, nil)), nil
}

// Abandon is Postgres.Abandon.
func (m *Memory) Abandon(_ context.Context, id int64) (bool, error) {
	now := m.now()
	return m.update(id, func(r *memRecord) bool { return r.State == StateInFlight && now.After(r.Deadline) },
		m.end(StateUnknown, Outcome{Ending: EndOwnerLost}, nil)), nil
}

// Settle is Postgres.Settle.
func (m *Memory) Settle(_ context.Context, id int64, o Outcome) (bool, error) {
	sealed, err := m.seal(id, o.Response)
	if err != nil {
		return false, err
	}
	o.Ending = EndSettled
	return m.update(id, func(r *memRecord) bool { return r.State == StateUnknown }, m.end(StateDone, o, sealed)), nil
}

// Neighbours is Postgres.Neighbours.
func (m *Memory) Neighbours(_ context.Context, req Request, except int64, since time.Time) (Neighbours, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := Neighbours{Taken: map[string]bool{}}
	for _, r := range m.byID {
		if r.ID == except || r.key.user != req.UserID || r.key.route != req.Route || r.created.Before(since) {
			continue
		}
		if r.PaymentID != "" {
			n.Taken[r.PaymentID] = true
		}
		same := r.match == nil || req.Match == nil || bytes.Equal(r.match, req.Match)
		if same && (r.State == StateInFlight || r.State == StateUnknown) {
			n.Open = true
		}
	}
	return n, nil
}

// Event does nothing: the in-process ledger keeps no audit trail (it is
// for development; the trail is the database's).
func (m *Memory) Event(context.Context, int64, Request, string) error { return nil }

// AbandonStale is Postgres.AbandonStale.
func (m *Memory) AbandonStale(context.Context) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	var n int64
	for _, r := range m.byID {
		if r.State == StateInFlight && now.After(r.Deadline) {
			m.end(StateUnknown, Outcome{Ending: EndOwnerLost}, nil)(r)
			n++
		}
	}
	return n, nil
}
