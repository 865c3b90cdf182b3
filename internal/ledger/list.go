package ledger

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// Cursor is a position in a user's records, newest first: the CreatedAt
// and ID of the last record a page returned. The zero Cursor is the start.
type Cursor struct {
	CreatedAt time.Time // microseconds, the database's precision
	ID        int64
}

// Entry is a record as its user lists it: no fingerprint, content or
// stored answer.
type Entry struct {
	ID    int64
	Route string // the money route's prefix
	Key   string // the Idempotency-Key, as the client sent it
	State State  // never StateReleased: a released key is listed as never used
	// Answered is the status of the stored answer (done); 0 when there is
	// none, or it does not open under the configured keys.
	Answered       int
	UpstreamStatus int
	PaymentID      string
	// PaymentStatus is the upstream's latest known status of the payment
	// ("" when none is known yet).
	PaymentStatus string
	// Seq is the record's position in its user's stream of changes: it
	// grows with every change streamed (0: never streamed, in flight).
	Seq       int64
	CreatedAt time.Time
	// UpdatedAt is the latest of the claim, the send mark and the end.
	UpdatedAt time.Time
	// Ending is how the request ended ("" while open): why a declined
	// one was not sent.
	Ending string
	// SessionRef is the session that made it (a hash of the session id).
	SessionRef string
}

// Cursor is the position just after e.
func (e Entry) Cursor() Cursor { return Cursor{CreatedAt: e.CreatedAt, ID: e.ID} }

// entryColumns are the columns scanEntry reads, in its order.
const entryColumns = `id, route, idem_key, state, upstream_status, payment_id, payment_status, coalesce(change_seq, 0),
  response, created_at, greatest(created_at, claimed_at, sending_at, finished_at, status_at), coalesce(ending, ''),
  session_ref`

func (p *Postgres) scanEntry(row pgx.Row) (Entry, error) {
	var e Entry
	var state string
	var status *int32
	var paymentID, paymentStatus *string
	var resp []byte
	if err := row.Scan(&e.ID, &e.Route, &e.Key, &state, &status, &paymentID, &paymentStatus, &e.Seq, &resp, &e.CreatedAt, &e.UpdatedAt, &e.Ending, &e.SessionRef); err != nil {
		return e, err
	}
	if paymentStatus != nil {
		e.PaymentStatus = *paymentStatus
	}
	e.State = State(state)
	if status != nil {
		e.UpstreamStatus = int(*status)
	}
	if paymentID != nil {
		e.PaymentID = *paymentID
	}
	e.Answered = answered(p.sealer, e.ID, resp)
	return e, nil
}

// answered is the status of a sealed answer; 0 when there is none or it
// does not open (a key retired too early must not hide the list).
func answered(s sealer, id int64, sealed []byte) int {
	r, err := s.open(id, sealed)
	if err != nil || r == nil {
		return 0
	}
	return r.Status
}

// List returns up to limit of the user's records after the cursor, newest
// first (created_at, then id), leaving out released ones (their key is as
// if never used). It reads the index money_requests_user_list.
func (p *Postgres) List(ctx context.Context, userID string, after Cursor, limit int) ([]Entry, error) {
	var rows pgx.Rows
	var err error
	if after == (Cursor{}) {
		rows, err = p.pool.Query(ctx, `SELECT `+entryColumns+` FROM money_requests
WHERE user_id = $1 AND state <> 'released'
ORDER BY created_at DESC, id DESC LIMIT $2`, userID, limit)
	} else {
		rows, err = p.pool.Query(ctx, `SELECT `+entryColumns+` FROM money_requests
WHERE user_id = $1 AND state <> 'released' AND (created_at, id) < ($2, $3)
ORDER BY created_at DESC, id DESC LIMIT $4`, userID, after.CreatedAt, after.ID, limit)
	}
	if err != nil {
		return nil, unavailable(err)
	}
	return p.entries(rows)
}

// entries reads every row of a query of entryColumns and closes rows.
func (p *Postgres) entries(rows pgx.Rows) ([]Entry, error) {
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		e, err := p.scanEntry(rows)
		if err != nil {
			return nil, unavailable(err)
		}
		out = append(out, e)
	}
	return out, unavailable(rows.Err())
}

// Get returns the user's record with the Idempotency-Key, on whichever
// money route (the newest, should the key be on several), and false when
// the user has none (or only a released one).
func (p *Postgres) Get(ctx context.Context, userID, key string) (Entry, bool, error) {
	e, err := p.scanEntry(p.pool.QueryRow(ctx, `SELECT `+entryColumns+` FROM money_requests
WHERE user_id = $1 AND idem_key = $2 AND state <> 'released'
ORDER BY created_at DESC, id DESC LIMIT 1`, userID, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, unavailable(err)
	}
	return e, true, nil
}

// entry is r as its user lists it. The caller holds m.mu.
func (m *Memory) entry(r *memRecord) Entry {
	e := Entry{ID: r.ID, Route: r.Route, Key: r.Key, State: r.State, UpstreamStatus: r.UpstreamStatus,
		PaymentID: r.PaymentID, PaymentStatus: r.paymentStatus, Seq: r.seq, CreatedAt: r.created, UpdatedAt: r.created,
		Ending: r.Ending, SessionRef: r.SessionRef}
	e.Answered = answered(m.sealer, r.ID, r.response)
	for _, t := range []time.Time{r.ClaimedAt, r.sentAt, r.finished, r.statusAt} {
		if t.After(e.UpdatedAt) {
			e.UpdatedAt = t
		}
	}
	return e
}

// newer reports whether a comes before b, newest first.
func newer(a, b Cursor) bool {
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.After(b.CreatedAt)
	}
	return a.ID > b.ID
}

// List is Postgres.List.
func (m *Memory) List(_ context.Context, userID string, after Cursor, limit int) ([]Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Entry
	for _, r := range m.byID {
		if r.key.user != userID || r.State == StateReleased {
			continue
		}
		e := m.entry(r)
		if after != (Cursor{}) && !newer(after, e.Cursor()) {
			continue
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int {
		if newer(a.Cursor(), b.Cursor()) {
			return -1
		}
		return 1
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Get is Postgres.Get.
func (m *Memory) Get(_ context.Context, userID, key string) (Entry, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var best Entry
	found := false
	for k, r := range m.byKey {
		if k.user != userID || k.key != key || r.State == StateReleased {
			continue
		}
		if e := m.entry(r); !found || newer(e.Cursor(), best.Cursor()) {
			best, found = e, true
		}
	}
	return best, found, nil
}
