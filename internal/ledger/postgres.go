package ledger

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/tern/v2/migrate"
)

//go:embed migrations/*.sql
var migrations embed.FS

// versionTable is where tern records the schema version.
const versionTable = "bff_schema_version"

// Postgres is the ledger in PostgreSQL. Safe for concurrent use; every
// method is one round trip (Claim's losing path two).
//
// Under a database that is slow or frozen, the ledger sheds new payments
// rather than queue them, in three pools of connections:
//
//   - New claims have their own connections (half of max_conns, at least
//     two), and a Claim waits at most claimWait for one that others hold,
//     then fails with ErrUnavailable (the caller's 503 with a
//     Retry-After): no queue of claims builds up that would still be
//     draining, call by call, after the database answers again.
//   - The calls of payments already claimed (the send mark, the outcome,
//     settling, a repeat's reads) have max_conns connections of their
//     own, never queued behind new claims, and keep their whole budget.
//   - The loops in the background (the recoverer, the follower:
//     Background) have two, so they never take a payment's.
//
// A call whose context ends gives up its connection at once, without
// waiting on a drain, nor on a cancel request while the database does not
// answer (withoutCancel, quickConn); and a database that does not answer
// shuts the gate, which refuses new claims without a round trip until one
// probe is answered (gate).
type Postgres struct {
	pool   *pgxpool.Pool // the calls of payments already claimed, and reads
	claims *pgxpool.Pool // new claims
	// bg is the background loops' pool (Background); nil in the
	// background's own view.
	bg *pgxpool.Pool
	// gate refuses new claims at once while the database does not answer
	// (see gate); nil in the background's view, which claims nothing.
	gate *gate
	sealer
}

// claimWait bounds how long a Claim waits for a connection.
const claimWait = 250 * time.Millisecond

// backgroundConns is the size of the background loops' pool.
const backgroundConns = 2

// Options configures Open.
type Options struct {
	URL string // postgres://…; may carry a password
	// EncryptionKey (32 bytes) seals stored answers; DecryptionKeys open
	// those sealed under earlier keys.
	EncryptionKey  []byte
	DecryptionKeys [][]byte
	MaxConns       int32 // 0: pgxpool's default (4 or the CPU count)
	// Tracer, when set, traces every query (tracing on): otelpgx's, which
	// records the SQL with its placeholders, never the arguments.
	Tracer pgx.QueryTracer
	// Log, when set, hears when new claims are refused because the
	// database does not answer, and when they are taken again (gate).
	Log *slog.Logger
}

// Open connects, applies the migrations (under tern's advisory lock, so
// instances starting together apply them once) and returns the ledger.
func Open(ctx context.Context, o Options) (*Postgres, error) {
	s, err := newSealer(o.EncryptionKey, o.DecryptionKeys)
	if err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(o.URL)
	if err != nil {
		// pgx's message may quote the URL and its password: never pass it on.
		return nil, errors.New("ledger.postgres_url: not a valid PostgreSQL URL")
	}
	if o.Tracer != nil {
		cfg.ConnConfig.Tracer = o.Tracer
	}
	if o.MaxConns > 0 {
		cfg.MaxConns = o.MaxConns
	}
	// A dead database must fail a payment fast with a clear 503, not hang
	// it: connecting is bounded here, and each call by its context. A
	// call whose context ends closes its connection (a deadline on the
	// socket) instead of opening another to send a cancel request.
	cfg.ConnConfig.ConnectTimeout = 3 * time.Second
	cfg.ConnConfig.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: c.Conn()}
	}
	// The gate (see gate): while it is shut the new claims' and the
	// background's pools do not dial; no connection dials a cancel
	// request while it doubts the database (withoutCancel).
	g := newGate(nil, o.Log)
	g.probe = probeWith(cfg.ConnConfig, g)
	cfg.BeforeConnect = func(_ context.Context, cc *pgx.ConnConfig) error {
		withoutCancel(cc, g, ungated)
		return nil
	}
	gatedConnect := func(_ context.Context, cc *pgx.ConnConfig) error {
		if !g.open() {
			return errShut
		}
		withoutCancel(cc, g, gated)
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, unavailable(err)
	}
	if err := migrateUp(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	claimsCfg := cfg.Copy()
	claimsCfg.MaxConns, claimsCfg.MinConns = max(2, cfg.MaxConns/2), 0
	claimsCfg.BeforeConnect = gatedConnect
	bgCfg := cfg.Copy()
	bgCfg.MaxConns, bgCfg.MinConns = backgroundConns, 0
	bgCfg.BeforeConnect = gatedConnect
	claims, err := pgxpool.NewWithConfig(ctx, claimsCfg)
	if err != nil {
		pool.Close()
		return nil, unavailable(err)
	}
	bg, err := pgxpool.NewWithConfig(ctx, bgCfg)
	if err != nil {
		pool.Close()
		claims.Close()
		return nil, unavailable(err)
	}
	return &Postgres{pool: pool, claims: claims, bg: bg, gate: g, sealer: s}, nil
}

