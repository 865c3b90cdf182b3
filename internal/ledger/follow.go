package ledger

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// Following payments after their answer (issue 27, migration 005): the
// upstream's status of each payment a done record names is polled by one
// instance at a time, under a fenced lease on the row, and every change of
// a record a user can see is a position in that user's stream of changes,
// announced to every instance.
//
//	Watches  lease the payments due for a poll (watch_next passed), one
//	         instance each (SKIP LOCKED), under a random fence.
//	Watched  store what the poll learned and when to poll next; refused
//	         once the lease is another's.
//	Webhook  store a status the upstream pushed (signed, checked by the
//	         caller), once per delivery id.
//	Changes  a user's records changed after a position, in order.
//	Listen   the announcements: which user's stream moved.

// FinalStatuses are the upstream's payment statuses after which nothing
// changes: a payment in one is no longer followed. The trigger of
// migration 005 lists them too (a migration cannot read Go).
var FinalStatuses = []string{"ACSC", "ACCC", "RJCT", "CANC", "ERROR"}

// Final reports whether status is one of FinalStatuses.
func Final(status string) bool { return slices.Contains(FinalStatuses, status) }

// Watch is a followed payment leased for one poll.
type Watch struct {
	ID        int64
	UserID    string
	RequestID string // the request that claimed the record: the poll's upstream log names it
	PaymentID string
	Status    string    // the latest known status; "" when none yet
	StatusAt  time.Time // the upstream's updatedAt of Status
	CreatedAt time.Time
	Wait      time.Duration // the wait that led to this poll (0: the first)
	Owner     string        // the lease's fence
}

// Observed is what a poll learned and what follows it.
type Observed struct {
	Status string    // "" when the poll learned no status (a failure)
	At     time.Time // the upstream's updatedAt of Status
	// Stop ends the following (a final status, a payment the upstream does
	// not know, or past the budget); else the next poll is Wait from now.
	Stop bool
	Wait time.Duration
}

// StatusUpdate is a payment's status the upstream pushed.
type StatusUpdate struct {
	PaymentID string
	Status    string
	At        time.Time // the upstream's updatedAt
}

// Delivery is what a webhook did.
type Delivery int

// Deliveries.
const (
	Applied   Delivery = iota // the status is stored (or an equal or newer one was)
	Replayed                  // the delivery id was seen already: nothing changed
	Unmatched                 // no record names the payment: nothing changed
)

// NotifyChannel is the PostgreSQL channel the trigger announces changes
// on; the payload is the user id.
const NotifyChannel = "money_request_changes"

// Watches leases up to limit followed payments whose next poll is due, for
// lease (the longest a poll and its write take): until Watched, or until
// the lease runs out and another instance takes the payment. Safe to call
// from every instance at once.
func (p *Postgres) Watches(ctx context.Context, limit int, lease time.Duration) ([]Watch, error) {
	owner := newOwner()
	rows, err := p.pool.Query(ctx, `
WITH due AS (
  SELECT id FROM money_requests WHERE watch_next <= now()
  ORDER BY watch_next LIMIT $1 FOR UPDATE SKIP LOCKED
)
UPDATE money_requests m SET watch_next = now() + $2 * interval '1 microsecond', watch_owner = $3
FROM due WHERE m.id = due.id
RETURNING m.id, m.user_id, m.request_id, m.payment_id, coalesce(m.payment_status, ''), m.status_at, m.created_at,
  coalesce(m.watch_wait_ms, 0)`, limit, lease.Microseconds(), owner)
	if err != nil {
		return nil, unavailable(err)
	}
	defer rows.Close()
	var out []Watch
	for rows.Next() {
		w := Watch{Owner: owner}
		var at *time.Time
		var waitMS int64
		if err := rows.Scan(&w.ID, &w.UserID, &w.RequestID, &w.PaymentID, &w.Status, &at, &w.CreatedAt, &waitMS); err != nil {
			return out, unavailable(err)
		}
		if at != nil {
			w.StatusAt = *at
		}
		w.Wait = time.Duration(waitMS) * time.Millisecond
		out = append(out, w)
	}
	return out, unavailable(rows.Err())
}

