package ledger

import (
	"bytes"
	"context"
	"slices"
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
	follow memFollow
}

type memKey struct{ user, route, key string }

type memRecord struct {
	Record
	key        memKey
	owner      string
	created    time.Time // to the microsecond, as the database keeps it (cursors)
	sentAt     time.Time
	finished   time.Time
	settleNext time.Time
	tries      int
	response   []byte // sealed, like the database's column
	content    []byte // sealed, likewise
	held       []byte // sealed, likewise
	// Following (payments' follower): the columns of migration 005.
	paymentStatus string
	statusAt      time.Time
	seq           int64
	watchNext     time.Time
	watchOwner    string
	watchWait     time.Duration
	approval      []byte // migration 007's column
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
	now := m.now()
	k := memKey{req.UserID, req.Route, req.Key}
	r, ok := m.byKey[k]
	switch {
	case !ok:
		m.nextID++
		r = &memRecord{key: k, created: now.Truncate(time.Microsecond)}
		r.ID, r.UserID, r.Route, r.Key = m.nextID, req.UserID, req.Route, req.Key
		r.Fingerprint = bytes.Clone(req.Fingerprint)
		m.byKey[k], m.byID[r.ID] = r, r
	case r.State == StateReleased && bytes.Equal(r.Fingerprint, req.Fingerprint):
	default:
		rec, err := m.view(r, now)
		m.mu.Unlock()
		return nil, rec, err
	}
	before := *r
	r.State, r.owner, r.RequestID, r.SessionRef = StateInFlight, newOwner(), req.RequestID, req.SessionRef
	if req.Held != nil {
		r.State = StateAwaiting
	}
	r.content = m.sealContent(req.UserID, req.Route, req.Key, req.Content)
	r.held = m.sealHeld(req.UserID, req.Route, req.Key, req.Held)
	r.approval = nil // an earlier attempt's approval is not this one's
	r.ClaimedAt, r.Deadline = now, now.Add(bound)
	r.UpstreamStatus, r.Ending = 0, ""
	r.Sent, r.Send, r.settleNext = false, SendEvidence{}, time.Time{}
	c := &Claim{ID: r.ID, Owner: r.owner, ClaimedAt: now}
	changed := m.changed(&before, r)
	m.mu.Unlock()
	if changed {
		m.notify(req.UserID)
	}
	return c, nil, nil
}

// Record is Postgres.Record.
func (m *Memory) Record(_ context.Context, id int64) (*Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.byID[id]
	if !ok {
		return nil, ErrNoRecord
	}
	return m.view(r, m.now())
}

// Approve is Postgres.Approve.
func (m *Memory) Approve(_ context.Context, id int64, bound time.Duration, proof Approval) (*Claim, error) {
	if err := checkBound(bound); err != nil {
		return nil, err
	}
	now := m.now()
	c := &Claim{ID: id, Owner: newOwner(), ClaimedAt: now}
	ok := m.update(id, func(r *memRecord) bool {
		return r.State == StateAwaiting && now.Before(r.Deadline)
	}, func(r *memRecord) {
		r.State, r.owner, r.ClaimedAt, r.Deadline = StateInFlight, c.Owner, now, now.Add(bound)
		r.approval = proof.column()
	})
	if !ok {
		return nil, nil
	}
	return c, nil
}

// Decline is Postgres.Decline.
func (m *Memory) Decline(_ context.Context, id int64, ending string) (bool, error) {
	return m.update(id, func(r *memRecord) bool { return r.State == StateAwaiting }, func(r *memRecord) {
		r.State, r.Ending, r.finished = StateDeclined, ending, m.now()
	}), nil
}

// ExpireHolds is Postgres.ExpireHolds.
func (m *Memory) ExpireHolds(ctx context.Context) (int64, error) {
	now := m.now()
	m.mu.Lock()
	var due []int64
	for id, r := range m.byID {
		if r.State == StateAwaiting && now.After(r.Deadline) {
			due = append(due, id)
		}
	}
	m.mu.Unlock()
	var n int64
	for _, id := range due {
		if ok, _ := m.Decline(ctx, id, EndExpired); ok {
			n++
		}
	}
	return n, nil
}

// view copies r as a caller sees it. The caller holds m.mu.
func (m *Memory) view(r *memRecord, now time.Time) (*Record, error) {
	rec := r.Record
	rec.Expired = now.After(rec.Deadline)
	var err error
	if rec.Response, err = m.open(r.ID, r.response); err != nil {
		return nil, err
	}
	if rec.Content, err = m.openContent(r.UserID, r.Route, r.Key, r.content); err != nil {
		return nil, err
	}
	if rec.Held, err = m.openHeld(r.UserID, r.Route, r.Key, r.held); err != nil {
		return nil, err
	}
	rec.Send.SeenBefore = append([]string(nil), r.Send.SeenBefore...)
	return &rec, nil
}

