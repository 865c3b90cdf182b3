package main

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// benchDB is the payments section's ledger database: made fresh for the
// run (bffbench_<pid>) on the PostgreSQL server of -postgres, dropped at
// the end, and read for its counters through a connection to the server's
// maintenance database (so the reads count in another database's figures).
type benchDB struct {
	name      string
	url       string // the BFF's ledger.postgres_url
	serverURL string // the maintenance database's
	admin     *pgx.Conn
	// stmts reads pg_stat_statements, whose view is in the bench
	// database: each reading is one transaction there (two per window).
	stmts *pgx.Conn
	// statements is true when pg_stat_statements answers for the
	// database; else why, in statementsWhy.
	statements    bool
	statementsWhy string
	server        string // version, for the report
	settings      string // synchronous_commit, fsync, ...
}

// pgCounters are a database's cumulative counters at one moment.
type pgCounters struct {
	xacts      int64         // xact_commit + xact_rollback (pg_stat_database)
	statements float64       // calls of pg_stat_statements; NaN without it
	backends   map[int]int64 // clock ticks of each server process of the database
}

func defaultPostgresURL() string {
	if u := os.Getenv("BFF_TEST_POSTGRES_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// createBenchDB creates bffbench_<pid> on the server of serverURL.
func createBenchDB(serverURL string) (*benchDB, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL at %s (scripts/with-postgres.sh starts the local one): %w", redactURL(serverURL), err)
	}
	db := &benchDB{name: fmt.Sprintf("bffbench_%d", os.Getpid()), admin: admin, serverURL: serverURL}
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+db.name); err != nil {
		admin.Close(ctx)
		return nil, err
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+db.name); err != nil {
		admin.Close(ctx)
		return nil, fmt.Errorf("create database %s: %w", db.name, err)
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		return nil, err
	}
	u.Path = "/" + db.name
	db.url = u.String()
	_ = admin.QueryRow(ctx, "SELECT current_setting('server_version')").Scan(&db.server)
	var sync, fsync, preload, maxConns string
	_ = admin.QueryRow(ctx, `SELECT current_setting('synchronous_commit'), current_setting('fsync'),
  current_setting('shared_preload_libraries'), current_setting('max_connections')`).Scan(&sync, &fsync, &preload, &maxConns)
	db.settings = fmt.Sprintf("synchronous_commit=%s, fsync=%s, max_connections=%s, shared_preload_libraries=%q", sync, fsync, maxConns, preload)
	db.tryStatements(ctx)
	return db, nil
}

// tryStatements turns pg_stat_statements on for the counts of statements,
// when the server can: CREATE EXTENSION succeeds without the library, and
// the view then refuses to answer unless it is in shared_preload_libraries.
func (db *benchDB) tryStatements(ctx context.Context) {
	c, err := pgx.Connect(ctx, db.url)
	if err != nil {
		db.statementsWhy = "no connection to the bench database: " + err.Error()
		return
	}
	if _, err := c.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		db.statementsWhy = "CREATE EXTENSION pg_stat_statements failed: " + firstLine(err.Error())
		c.Close(ctx)
		return
	}
	db.stmts = c
	if _, err := db.statementCalls(ctx); err != nil {
		db.statementsWhy = "CREATE EXTENSION pg_stat_statements succeeded, but the view does not answer: " + firstLine(err.Error())
		db.stmts = nil
		c.Close(ctx)
		return
	}
	db.statements = true
}

func (db *benchDB) statementCalls(ctx context.Context) (float64, error) {
	var n float64
	err := db.stmts.QueryRow(ctx, `SELECT coalesce(sum(calls), 0)::float8 FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n)
	return n, err
}

// read takes the database's counters. pg_stat_database is what each
// server process has flushed: a busy one flushes at most once a second,
// an idle one up to 10 s after its last transaction (PostgreSQL 15), so
// exact counts need that wait after the load (settle).
func (db *benchDB) read() (pgCounters, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := pgCounters{statements: math.NaN(), backends: map[int]int64{}}
	if _, err := db.admin.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		return c, err
	}
	if err := db.admin.QueryRow(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = $1`,
		db.name).Scan(&c.xacts); err != nil {
		return c, err
	}
	if db.statements {
		if n, err := db.statementCalls(ctx); err == nil {
			c.statements = n
		}
	}
	rows, err := db.admin.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, db.name)
	if err != nil {
		return c, err
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return c, err
	}
	for _, pid := range pids {
		if t, err := cpuTicks(int(pid)); err == nil { // a server on this machine
			c.backends[int(pid)] = t
		}
	}
	return c, nil
}

