// Package pgtest gives tests a fresh PostgreSQL database of their own on the
// machine's server (BFF_TEST_POSTGRES_URL, default the local server's
// postgres user). A test that needs PostgreSQL fails, never skips, when the
// server does not answer: CI must provide it.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultURL is the server the tests use when BFF_TEST_POSTGRES_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// ServerURL is the maintenance database's URL.
func ServerURL() string {
	if u := os.Getenv("BFF_TEST_POSTGRES_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Database creates an empty database for t, drops it when t ends, and
// returns its URL.
func Database(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, ServerURL())
	if err != nil {
		t.Fatalf("PostgreSQL is needed for this test and does not answer at %s (%v): start it, e.g. pg_ctlcluster --skip-systemctl-redirect 15 main start", redact(ServerURL()), err)
	}
	defer admin.Close(context.Background())
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "bff_test_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("creating a test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, ServerURL())
		if err != nil {
			t.Logf("dropping %s: %v", name, err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("dropping %s: %v", name, err)
		}
	})
	u, _ := url.Parse(ServerURL())
	u.Path = "/" + name
	return u.String()
}

func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
