//go:build integration

package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/testing/pgtest"
)

// TestHeldRequestIsSealedAtRest: a held payment's request (payee, IBAN,
// amount) is in the database only sealed, and opens for its own row only.
func TestHeldRequestIsSealedAtRest(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	p := openPostgres(t, url, key32())
	req := request("sealed")
	req.Held = []byte(`{"p":"/v2/payments","b":"IBAN FR7630006000011234567890189 Jane Doe"}`)
	c, _, err := p.Claim(ctx, req, time.Hour)
	if err != nil || c == nil {
		t.Fatalf("hold: %v, %v", c, err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var stored []byte
	if err := conn.QueryRow(ctx, "SELECT held FROM money_requests WHERE id = $1", c.ID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if len(stored) == 0 || bytes.Contains(stored, []byte("FR7630006000011234567890189")) || bytes.Contains(stored, []byte("Jane")) {
		t.Fatalf("the held request is stored in plain text: %q", stored)
	}
	// Moved to another row, it does not open.
	other := request("other")
	other.Held = []byte(`{}`)
	c2, _, _ := p.Claim(ctx, other, time.Hour)
	if _, err := conn.Exec(ctx, "UPDATE money_requests SET held = $1 WHERE id = $2", stored, c2.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Record(ctx, c2.ID); !errors.Is(err, ledger.ErrUnreadable) {
		t.Fatalf("a held request moved to another row: got %v, want ErrUnreadable", err)
	}
}