// Background is the ledger as the loops in the background use it: the
// same database, through their own small pool.
func (p *Postgres) Background() *Postgres {
	if p.bg == nil {
		return p
	}
	return &Postgres{pool: p.bg, claims: p.bg, sealer: p.sealer}
}

func migrateUp(ctx context.Context, pool *pgxpool.Pool) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return unavailable(err)
	}
	defer conn.Release()
	m, err := migrate.NewMigrator(ctx, conn.Conn(), versionTable)
	if err != nil {
		return fmt.Errorf("ledger: migrations: %w", err)
	}
	sub, _ := fs.Sub(migrations, "migrations")
	if err := m.LoadMigrations(sub); err != nil {
		return fmt.Errorf("ledger: migrations: %w", err)
	}
	if err := m.Migrate(ctx); err != nil {
		return fmt.Errorf("ledger: migrations: %w", err)
	}
	return nil
}

// Close closes the ledger's pools; on the background's view (Background)
// it does nothing: the ledger it came from owns them.
func (p *Postgres) Close() {
	if p.bg == nil {
		return
	}
	p.gate.close()
	p.pool.Close()
	p.claims.Close()
	p.bg.Close()
}

// Ping reports whether the database answers a new claim's connection:
// while new payments are being shed (bff_ledger_up), it does not.
func (p *Postgres) Ping(ctx context.Context) error {
	if !p.gate.open() {
		return unavailable(errShut)
	}
	return unavailable(p.claims.Ping(ctx))
}