// Watched stores what the poll of w learned, and when to poll next. It
// reports false, writing nothing, when w's lease is no longer held (it ran
// out and another instance took the payment): the fence. A status older
// than the stored one (a webhook brought a newer one meanwhile) is not
// stored, and a final status stored meanwhile ends the following.
func (p *Postgres) Watched(ctx context.Context, w Watch, o Observed) (bool, error) {
	return p.exec(ctx, `
UPDATE money_requests SET
  payment_status = CASE WHEN $3 <> '' AND (status_at IS NULL OR $4 >= status_at) THEN $3 ELSE payment_status END,
  status_at = CASE WHEN $3 <> '' AND (status_at IS NULL OR $4 >= status_at) THEN $4 ELSE status_at END,
  watch_next = CASE WHEN $5 OR coalesce(payment_status, '') = ANY($7) THEN NULL
                    ELSE now() + $6 * interval '1 millisecond' END,
  watch_wait_ms = $6, watch_owner = NULL
WHERE id = $1 AND watch_owner = $2`, w.ID, w.Owner, o.Status, nullTime(o.At), o.Stop, o.Wait.Milliseconds(), FinalStatuses)
}

// Webhook stores a status the upstream pushed, in the delivery's name: a
// delivery id seen before is Replayed and changes nothing. A final status
// ends the following; another pushes the next poll out to at least later
// from now (polling stays the safety net). A status older than the stored
// one is not stored (a late delivery). Delivery ids are kept until
// PruneDeliveries.
func (p *Postgres) Webhook(ctx context.Context, deliveryID string, u StatusUpdate, later time.Duration) (Delivery, error) {
	var d Delivery
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO webhook_deliveries (id) VALUES ($1) ON CONFLICT DO NOTHING`, deliveryID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			d = Replayed
			return nil
		}
		var n int
		err = tx.QueryRow(ctx, `
WITH hit AS (
  SELECT id FROM money_requests WHERE payment_id = $1 AND state = 'done' FOR UPDATE
), upd AS (
  UPDATE money_requests m SET payment_status = $2, status_at = $3,
    watch_next = CASE WHEN $4 THEN NULL WHEN m.watch_next IS NULL THEN NULL
                      ELSE greatest(m.watch_next, now() + $5 * interval '1 microsecond') END
  FROM hit WHERE m.id = hit.id AND (m.status_at IS NULL OR $3 >= m.status_at)
)
SELECT count(*) FROM hit`, u.PaymentID, u.Status, u.At, Final(u.Status), later.Microseconds()).Scan(&n)
		if err != nil {
			return err
		}
		if n == 0 {
			d = Unmatched
		}
		return nil
	})
	return d, unavailable(err)
}

// PruneDeliveries forgets the delivery ids received more than age ago: a
// replay of one is then refused by its signature's timestamp instead.
func (p *Postgres) PruneDeliveries(ctx context.Context, age time.Duration) error {
	_, err := p.pool.Exec(ctx, `DELETE FROM webhook_deliveries WHERE received_at < now() - $1 * interval '1 microsecond'`, age.Microseconds())
	return unavailable(err)
}

// Changes returns up to limit of the user's records whose stream position
// is after the given one, in the order of their positions: each record
// once, as it stands now.
func (p *Postgres) Changes(ctx context.Context, userID string, after int64, limit int) ([]Entry, error) {
	rows, err := p.pool.Query(ctx, `SELECT `+entryColumns+` FROM money_requests
WHERE user_id = $1 AND change_seq > $2 ORDER BY change_seq LIMIT $3`, userID, after, limit)
	if err != nil {
		return nil, unavailable(err)
	}
	return p.entries(rows)
}

// Position is the user's latest stream position (0: none yet): a stream
// that starts now sends what comes after it.
func (p *Postgres) Position(ctx context.Context, userID string) (int64, error) {
	var n int64
	err := p.pool.QueryRow(ctx, `SELECT coalesce(max(change_seq), 0) FROM money_requests WHERE user_id = $1 AND change_seq IS NOT NULL`, userID).Scan(&n)
	return n, unavailable(err)
}

// Listen calls changed with the user id of every announced change until
// ctx ends, on a connection of its own. After a connection is (re)made,
// resync is called: announcements while it was down are lost, so whoever
// listens must look again. It returns ctx's error.
func (p *Postgres) Listen(ctx context.Context, changed func(userID string), resync func(), log *slog.Logger) error {
	wait := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := p.listenOnce(ctx, changed, resync)
		if ctx.Err() != nil {
			break
		}
		log.Warn("the ledger's change announcements were cut; listening again", slog.String("error", unavailable(err).Error()))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		wait = min(wait*2, 5*time.Second)
	}
	return ctx.Err()
}

func (p *Postgres) listenOnce(ctx context.Context, changed func(string), resync func()) error {
	conn, err := pgx.ConnectConfig(ctx, p.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+NotifyChannel); err != nil {
		return err
	}
	resync()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		changed(n.Payload)
	}
}
