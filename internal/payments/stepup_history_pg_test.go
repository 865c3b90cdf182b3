//go:build integration

package payments_test

import (
	"context"
	"testing"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/testing/pgtest"
)

// TestHoldHistoriesOnPostgres runs the hold checker on the ledger's
// PostgreSQL with two instances sharing it, each operation on either: one
// approval wins across instances, and every invariant holds. The
// database's clock cannot be moved, so no hold expires here (TestHolds in
// internal/ledger expires them on PostgreSQL).
func TestHoldHistoriesOnPostgres(t *testing.T) {
	seed := holdSeed(t)
	for round := range 2 {
		led, err := ledger.Open(context.Background(), ledger.Options{URL: pgtest.Database(t), EncryptionKey: make([]byte, 32)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(led.Close)
		reportHold(t, runHoldHistory(t, seed+uint64(round), 300, holdRun{ledger: led, instances: 2}))
	}
}
