//go:build integration

package deploy

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/testing/pgtest"
	"github.com/fintech-bff/bff/internal/testing/redistest"
)

// redisVersion is INFO server's redis_version.
func redisVersion(t *testing.T, c *redis.Client) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^redis_version:(\S+)`).FindStringSubmatch(info)
	if m == nil {
		t.Fatalf("INFO server has no redis_version:\n%s", info)
	}
	return m[1]
}

// postgresVersion is the server's server_version.
func postgresVersion(t *testing.T, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("PostgreSQL is needed for this test and does not answer: %v", err)
	}
	defer c.Close(context.Background())
	var v string
	if err := c.QueryRow(ctx, "SHOW server_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestServerVersions: every Redis and PostgreSQL the suite runs against is
// at least the minimum docs/deployment.md states: the servers the tests
// share (BFF_TEST_REDIS_ADDR, BFF_TEST_POSTGRES_URL) and those the tests
// start of their own (redis-server for Cluster and Sentinel, PostgreSQL's
// programs for the ledger's fault tests). It logs what it found, so that a
// CI log shows which versions "tested" means.
func TestServerVersions(t *testing.T) {
	min := statedMinimums(t)
	shared, _ := redistest.Client(t)
	own := redistest.StartServer(t)
	ownClient := redis.NewClient(&redis.Options{Addr: own.Addr, DialTimeout: 2 * time.Second})
	defer ownClient.Close()
	pgOwn := pgtest.StartServer(t, pgtest.ServerOptions{})

	found := []struct{ server, what, version string }{
		{"Redis", "the shared server (" + redistest.Addr() + ")", redisVersion(t, shared)},
		{"Redis", "redis-server, started by the tests", redisVersion(t, ownClient)},
		{"PostgreSQL", "the shared server", postgresVersion(t, pgtest.ServerURL())},
		{"PostgreSQL", "the programs of the fault tests' servers", postgresVersion(t, pgOwn.URL())},
	}
	var log []string
	for _, f := range found {
		v, err := parseVersion(f.version)
		if err != nil {
			t.Fatalf("%s, %s: %v", f.server, f.what, err)
		}
		if v.less(min[f.server]) {
			t.Errorf("%s, %s: %s is below the minimum %v that %s states", f.server, f.what, f.version, min[f.server], deploymentDoc)
		}
		log = append(log, fmt.Sprintf("%s %s (%s)", f.server, f.version, f.what))
	}
	t.Logf("the suite runs on: %s; the stated minimums: Redis %v, PostgreSQL %v", strings.Join(log, "; "), min["Redis"], min["PostgreSQL"])
}

// roleStatements are the SQL statements of docs/ledger-database.md's role
// setup, as written there.
func roleStatements(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, s := range strings.Split(fileBlock(t, "../docs/ledger-database.md", "## The database and its role", "sql"), ";") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		t.Fatal("docs/ledger-database.md: no SQL statement in the role setup")
	}
	return out
}

// TestDocumentedLedgerRole: the role set up as docs/ledger-database.md says
// runs the ledger on a primary with a synchronous standby: its migrations
// apply, and the production start's check, under
// ledger.require_synchronous_replication, sees the standby as synchronous
// and passes. The same statements without the GRANT leave the standby's
// state hidden from the role, and the check refuses.
func TestDocumentedLedgerRole(t *testing.T) {
	stmts := roleStatements(t)
	grant := regexp.MustCompile(`(?i)^GRANT\s`)
	granted := false
	for _, s := range stmts {
		granted = granted || grant.MatchString(s)
	}
	if !granted {
		t.Fatal("docs/ledger-database.md's role setup grants nothing: the start-up check needs pg_monitor (pg_read_all_stats)")
	}
	pair := pgtest.StartPair(t, pgtest.Synchronous, pgtest.ServerOptions{Fsync: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, pair.Primary.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())

	// run sets the role up under name (the docs' role and database are
	// "bff"), without the GRANT when withGrant is false, and runs the
	// start-up check as it.
	run := func(name string, withGrant bool) (ledger.Durability, error) {
		word := regexp.MustCompile(`\bbff\b`)
		for _, s := range stmts {
			if grant.MatchString(s) && !withGrant {
				continue
			}
			if _, err := admin.Exec(ctx, word.ReplaceAllString(s, name)); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
		l, err := ledger.Open(ctx, ledger.Options{
			URL:           fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", name, pair.Primary.Port(), name),
			EncryptionKey: bytes.Repeat([]byte{7}, 32),
		})
		if err != nil {
			t.Fatalf("the ledger as role %s (its migrations): %v", name, err)
		}
		defer l.Close()
		d, err := l.Durability(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		err = l.CheckDurability(ctx, true, slog.New(slog.NewTextHandler(&logs, nil)))
		t.Logf("role %s (GRANT: %v): standbys %+v; the check: %v; %s", name, withGrant, d.Standbys, err, strings.TrimSpace(logs.String()))
		return d, err
	}

	d, err := run("bff", true)
	if err != nil {
		t.Errorf("as documented: the check refuses: %v", err)
	}
	if len(d.Standbys) != 1 || d.Standbys[0].SyncState != "sync" {
		t.Errorf("as documented: the role sees the standbys %+v, want one whose sync_state is sync", d.Standbys)
	}

	d, err = run("bff_without_grant", false)
	if err == nil || !strings.Contains(err.Error(), "replication") {
		t.Errorf("without the GRANT: the check says %v, want a refusal about replication (the standby's state hidden)", err)
	}
	if len(d.Standbys) != 1 || d.Standbys[0].SyncState != "" {
		t.Errorf("without the GRANT: the role sees the standbys %+v, want one with its state hidden", d.Standbys)
	}
}
