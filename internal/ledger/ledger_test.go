//go:build integration

package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/testing/pgtest"
)

// With the integration tag, every test of the protocol (protocol*_test.go)
// runs against PostgreSQL too, after Memory: each subtest on a database
// of its own.
func init() {
	backends = append(backends, backend{"postgres", func(t *testing.T) (store, func(time.Duration)) {
		// PostgreSQL's clock (now()) is the real one: wait lets real time pass.
		return openPostgres(t, pgtest.Database(t), key32()), time.Sleep
	}})
}

func openPostgres(t *testing.T, url string, key []byte, older ...[]byte) *ledger.Postgres {
	t.Helper()
	p, err := ledger.Open(context.Background(), ledger.Options{URL: url, EncryptionKey: key, DecryptionKeys: older})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestPostgresDurability(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	key, next := key32(), key32()

	t.Run("instances starting together migrate once", func(t *testing.T) {
		var wg sync.WaitGroup
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p, err := ledger.Open(ctx, ledger.Options{URL: url, EncryptionKey: key})
				if err != nil {
					t.Error(err)
					return
				}
				p.Close()
			}()
		}
		wg.Wait()
	})

	first := openPostgres(t, url, key)
	req := request("durable")
	c, _, err := first.Claim(ctx, req, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Finish(ctx, c, ledger.Outcome{Ending: ledger.EndAnswered, UpstreamStatus: 201, PaymentID: "01JPAYMENT", Response: created}); err != nil {
		t.Fatal(err)
	}
	if err := first.Event(ctx, c.ID, req, ledger.EventReplayed); err != nil {
		t.Fatal(err)
	}

	t.Run("the answer is sealed at rest", func(t *testing.T) {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var resp []byte
		var pid string
		if err := conn.QueryRow(ctx, "SELECT response, payment_id FROM money_requests WHERE id = $1", c.ID).Scan(&resp, &pid); err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(resp, []byte("secret-consent")) || bytes.Contains(resp, []byte("payUrl")) {
			t.Fatal("the stored answer is readable in the database")
		}
		if pid != "01JPAYMENT" {
			t.Fatalf("got payment_id %q, want it in plain for the audit", pid)
		}
		var events int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM money_request_events WHERE money_request = $1", c.ID).Scan(&events); err != nil {
			t.Fatal(err)
		}
		if events != 2 {
			t.Fatalf("got %d audit events, want 2 (claimed, replayed)", events)
		}
	})

	t.Run("a new process with a rotated key still replays", func(t *testing.T) {
		rotated := openPostgres(t, url, next, key)
		_, rec, err := rotated.Claim(ctx, req, time.Hour)
		if err != nil || rec.Response == nil || !bytes.Equal(rec.Response.Body, created.Body) {
			t.Fatalf("got %+v, %v; want the stored answer", rec, err)
		}
	})

	t.Run("without the old key the answer is unreadable, never rerun", func(t *testing.T) {
		forgot := openPostgres(t, url, next)
		c, _, err := forgot.Claim(ctx, req, time.Hour)
		if c != nil || !errors.Is(err, ledger.ErrUnreadable) {
			t.Fatalf("got claim %v, error %v; want ErrUnreadable", c, err)
		}
	})

	t.Run("a database that does not answer is ErrUnavailable", func(t *testing.T) {
		first.Close()
		_, _, err := first.Claim(ctx, request("down"), time.Hour)
		if !errors.Is(err, ledger.ErrUnavailable) {
			t.Fatalf("got %v, want ErrUnavailable", err)
		}
	})
}

func TestOpenNeverPrintsThePassword(t *testing.T) {
	_, err := ledger.Open(context.Background(), ledger.Options{URL: "postgres://u:hunter2-secret@127.0.0.1:1/x?connect_timeout=1", EncryptionKey: key32()})
	if err == nil {
		t.Fatal("got no error for a closed port")
	}
	if bytes.Contains([]byte(err.Error()), []byte("hunter2")) {
		t.Fatalf("the error shows the password: %v", err)
	}
	_, err = ledger.Open(context.Background(), ledger.Options{URL: "postgres://u:hunter2-secret@[::1/x", EncryptionKey: key32()})
	if err == nil || bytes.Contains([]byte(err.Error()), []byte("hunter2")) {
		t.Fatalf("got %v, want an error without the password", err)
	}
}