// cpuSince is the CPU ticks the database's backends used since before: a
// backend that is new counts whole (it was started during the run).
func (c pgCounters) cpuSince(before pgCounters) int64 {
	var d int64
	for pid, t := range c.backends {
		d += t - before.backends[pid]
	}
	return d
}

// drop removes the database (its connections are ended first).
func (db *benchDB) drop() {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if db.stmts != nil {
		_ = db.stmts.Close(ctx)
	}
	if _, err := db.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+db.name+" WITH (FORCE)"); err != nil {
		fmt.Fprintf(os.Stderr, "bench: drop database %s: %v\n", db.name, err)
	}
	_ = db.admin.Close(ctx)
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// redactURL drops a password from a URL for messages.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "the configured URL"
	}
	return u.Redacted()
}

// waitSampler samples what the bench database's server processes are
// doing, every few milliseconds, from a connection of its own: running,
// or waiting, and on what (pg_stat_activity's wait_event_type and
// wait_event; idle is waiting for the BFF's next statement).
type waitSampler struct {
	stop    chan struct{}
	done    chan error
	counts  map[string]int
	samples int // backend samples (one per backend per look)
	looks   int
}

func (db *benchDB) sampleWaits(every time.Duration) (*waitSampler, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, db.serverURL)
	if err != nil {
		return nil, err
	}
	w := &waitSampler{stop: make(chan struct{}), done: make(chan error, 1), counts: map[string]int{}}
	go func() {
		defer c.Close(context.Background())
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				w.done <- nil
				return
			case <-t.C:
			}
			rows, err := c.Query(context.Background(), `SELECT CASE
  WHEN state = 'idle' THEN 'idle (waiting for the BFF)'
  WHEN state LIKE 'idle in transaction%' THEN 'idle in transaction'
  ELSE coalesce(wait_event_type || ':' || wait_event, 'running (CPU)') || ' in '
    || left(regexp_replace(regexp_replace(query, '\s+', ' ', 'g'), '^ ', ''), 48) END
FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'`, db.name)
			if err != nil {
				w.done <- err
				return
			}
			states, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				w.done <- err
				return
			}
			w.looks++
			for _, st := range states {
				w.counts[st]++
				w.samples++
			}
		}
	}()
	return w, nil
}

// finish stops the sampler and renders its shares, most first.
func (w *waitSampler) finish() (string, error) {
	close(w.stop)
	if err := <-w.done; err != nil {
		return "", err
	}
	type kv struct {
		k string
		n int
	}
	var all []kv
	for k, n := range w.counts {
		all = append(all, kv{k, n})
	}
	slices.SortFunc(all, func(a, b kv) int { return b.n - a.n })
	var b strings.Builder
	fmt.Fprintf(&b, "%d looks, %.1f server processes of the bench database on average (the BFF's background pool and its LISTEN connection idle throughout); the share of all their samples, by what each did and in which statement:\n",
		w.looks, float64(w.samples)/float64(max(w.looks, 1)))
	for i, e := range all {
		if i == 20 {
			fmt.Fprintf(&b, "  (%d more, each less)\n", len(all)-i)
			break
		}
		fmt.Fprintf(&b, "  %5.1f%%  %s\n", 100*float64(e.n)/float64(max(w.samples, 1)), e.k)
	}
	return b.String(), nil
}

// shares are the sampler's figures the report states: of the samples of
// the server processes in a statement (not idle), the share waiting on
// NOTIFY's commit lock (Lock:object), on a WAL flush (their own or the
// group's: IO:WALSync, IO:WALWrite, LWLock:WALWrite), and running; and
// how many of them were in a statement on average.
func (w *waitSampler) shares() (notify, wal, running, busy float64) {
	var active int
	for k, n := range w.counts {
		switch {
		case strings.HasPrefix(k, "idle"):
			continue
		case strings.HasPrefix(k, "Lock:object "):
			notify += float64(n)
		case strings.HasPrefix(k, "IO:WALSync "), strings.HasPrefix(k, "IO:WALWrite "), strings.HasPrefix(k, "LWLock:WALWrite "):
			wal += float64(n)
		case strings.HasPrefix(k, "running (CPU) "):
			running += float64(n)
		}
		active += n
	}
	if active == 0 {
		return 0, 0, 0, 0
	}
	a := float64(active)
	return notify / a, wal / a, running / a, a / float64(max(w.looks, 1))
}
