//go:build integration

package ledger_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/testing/pgtest"
)

// The listener's connection killed at the database: Listen connects again,
// calls resync (announcements meanwhile are lost, so streams must read
// again), and hears the changes after.
func TestListenSurvivesItsConnectionKilled(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	p := openPostgres(t, url, key32())
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	user := fmt.Sprintf("listener-%d", seq.Add(1))
	heard := make(chan string, 10)
	resyncs := make(chan struct{}, 10)
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		_ = p.Listen(lctx, func(u string) { heard <- u }, func() { resyncs <- struct{}{} }, slog.New(slog.DiscardHandler))
	}()
	<-resyncs
	var killed int
	if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE datname = current_database() AND query = 'LISTEN `+ledger.NotifyChannel+`'`).Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("terminated %d listeners (%v), want 1", killed, err)
	}
	select {
	case <-resyncs:
	case <-time.After(10 * time.Second):
		t.Fatal("no resync after the listener's connection was killed")
	}
	req := request("after the kill")
	req.UserID = user
	c, _, err := p.Claim(ctx, req, time.Hour)
	if err != nil || c == nil {
		t.Fatalf("claim: %v", err)
	}
	if ok, err := p.Finish(ctx, c, ledger.Outcome{Ending: ledger.EndAnswered, UpstreamStatus: 201, PaymentID: "01JAFTERKILL", Response: created}); !ok || err != nil {
		t.Fatalf("finish: %v %v", ok, err)
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case u := <-heard:
			if u == user {
				return
			}
		case <-deadline:
			t.Fatal("the change after the reconnect was not heard")
		}
	}
}

// A user's positions commit in their order: a change that takes a later
// position waits for the transaction holding an earlier one, so a stream
// that has read position n never misses a lower one committed later
// (found in review: with one sequence for all, it could).
func TestPositionsCommitInOrder(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	s := openPostgres(t, url, key32())
	user := fmt.Sprintf("order-%d", seq.Add(1))
	var pids []string
	for range 2 {
		req := request("order")
		req.UserID = user
		c, _, err := s.Claim(ctx, req, time.Hour)
		if err != nil || c == nil {
			t.Fatal(err)
		}
		pid := fmt.Sprintf("01JORDER%d", seq.Add(1))
		if ok, err := s.Finish(ctx, c, ledger.Outcome{Ending: ledger.EndAnswered, UpstreamStatus: 201, PaymentID: pid, Response: created}); !ok || err != nil {
			t.Fatal(ok, err)
		}
		pids = append(pids, pid)
	}
	pos, _ := s.Position(ctx, user)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Payment A changes in a transaction not yet committed.
	if _, err := tx.Exec(ctx, `UPDATE money_requests SET payment_status = 'ACTC', status_at = now() WHERE payment_id = $1`, pids[0]); err != nil {
		t.Fatal(err)
	}
	// Payment B's change waits for it.
	done := make(chan error, 1)
	go func() {
		_, _, err := s.Webhook(ctx, "order-"+pids[1], ledger.StatusUpdate{PaymentID: pids[1], Status: "ACSP", At: time.Now()}, time.Minute)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("B's change committed while A's earlier position was open (%v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	if got, _ := s.Changes(ctx, user, pos, 10); len(got) != 0 {
		t.Fatalf("a reader sees %+v before A commits", got)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got, _ := s.Changes(ctx, user, pos, 10)
	if len(got) != 2 || got[0].PaymentID != pids[0] || got[1].PaymentID != pids[1] || got[0].Seq != pos+1 || got[1].Seq != pos+2 {
		t.Fatalf("after both: got %+v, want A at %d then B at %d", got, pos+1, pos+2)
	}
}