// During a rolling upgrade, instances of the version before the send mark
// still claim keys: such a claim never writes the mark, so past its
// deadline it is unknown (it may have been sent), never given back.
func TestClaimOfAnEarlierVersionIsNeverGivenBack(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	p := openPostgres(t, url, key32())
	req := request("old-version")
	c, _, err := p.Claim(ctx, req, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// The earlier version's owner fence: random, without the prefix.
	if _, err := conn.Exec(ctx, "UPDATE money_requests SET owner = 'b2xkLXZlcnNpb24tb3du' WHERE id = $1", c.ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(60 * time.Millisecond) // deliberate: the claim's deadline passes on PostgreSQL's clock (now(), the real one)
	if st, err := p.Abandon(ctx, c.ID); st != ledger.StateUnknown || err != nil {
		t.Fatalf("got %q, %v; want unknown", st, err)
	}
}

// An earlier version's re-claim (a rolling upgrade) resets none of the
// settling columns: the evidence they still hold is an earlier attempt's,
// and is never handed to the settler as this one's.
func TestEarlierVersionsReclaimCarriesNoEvidence(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	p := openPostgres(t, url, key32())
	req := request("stale-evidence")
	req.Content = []byte(`{"paymentInformation":{"amount":1}}`)
	c, _, _ := p.Claim(ctx, req, time.Hour)
	old := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	if ok, err := p.Sending(ctx, c, ledger.SendEvidence{Snapshot: true, SeenFrom: old, WindowEnd: old.Add(time.Minute)}); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, err := p.Release(ctx, c, ledger.Outcome{Ending: ledger.EndRefused, UpstreamStatus: 423}); !ok || err != nil {
		t.Fatal(ok, err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var id int64
	// The earlier version's Claim and Unknown, as it wrote them.
	if err := conn.QueryRow(ctx, `INSERT INTO money_requests AS m (user_id, route, idem_key, fingerprint, session_ref, client_ip, request_id, state, owner, deadline, match_key)
VALUES ($1, $2, $3, $4, 's', 'ip', 'r-old', 'in_flight', 'b2xkLXZlcnNpb24tb3du', now() + interval '1 hour', NULL)
ON CONFLICT ON CONSTRAINT money_requests_key DO UPDATE
  SET state = 'in_flight', owner = excluded.owner, attempts = m.attempts + 1, claimed_at = now(), match_key = excluded.match_key,
      deadline = excluded.deadline, finished_at = NULL, ending = NULL, upstream_status = NULL,
      session_ref = excluded.session_ref, client_ip = excluded.client_ip, request_id = excluded.request_id
  WHERE m.state = 'released' AND m.fingerprint = excluded.fingerprint RETURNING id`, req.UserID, req.Route, req.Key, req.Fingerprint).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `UPDATE money_requests SET state = 'unknown', ending = 'ambiguous', finished_at = now() WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	var sealed []byte
	if err := conn.QueryRow(ctx, "SELECT content FROM money_requests WHERE id = $1", id).Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	if len(sealed) == 0 || bytes.Contains(sealed, []byte("paymentInformation")) || bytes.Contains(sealed, []byte("amount")) {
		t.Fatalf("the request's content is stored readable (or not at all): %q", sealed)
	}
	due, err := p.Due(ctx, 10, time.Hour, time.Hour, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range due {
		if r.ID == id {
			t.Fatalf("the earlier version's attempt was handed to the settler with evidence %+v", r.Send)
		}
	}
	_, rec, err := p.Claim(ctx, req, time.Hour)
	if err != nil || rec == nil || rec.Send.Snapshot || rec.Sent {
		t.Fatalf("got %+v, %v; want the record without the earlier attempt's evidence", rec, err)
	}
}

// The listing reads the user index, not the table.
func TestListingUsesTheUserIndex(t *testing.T) {
	url := pgtest.Database(t)
	openPostgres(t, url, key32())
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SET enable_seqscan = off"); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`EXPLAIN SELECT id FROM money_requests WHERE user_id = 'u' AND state <> 'released' AND (created_at, id) < (now(), 5) ORDER BY created_at DESC, id DESC LIMIT 3`,
		`EXPLAIN SELECT id FROM money_requests WHERE user_id = 'u' AND idem_key = 'k' AND state <> 'released' ORDER BY created_at DESC, id DESC LIMIT 1`,
	} {
		var plan []string
		rows, err := conn.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var line string
			_ = rows.Scan(&line)
			plan = append(plan, line)
		}
		rows.Close()
		text := fmt.Sprint(plan)
		if !bytes.Contains([]byte(text), []byte("money_requests_user_list")) && !bytes.Contains([]byte(text), []byte("money_requests_user_key")) {
			t.Errorf("plan of %s:\n%s\nwant a user index", q, text)
		}
	}
}
