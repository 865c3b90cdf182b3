package ledger

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fintech-bff/bff/internal/mutant"
)

// Following payments after their answer (migration 005): the
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
//
// Both writers keep a status by one rule, reported as a StatusWrite: a final
// status is never replaced, whatever its updatedAt (docs/payments.md,
// "Webhooks"); otherwise only a strictly newer updatedAt replaces the
// stored one (the upstream's has one-second resolution: an equal one may
// be older), except a final status in the same second as a non-final one,
// which can only be the later; a status dated more than futureSkew ahead
// of the writer's clock is not believed. The following ends when a final
// status is stored, and only then (or when the caller stops it: see
// Observed.Stop).

// FinalStatuses are the upstream's payment statuses after which nothing
// changes: a payment in one is no longer followed. The trigger of
// migration 005 lists them too (a migration cannot read Go).
var FinalStatuses = []string{"ACSC", "ACCC", "RJCT", "CANC", "ERROR"}

// Final reports whether status is one of FinalStatuses.
func Final(status string) bool { return slices.Contains(FinalStatuses, status) }

// futureSkew is how far ahead of the writer's clock an upstream's updatedAt
// may be and still be stored: the clocks differ by a little, never by more.
const futureSkew = 5 * time.Minute

// StatusWrite is what became of the status a poll or a webhook brought.
type StatusWrite int

// The StatusWrites.
const (
	StatusStored StatusWrite = iota // stored; or the poll brought none (it failed)
	// StatusKept: not stored, the stored status stands: its updatedAt is the same
	// or later, or it is final and this is the same status.
	StatusKept
	// StatusAfterFinal: not stored, a final status is stored and this is another:
	// final is final. The caller logs it.
	StatusAfterFinal
	// StatusFuture: not stored, dated more than futureSkew ahead of the writer's
	// clock: not believed.
	StatusFuture
	// StatusFenced: Watched wrote nothing, the lease is another's.
	StatusFenced
)

var writeNames = [...]string{StatusStored: "stored", StatusKept: "kept", StatusAfterFinal: "after_final", StatusFuture: "future", StatusFenced: "fenced"}

func (w StatusWrite) String() string {
	if w >= 0 && int(w) < len(writeNames) {
		return writeNames[w]
	}
	return "Write(" + strconv.Itoa(int(w)) + ")"
}

// write is the rule both ledgers keep a status by: the StatusWrite of status,
// dated at, over stored (dated storedAt; "" when none), on the writer's
// clock now. The SQL of Postgres.Watched and Postgres.Webhook is its
// twin (writeSQL).
func write(status string, at time.Time, stored string, storedAt, now time.Time) StatusWrite {
	switch {
	case Final(stored) && status == stored:
		return StatusKept
	case Final(stored) && !mutant.Is(mutant.FinalReplaceable):
		return StatusAfterFinal
	case at.After(now.Add(futureSkew)):
		return StatusFuture
	case stored == "" || at.After(storedAt):
		return StatusStored
	case Final(status) && at.Equal(storedAt) && status != stored:
		// The upstream stamps to the second: a final status in the same
		// second as a non-final one can only be the later of the two.
		return StatusStored
	}
	return StatusKept
}

// writeSQL is write in SQL, over the columns st (payment_status) and at
// (status_at) of the row as it stands (locked): status and at are the
// placeholders of the status brought and its updatedAt, final of
// FinalStatuses and skew of futureSkew in microseconds; now() is the
// writer's clock. A NULL updatedAt is never newer than a stored status (as
// a zero time.Time is not). Its values are those of sqlWrites.
func writeSQL(status, at, final, skew string) string {
	afterFinal := "\n    WHEN st = ANY($final) THEN 'after_final'"
	if mutant.Is(mutant.FinalReplaceable) {
		afterFinal = ""
	}
	return strings.NewReplacer("$status", status, "$at", at, "$final", final, "$skew", skew).Replace(`CASE
    WHEN st = ANY($final) AND st = $status THEN 'kept'` + afterFinal + `
    WHEN $at > now() + $skew * interval '1 microsecond' THEN 'future'
    WHEN st IS NULL OR $at > coalesce(at, '-infinity') THEN 'stored'
    WHEN $status = ANY($final) AND $at = at AND $status <> st THEN 'stored'
    ELSE 'kept' END`)
}

// sqlWrites are the values of writeSQL ("none": a poll that brought no
// status).
var sqlWrites = map[string]StatusWrite{"none": StatusStored, "stored": StatusStored, "kept": StatusKept, "after_final": StatusAfterFinal, "future": StatusFuture}

// writeRank orders the StatusWrites of a webhook that reached several records:
// the one reported is the one a caller most needs to know of.
var writeRank = [...]int{StatusKept: 0, StatusStored: 1, StatusFuture: 2, StatusAfterFinal: 3, StatusFenced: 4}