// Sending is Postgres.Sending.
func (m *Memory) Sending(_ context.Context, c *Claim, s SendEvidence) (bool, error) {
	now := m.now()
	return m.update(c.ID, func(r *memRecord) bool {
		return r.owner == c.Owner && r.State == StateInFlight && now.Before(r.Deadline)
	}, func(r *memRecord) {
		r.Sent, r.sentAt = true, now
		r.Send = s
		r.Send.SeenBefore = append([]string(nil), s.SeenBefore...)
	}), nil
}

// update applies f to record id when cond holds, under the lock.
func (m *Memory) update(id int64, cond func(*memRecord) bool, f func(*memRecord)) bool {
	m.mu.Lock()
	r, ok := m.byID[id]
	if !ok || !cond(r) {
		m.mu.Unlock()
		return false
	}
	before := *r
	f(r)
	changed := m.changed(&before, r)
	m.mu.Unlock()
	if changed {
		m.notify(r.UserID)
	}
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
		if state != StateInFlight {
			r.finished = m.now()
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
	now := m.now()
	end := m.end(StateUnknown, o, nil)
	return m.update(c.ID, m.owned(c, StateInFlight), func(r *memRecord) {
		end(r)
		r.finished, r.settleNext = now, now.Add(time.Second)
	}), nil
}

// Abandon is Postgres.Abandon.
func (m *Memory) Abandon(_ context.Context, id int64) (State, error) {
	m.mu.Lock()
	r, ok := m.byID[id]
	if !ok || r.State != StateInFlight || !m.now().After(r.Deadline) {
		m.mu.Unlock()
		return "", nil
	}
	before := *r
	m.abandonLocked(r)
	state, changed := r.State, m.changed(&before, r)
	m.mu.Unlock()
	if changed {
		m.notify(r.UserID)
	}
	return state, nil
}

func (m *Memory) abandonLocked(r *memRecord) {
	if r.Sent {
		m.end(StateUnknown, Outcome{Ending: EndOwnerLost}, nil)(r)
	} else {
		m.end(StateReleased, Outcome{Ending: EndNeverSent}, nil)(r)
	}
	r.finished, r.settleNext = m.now(), time.Time{}
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

// GiveBack is Postgres.GiveBack.
func (m *Memory) GiveBack(_ context.Context, id int64) (bool, error) {
	return m.update(id, func(r *memRecord) bool { return r.State == StateUnknown }, func(r *memRecord) {
		m.end(StateReleased, Outcome{Ending: EndNotMade}, nil)(r)
		r.settleNext = time.Time{}
	}), nil
}

// Others is Postgres.Others.
func (m *Memory) Others(_ context.Context, userID string, except int64, since time.Time, ids []string) ([]OtherRequest, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []OtherRequest
	for _, r := range m.byID {
		if r.ID == except || r.key.user != userID {
			continue
		}
		if !r.Deadline.After(since) && (r.PaymentID == "" || !slices.Contains(ids, r.PaymentID)) {
			continue
		}
		o := OtherRequest{Route: r.Route, Key: r.Key, State: r.State, Ending: r.Ending, UpstreamStatus: r.UpstreamStatus,
			PaymentID: r.PaymentID, Sent: r.Sent}
		var err error
		if o.Content, err = m.openContent(r.UserID, r.Route, r.Key, r.content); err != nil {
			o.Opaque = true
		}
		out = append(out, o)
	}
	return out, nil
}

// Event does nothing: the in-process ledger keeps no audit trail (it is
// for development; the trail is the database's).
func (m *Memory) Event(context.Context, int64, Request, AuditEvent) error { return nil }

// Due is Postgres.Due.
func (m *Memory) Due(_ context.Context, limit int, lease, maxLease, giveUp time.Duration) ([]*Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	var out []*Record
	for id := int64(1); id <= m.nextID && len(out) < limit; id++ {
		r := m.byID[id]
		due := (r.State == StateInFlight && now.After(r.Deadline)) ||
			(r.State == StateUnknown && r.content != nil && r.Send.Snapshot && now.Sub(r.finished) < giveUp)
		if !due || now.Before(r.settleNext) {
			continue
		}
		d := lease << min(r.tries, 20)
		if d > maxLease || d <= 0 {
			d = maxLease
		}
		r.settleNext, r.tries = now.Add(d), r.tries+1
		rec, err := m.view(r, now)
		if err != nil {
			return out, err
		}
		out = append(out, rec)
	}
	return out, nil
}

// Unknowns is Postgres.Unknowns.
func (m *Memory) Unknowns(context.Context) (int64, time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	var oldest time.Time
	for _, r := range m.byID {
		if r.State == StateUnknown {
			n++
			if oldest.IsZero() || r.finished.Before(oldest) {
				oldest = r.finished
			}
		}
	}
	return n, oldest, nil
}