// Claim claims req's key for one upstream call that ends within bound. It
// returns the claim when this request won (a new key, or a released one
// with the same fingerprint), else the key's record as it stands.
func (p *Postgres) Claim(ctx context.Context, req Request, bound time.Duration) (*Claim, *Record, error) {
	if err := checkBound(bound); err != nil {
		return nil, nil, err
	}
	if !p.gate.open() {
		return nil, nil, unavailable(errShut)
	}
	// New work waits only briefly for a connection that others hold (see
	// Postgres); opening one of its own, when the pool has room, takes
	// what it takes within ctx.
	actx, cancel, bounded := ctx, context.CancelFunc(func() {}), false
	if st := p.claims.Stat(); st.AcquiredConns()+st.ConstructingConns() >= st.MaxConns() {
		actx, cancel = context.WithTimeout(ctx, claimWait)
		bounded = true
	}
	conn, err := p.claims.Acquire(actx)
	cancel()
	if err != nil {
		if !bounded {
			p.gate.failed(err) // a connection that could not be made, not a busy pool
		}
		return nil, nil, unavailable(fmt.Errorf("no connection for a new claim within %v: %w", claimWait, err))
	}
	defer conn.Release()
	owner := newOwner()
	var c Claim
	err = conn.QueryRow(ctx, `
WITH c AS (
  INSERT INTO money_requests AS m
    (user_id, route, idem_key, fingerprint, session_ref, client_ip, request_id, state, owner, deadline, content, held)
  VALUES ($1, $2, $3, $4, $5, $6, $7, CASE WHEN $12::bytea IS NULL THEN 'in_flight' ELSE 'awaiting_approval' END,
    $8, now() + $9 * interval '1 microsecond', $11, $12)
  ON CONFLICT ON CONSTRAINT money_requests_key DO UPDATE
    SET state = excluded.state, held = excluded.held, approval = NULL, owner = excluded.owner, attempts = m.attempts + 1, claimed_at = now(), match_key = NULL,
        deadline = excluded.deadline, finished_at = NULL, ending = NULL, upstream_status = NULL,
        session_ref = excluded.session_ref, client_ip = excluded.client_ip, request_id = excluded.request_id,
        sending_at = NULL, content = excluded.content, snapshot = false, seen_before = NULL, seen_from = NULL,
        seen_cut = NULL, window_end = NULL, settle_next = NULL
    WHERE m.state = 'released' AND m.fingerprint = excluded.fingerprint
  RETURNING id, claimed_at
), e AS (
  INSERT INTO money_request_events (money_request, what, session_ref, client_ip, request_id)
  SELECT id, $10, $5, $6, $7 FROM c
)
SELECT id, claimed_at FROM c`,
		req.UserID, req.Route, req.Key, req.Fingerprint, req.SessionRef, req.ClientIP, req.RequestID,
		owner, bound.Microseconds(), EventClaimed, p.sealContent(req.UserID, req.Route, req.Key, req.Content),
		p.sealHeld(req.UserID, req.Route, req.Key, req.Held)).Scan(&c.ID, &c.ClaimedAt)
	if err == nil {
		c.Owner = owner
		return &c, nil, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		p.gate.failed(err)
		return nil, nil, unavailable(err)
	}
	rec, err := p.lookup(ctx, conn, req)
	return nil, rec, err
}

// recordColumns are the columns scanRecord reads, in its order.
const recordColumns = `id, user_id, route, idem_key, request_id, state, fingerprint, claimed_at, deadline,
  now() > deadline, upstream_status, payment_id, ending, response, sending_at IS NOT NULL, content,
  snapshot, seen_before, seen_from, seen_cut, window_end, starts_with(owner, '` + markingOwner + `'), session_ref, held`

func (p *Postgres) scanRecord(row pgx.Row) (*Record, error) {
	var r Record
	var state string
	var status *int32
	var paymentID, ending *string
	var resp, content, held []byte
	var seenFrom, seenCut, windowEnd *time.Time
	var marking bool
	err := row.Scan(&r.ID, &r.UserID, &r.Route, &r.Key, &r.RequestID, &state, &r.Fingerprint, &r.ClaimedAt, &r.Deadline,
		&r.Expired, &status, &paymentID, &ending, &resp, &r.Sent, &content,
		&r.Send.Snapshot, &r.Send.SeenBefore, &seenFrom, &seenCut, &windowEnd, &marking, &r.SessionRef, &held)
	if err != nil {
		return nil, err
	}
	if !marking {
		// Claimed by an earlier version (a rolling upgrade), which writes no
		// mark and resets no evidence: what the columns hold is an earlier
		// attempt's, never this one's.
		r.Sent, r.Send, seenFrom, seenCut, windowEnd = false, SendEvidence{}, nil, nil, nil
	}
	r.State = State(state)
	if status != nil {
		r.UpstreamStatus = int(*status)
	}
	if paymentID != nil {
		r.PaymentID = *paymentID
	}
	if ending != nil {
		r.Ending = *ending
	}
	for _, t := range []struct {
		from *time.Time
		to   *time.Time
	}{{seenFrom, &r.Send.SeenFrom}, {seenCut, &r.Send.SeenCut}, {windowEnd, &r.Send.WindowEnd}} {
		if t.from != nil {
			*t.to = *t.from
		}
	}
	if r.Response, err = p.open(r.ID, resp); err != nil {
		return nil, err
	}
	if r.Content, err = p.openContent(r.UserID, r.Route, r.Key, content); err != nil {
		return nil, err
	}
	if r.Held, err = p.openHeld(r.UserID, r.Route, r.Key, held); err != nil {
		return nil, err
	}
	return &r, nil
}