// notable is the StatusWrite to report of a and b.
func notable(a, b StatusWrite) StatusWrite {
	if writeRank[b] > writeRank[a] {
		return b
	}
	return a
}

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
	// Undated: the upstream's payment carried no updatedAt (the API
	// documents none for payments). The status is then dated when the
	// writer stores it, by the ledger's own clock: polls of one payment are
	// serialised by its lease, so that order is the order they were read
	// in, and a final status is still never replaced.
	Undated bool
	// Stop ends the following for a reason besides the status (a payment
	// the upstream does not know, or past the budget). A final status ends
	// it once stored, Stop or not; else the next poll is Wait from now.
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
	DeliveryApplied   Delivery = iota // a record names the payment: the StatusWrite says what became of the status
	DeliveryReplayed                  // the delivery id was seen already: nothing changed
	DeliveryUnmatched                 // no record names the payment: nothing changed
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

// observedAt is the date Watched gives the status a poll brought: the
// upstream's updatedAt ($4), or the ledger's clock when it had none ($9,
// Observed.Undated).
const observedAt = `(CASE WHEN $9::boolean THEN now() ELSE $4::timestamptz END)`

// Watched stores what the poll of w learned, and when to poll next, and
// reports what became of its status (see write): Fenced, writing nothing,
// when w's lease is no longer held (it ran out and another instance took
// the payment). A status a webhook made as new or newer meanwhile stands,
// and a final one stored meanwhile stands and has ended the following: the
// poll restarts it only when the status kept is not final and o.Stop is
// not set.
func (p *Postgres) Watched(ctx context.Context, w Watch, o Observed) (StatusWrite, error) {
	var res string
	err := p.pool.QueryRow(ctx, `
WITH old AS (
  SELECT id, payment_status AS st, status_at AS at FROM money_requests WHERE id = $1 AND watch_owner = $2 FOR UPDATE
), v AS (
  SELECT id, st, CASE WHEN $3 = '' THEN 'none' ELSE `+writeSQL("$3", observedAt, "$7", "$8")+` END AS w FROM old
)
UPDATE money_requests m SET
  payment_status = CASE WHEN v.w = 'stored' THEN $3 ELSE m.payment_status END,
  status_at = CASE WHEN v.w = 'stored' THEN `+observedAt+` ELSE m.status_at END,
  watch_next = CASE WHEN $5 OR coalesce(CASE WHEN v.w = 'stored' THEN $3 ELSE v.st END, '') = ANY($7) THEN NULL
                    ELSE now() + $6 * interval '1 millisecond' END,
  watch_wait_ms = $6, watch_owner = NULL
FROM v WHERE m.id = v.id
RETURNING v.w`, w.ID, w.Owner, o.Status, nullTime(o.At), o.Stop, o.Wait.Milliseconds(), FinalStatuses,
		futureSkew.Microseconds(), o.Undated).Scan(&res)
	if errors.Is(err, pgx.ErrNoRows) {
		return StatusFenced, nil
	}
	if err != nil {
		return StatusFenced, unavailable(err)
	}
	return sqlWrites[res], nil
}

// Webhook stores a status the upstream pushed, in the delivery's name: a
// delivery id seen before is Replayed and changes nothing. The StatusWrite is
// what became of the status (see write; Kept when Replayed or Unmatched;
// of several records naming the payment, the most notable). A final status
// stored ends the following; another pushes the next poll out to at least
// later from now (polling stays the safety net). Delivery ids are kept
// until PruneDeliveries.
func (p *Postgres) Webhook(ctx context.Context, deliveryID string, u StatusUpdate, later time.Duration) (Delivery, StatusWrite, error) {
	d, res := DeliveryApplied, StatusKept
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO webhook_deliveries (id) VALUES ($1) ON CONFLICT DO NOTHING`, deliveryID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			d = DeliveryReplayed
			return nil
		}
		var ws []string
		err = tx.QueryRow(ctx, `
WITH hit AS (
  SELECT id, payment_status AS st, status_at AS at FROM money_requests WHERE payment_id = $1 AND state = 'done' FOR UPDATE
), v AS (
  SELECT id, `+writeSQL("$2", "$3", "$6", "$7")+` AS w FROM hit
), upd AS (
  UPDATE money_requests m SET payment_status = $2, status_at = $3,
    watch_next = CASE WHEN $4 THEN NULL WHEN m.watch_next IS NULL THEN NULL
                      ELSE greatest(m.watch_next, now() + $5 * interval '1 microsecond') END
  FROM v WHERE m.id = v.id AND v.w = 'stored'
)
SELECT coalesce(array_agg(w), '{}') FROM v`, u.PaymentID, u.Status, nullTime(u.At), Final(u.Status), later.Microseconds(),
			FinalStatuses, futureSkew.Microseconds()).Scan(&ws)
		if err != nil {
			return err
		}
		if len(ws) == 0 {
			d = DeliveryUnmatched
		}
		for _, w := range ws {
			res = notable(res, sqlWrites[w])
		}
		return nil
	})
	if err != nil {
		return DeliveryApplied, StatusKept, unavailable(err)
	}
	return d, res, nil
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
	conn, closeConn, err := connect(ctx, p.pool.Config().ConnConfig, p.gate, ungated)
	if err != nil {
		return err
	}
	defer closeConn()
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
