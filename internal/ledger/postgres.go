package ledger

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/tern/v2/migrate"
)

//go:embed migrations/*.sql
var migrations embed.FS

// versionTable is where tern records the schema version.
const versionTable = "bff_schema_version"

// Postgres is the ledger in PostgreSQL. Safe for concurrent use; every
// method is one round trip (Claim's losing path two).
type Postgres struct {
	pool *pgxpool.Pool
	sealer
}

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
	// it: connecting is bounded here, and each call by its context.
	cfg.ConnConfig.ConnectTimeout = 3 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, unavailable(err)
	}
	if err := migrateUp(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return &Postgres{pool: pool, sealer: s}, nil
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

// Close closes the pool.
func (p *Postgres) Close() { p.pool.Close() }

// Ping reports whether the database answers.
func (p *Postgres) Ping(ctx context.Context) error { return unavailable(p.pool.Ping(ctx)) }

// Claim claims req's key for one upstream call that ends within bound. It
// returns the claim when this request won (a new key, or a released one
// with the same fingerprint), else the key's record as it stands.
func (p *Postgres) Claim(ctx context.Context, req Request, bound time.Duration) (*Claim, *Record, error) {
	if err := checkBound(bound); err != nil {
		return nil, nil, err
	}
	owner := newOwner()
	var c Claim
	err := p.pool.QueryRow(ctx, `
WITH c AS (
  INSERT INTO money_requests AS m
    (user_id, route, idem_key, fingerprint, session_ref, client_ip, request_id, state, owner, deadline, match_key)
  VALUES ($1, $2, $3, $4, $5, $6, $7, 'in_flight', $8, now() + $9 * interval '1 microsecond', $10)
  ON CONFLICT ON CONSTRAINT money_requests_key DO UPDATE
    SET state = 'in_flight', owner = excluded.owner, attempts = m.attempts + 1, claimed_at = now(), match_key = excluded.match_key,
        deadline = excluded.deadline, finished_at = NULL, ending = NULL, upstream_status = NULL,
        session_ref = excluded.session_ref, client_ip = excluded.client_ip, request_id = excluded.request_id
    WHERE m.state = 'released' AND m.fingerprint = excluded.fingerprint
  RETURNING id
), e AS (
  INSERT INTO money_request_events (money_request, what, session_ref, client_ip, request_id)
  SELECT id, $11, $5, $6, $7 FROM c
)
SELECT id FROM c`,
		req.UserID, req.Route, req.Key, req.Fingerprint, req.SessionRef, req.ClientIP, req.RequestID,
		owner, bound.Microseconds(), req.Match, EventClaimed).Scan(&c.ID)
	if err == nil {
		c.Owner = owner
		return &c, nil, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, unavailable(err)
	}
	rec, err := p.lookup(ctx, req)
	return nil, rec, err
}

func (p *Postgres) lookup(ctx context.Context, req Request) (*Record, error) {
	var r Record
	var state string
	var status *int32
	var paymentID, ending *string
	var resp []byte
	err := p.pool.QueryRow(ctx, `
SELECT id, state, fingerprint, claimed_at, deadline, now() > deadline, upstream_status, payment_id, ending, response
FROM money_requests WHERE user_id = $1 AND route = $2 AND idem_key = $3`,
		req.UserID, req.Route, req.Key).Scan(&r.ID, &state, &r.Fingerprint, &r.ClaimedAt, &r.Deadline, &r.Expired,
		&status, &paymentID, &ending, &resp)
	if err != nil {
		// No row: the key was claimed and then removed, which nothing does;
		// report it as a failure rather than guess.
		return nil, unavailable(err)
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
	if r.Response, err = p.open(r.ID, resp); err != nil {
		return nil, err
	}
	return &r, nil
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
UPDATE money_requests SET state = 'unknown', ending = $3, upstream_status = $4, finished_at = now()
WHERE id = $1 AND owner = $2 AND state = 'in_flight'`, c.ID, c.Owner, o.Ending, nullInt(o.UpstreamStatus))
}

// Abandon turns an in-flight record past its deadline into unknown: its
// owner died or hung and can no longer reach the upstream. It reports
// whether it changed the record.
func (p *Postgres) Abandon(ctx context.Context, id int64) (bool, error) {
	return p.exec(ctx, `
UPDATE money_requests SET state = 'unknown', ending = 'owner_lost', finished_at = now()
WHERE id = $1 AND state = 'in_flight' AND now() > deadline`, id)
}

// Settle stores an outcome learned from the upstream for an unknown record.
func (p *Postgres) Settle(ctx context.Context, id int64, o Outcome) (bool, error) {
	sealed, err := p.seal(id, o.Response)
	if err != nil {
		return false, err
	}
	return p.exec(ctx, `
UPDATE money_requests SET state = 'done', ending = 'settled', upstream_status = $2, payment_id = $3, response = $4, finished_at = now()
WHERE id = $1 AND state = 'unknown'`, id, nullInt(o.UpstreamStatus), nullString(o.PaymentID), sealed)
}

// Neighbours lists what the user's other records on route since since
// claim, for settling.
func (p *Postgres) Neighbours(ctx context.Context, req Request, except int64, since time.Time) (Neighbours, error) {
	n := Neighbours{Taken: map[string]bool{}}
	rows, err := p.pool.Query(ctx, `
SELECT state, payment_id, (match_key IS NULL OR $5::bytea IS NULL OR match_key = $5) FROM money_requests
WHERE user_id = $1 AND route = $2 AND id <> $3 AND created_at >= $4`, req.UserID, req.Route, except, since, req.Match)
	if err != nil {
		return n, unavailable(err)
	}
	defer rows.Close()
	for rows.Next() {
		var state string
		var pid *string
		var same bool
		if err := rows.Scan(&state, &pid, &same); err != nil {
			return n, unavailable(err)
		}
		if pid != nil {
			n.Taken[*pid] = true
		}
		if s := State(state); same && (s == StateInFlight || s == StateUnknown) {
			n.Open = true
		}
	}
	return n, unavailable(rows.Err())
}

// Event appends one entry to a record's audit trail.
func (p *Postgres) Event(ctx context.Context, id int64, req Request, what string) error {
	_, err := p.pool.Exec(ctx, `
INSERT INTO money_request_events (money_request, what, session_ref, client_ip, request_id) VALUES ($1, $2, $3, $4, $5)`,
		id, what, req.SessionRef, req.ClientIP, req.RequestID)
	return unavailable(err)
}

// AbandonStale turns every in-flight record past its deadline into unknown
// (owner_lost) and reports how many it changed: the sweeper's job, so the
// ledger tells the truth about requests no client came back for.
func (p *Postgres) AbandonStale(ctx context.Context) (int64, error) {
	tag, err := p.pool.Exec(ctx, `
UPDATE money_requests SET state = 'unknown', ending = 'owner_lost', finished_at = now()
WHERE state = 'in_flight' AND deadline < now()`)
	if err != nil {
		return 0, unavailable(err)
	}
	return tag.RowsAffected(), nil
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

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