func (p *Postgres) lookup(ctx context.Context, conn *pgxpool.Conn, req Request) (*Record, error) {
	r, err := p.scanRecord(conn.QueryRow(ctx, `SELECT `+recordColumns+`
FROM money_requests WHERE user_id = $1 AND route = $2 AND idem_key = $3`, req.UserID, req.Route, req.Key))
	if err != nil {
		// No row: the key was claimed and then removed, which nothing does;
		// report it as a failure rather than guess.
		return nil, unavailable(err)
	}
	return r, nil
}

// Record reads the record id.
func (p *Postgres) Record(ctx context.Context, id int64) (*Record, error) {
	r, err := p.scanRecord(p.pool.QueryRow(ctx, `SELECT `+recordColumns+` FROM money_requests WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNoRecord
	}
	return r, unavailable(err)
}

// Approve takes a held record for its one send: awaiting_approval becomes
// in_flight under a new owner, with a deadline bound away, as a claim
// does. It returns nil when the record is not held, or its hold has run
// out: one approval releases it once.
func (p *Postgres) Approve(ctx context.Context, id int64, bound time.Duration, proof Approval) (*Claim, error) {
	if err := checkBound(bound); err != nil {
		return nil, err
	}
	c := Claim{ID: id, Owner: newOwner()}
	err := p.pool.QueryRow(ctx, `
WITH a AS (
  UPDATE money_requests SET state = 'in_flight', owner = $2, claimed_at = now(), deadline = now() + $3 * interval '1 microsecond',
    approval = $5
  WHERE id = $1 AND state = 'awaiting_approval' AND now() < deadline
  RETURNING id, claimed_at, session_ref, client_ip, request_id
), e AS (
  INSERT INTO money_request_events (money_request, what, session_ref, client_ip, request_id)
  SELECT id, $4, session_ref, client_ip, request_id FROM a
)
SELECT claimed_at FROM a`, id, c.Owner, bound.Microseconds(), EventApproved, proof.column()).Scan(&c.ClaimedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, unavailable(err)
	}
	return &c, nil
}

// Decline ends a held record that will never be sent (ending: EndDenied,
// EndMismatch, EndExpired). It reports false when the record was no longer
// held.
func (p *Postgres) Decline(ctx context.Context, id int64, ending string) (bool, error) {
	return p.exec(ctx, `
UPDATE money_requests SET state = 'declined', ending = $2, finished_at = now()
WHERE id = $1 AND state = 'awaiting_approval'`, id, ending)
}

// ExpireHolds declines every hold past its deadline (EndExpired), and
// returns how many it ended. Safe to run on every instance at once.
func (p *Postgres) ExpireHolds(ctx context.Context) (int64, error) {
	tag, err := p.pool.Exec(ctx, `
UPDATE money_requests SET state = 'declined', ending = 'expired', finished_at = now()
WHERE state = 'awaiting_approval' AND deadline < now()`)
	if err != nil {
		return 0, unavailable(err)
	}
	return tag.RowsAffected(), nil
}

// Sending marks, before the owner sends, that its request is about to
// leave, with the evidence settling will need. It reports false when the
// claim is no longer the owner's to send (past its deadline, abandoned):
// then nothing may be sent.
func (p *Postgres) Sending(ctx context.Context, c *Claim, s SendEvidence) (bool, error) {
	return p.exec(ctx, `
UPDATE money_requests SET sending_at = now(), sends = sends + 1, snapshot = $3, seen_before = $4,
  seen_from = $5, seen_cut = $6, window_end = $7
WHERE id = $1 AND owner = $2 AND state = 'in_flight' AND now() < deadline`,
		c.ID, c.Owner, s.Snapshot, s.SeenBefore, nullTime(s.SeenFrom), nullTime(s.SeenCut), nullTime(s.WindowEnd))
}

// Finish stores the owner's final answer (done). It reports false when the
// record had already been settled by another request.
func (p *Postgres) Finish(ctx context.Context, c *Claim, o Outcome) (bool, error) {
	sealed, err := p.seal(c.ID, o.Response)
	if err != nil {
		return false, err
	}
	return p.exec(ctx, `
UPDATE money_requests SET state = 'done', ending = $3, upstream_status = $4, payment_id = $5, response = $6, finished_at = now()
WHERE id = $1 AND owner = $2 AND state IN ('in_flight', 'unknown')`,
		c.ID, c.Owner, o.Ending, nullInt(o.UpstreamStatus), nullString(o.PaymentID), sealed)
}

// Release gives the key back: the upstream surely did not act.
func (p *Postgres) Release(ctx context.Context, c *Claim, o Outcome) (bool, error) {
	return p.exec(ctx, `
UPDATE money_requests SET state = 'released', ending = $3, upstream_status = $4, finished_at = now()
WHERE id = $1 AND owner = $2 AND state = 'in_flight'`, c.ID, c.Owner, o.Ending, nullInt(o.UpstreamStatus))
}

// Unknown records that the owner cannot tell whether the upstream acted.
func (p *Postgres) Unknown(ctx context.Context, c *Claim, o Outcome) (bool, error) {
	return p.exec(ctx, `
UPDATE money_requests SET state = 'unknown', ending = $3, upstream_status = $4, finished_at = now(),
  settle_next = now() + interval '1 second'
WHERE id = $1 AND owner = $2 AND state = 'in_flight'`, c.ID, c.Owner, o.Ending, nullInt(o.UpstreamStatus))
}

// Abandon ends an in-flight record past its deadline, whose owner died or
// hung and can no longer reach the upstream: released (the key runs again)
// when the owner, one that marks its sends (markingOwner), never marked
// it; else unknown. It returns the new
// state, or "" when the record was not in flight past its deadline.
func (p *Postgres) Abandon(ctx context.Context, id int64) (State, error) {
	var state string
	err := p.pool.QueryRow(ctx, `
UPDATE money_requests SET
  state = CASE WHEN sending_at IS NULL AND starts_with(owner, $2) THEN 'released' ELSE 'unknown' END,
  ending = CASE WHEN sending_at IS NULL AND starts_with(owner, $2) THEN 'never_sent' ELSE 'owner_lost' END,
  finished_at = now(), settle_next = NULL
WHERE id = $1 AND state = 'in_flight' AND now() > deadline
RETURNING state`, id, markingOwner).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", unavailable(err)
	}
	return State(state), nil
}

// Settle stores an outcome learned from the upstream for an unknown record.
func (p *Postgres) Settle(ctx context.Context, id int64, o Outcome) (bool, error) {
	sealed, err := p.seal(id, o.Response)
	if err != nil {
		return false, err
	}
	return p.exec(ctx, `
UPDATE money_requests SET state = 'done', ending = 'settled', upstream_status = coalesce($2, upstream_status), payment_id = $3,
  response = $4, finished_at = now()
WHERE id = $1 AND state = 'unknown'`, id, nullInt(o.UpstreamStatus), nullString(o.PaymentID), sealed)
}

// GiveBack ends an unknown record whose settling proved that the upstream
// made nothing (released, ending not_made): the next request with the key
// claims it again. It reports false when the record was no longer unknown.
func (p *Postgres) GiveBack(ctx context.Context, id int64) (bool, error) {
	return p.exec(ctx, `
UPDATE money_requests SET state = 'released', ending = 'not_made', finished_at = now(), settle_next = NULL
WHERE id = $1 AND state = 'unknown'`, id)
}

// Others are the user's money requests other than except, on every route
// and in every state, whose deadline is after since (they may have been at
// the upstream after it), or whose payment id is one of ids.
func (p *Postgres) Others(ctx context.Context, userID string, except int64, since time.Time, ids []string) ([]OtherRequest, error) {
	if ids == nil {
		ids = []string{}
	}
	rows, err := p.pool.Query(ctx, `
SELECT route, idem_key, state, coalesce(ending, ''), coalesce(upstream_status, 0), coalesce(payment_id, ''),
  sending_at IS NOT NULL OR NOT starts_with(owner, '`+markingOwner+`'), content
FROM money_requests
WHERE user_id = $1 AND id <> $2 AND (deadline > $3 OR payment_id = ANY($4))`, userID, except, since, ids)
	if err != nil {
		return nil, unavailable(err)
	}
	defer rows.Close()
	var out []OtherRequest
	for rows.Next() {
		var o OtherRequest
		var state string
		var status int32
		var sealed []byte
		if err := rows.Scan(&o.Route, &o.Key, &state, &o.Ending, &status, &o.PaymentID, &o.Sent, &sealed); err != nil {
			return nil, unavailable(err)
		}
		o.State, o.UpstreamStatus = State(state), int(status)
		if o.Content, err = p.openContent(userID, o.Route, o.Key, sealed); err != nil {
			o.Opaque = true
		}
		out = append(out, o)
	}
	return out, unavailable(rows.Err())
}

// Event appends one entry to a record's audit trail.
func (p *Postgres) Event(ctx context.Context, id int64, req Request, what AuditEvent) error {
	_, err := p.pool.Exec(ctx, `
INSERT INTO money_request_events (money_request, what, session_ref, client_ip, request_id) VALUES ($1, $2, $3, $4, $5)`,
		id, what, req.SessionRef, req.ClientIP, req.RequestID)
	return unavailable(err)
}

// Due leases up to limit open records for the background settler: in
// flight past their deadline, or unknown, settleable (content and snapshot)
// and ended less than giveUp ago, and not leased or looked at since their
// settle_next. Each is leased for lease·2^looks (at most maxLease) by
// settle_next, so one instance at a time looks at a record, and less often
// as it stays unknown. Safe to call from every instance at once (SKIP
// LOCKED: they take different rows).
func (p *Postgres) Due(ctx context.Context, limit int, lease, maxLease, giveUp time.Duration) ([]*Record, error) {
	rows, err := p.pool.Query(ctx, `
WITH due AS (
  SELECT id FROM money_requests
  WHERE state IN ('in_flight', 'unknown')
    AND ((state = 'in_flight' AND deadline < now())
      OR (state = 'unknown' AND content IS NOT NULL AND snapshot AND starts_with(owner, '`+markingOwner+`')
          AND finished_at > now() - $4 * interval '1 microsecond'))
    AND (settle_next IS NULL OR settle_next <= now())
  ORDER BY deadline LIMIT $1
  FOR UPDATE SKIP LOCKED
), leased AS (
  UPDATE money_requests m
  SET settle_next = now() + least($2 * power(2, least(m.settle_tries, 20)), $3) * interval '1 microsecond',
      settle_tries = m.settle_tries + 1
  FROM due WHERE m.id = due.id
  RETURNING m.*
)
SELECT `+recordColumns+` FROM leased`, limit, lease.Microseconds(), maxLease.Microseconds(), giveUp.Microseconds())
	if err != nil {
		return nil, unavailable(err)
	}
	defer rows.Close()
	var out []*Record
	for rows.Next() {
		r, err := p.scanRecord(rows)
		if err != nil {
			return out, unavailable(err)
		}
		out = append(out, r)
	}
	return out, unavailable(rows.Err())
}

// Unknowns counts the records whose outcome is unknown and says when the
// oldest of them ended (zero when there is none), for the metrics.
func (p *Postgres) Unknowns(ctx context.Context) (int64, time.Time, error) {
	var n int64
	var oldest *time.Time
	err := p.pool.QueryRow(ctx, `SELECT count(*), min(finished_at) FROM money_requests WHERE state = 'unknown'`).Scan(&n, &oldest)
	if err != nil {
		return 0, time.Time{}, unavailable(err)
	}
	if oldest == nil {
		return n, time.Time{}, nil
	}
	return n, *oldest, nil
}

func (p *Postgres) exec(ctx context.Context, sql string, args ...any) (bool, error) {
	tag, err := p.pool.Exec(ctx, sql, args...)
	if err != nil {
		return false, unavailable(err)
	}
	return tag.RowsAffected() == 1, nil
}

func nullInt(v int) *int32 {
	if v == 0 {
		return nil
	}
	n := int32(v)
	return &n
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
