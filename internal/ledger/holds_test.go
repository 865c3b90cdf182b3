//go:build integration

package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/testing/pgtest"
)

// TestHolds: a payment held for the user's approval (docs/payments.md,
// "Payments the user approves") is claimed and waits; one approval takes it
// for its one send, whoever races; a declined or expired hold is never
// sent, and a repeat sees why; the held request is sealed at rest.
func TestHolds(t *testing.T) {
	ctx := context.Background()
	stores(t, func(t *testing.T, s store, wait func(time.Duration)) {
		held := []byte(`{"p":"/v2/payments","b":"eyJwYXltZW50SW5mb3JtYXRpb24iOnt9fQ=="}`)
		hold := func(body string, d time.Duration) (ledger.Request, *ledger.Claim) {
			t.Helper()
			req := request(body)
			req.Held = held
			c, rec, err := s.Claim(ctx, req, d)
			if err != nil || c == nil || rec != nil {
				t.Fatalf("hold: got %v, %v, %v; want a claim", c, rec, err)
			}
			return req, c
		}

		t.Run("a hold waits, and a repeat sees it with its request and session", func(t *testing.T) {
			req, c := hold("h1", time.Hour)
			_, rec, err := s.Claim(ctx, req, time.Hour)
			if err != nil || rec == nil || rec.State != ledger.StateAwaiting || rec.Expired {
				t.Fatalf("repeat: got %+v, %v; want awaiting_approval", rec, err)
			}
			if !bytes.Equal(rec.Held, held) || rec.SessionRef != req.SessionRef {
				t.Fatalf("got held %q session %q, want %q and %q", rec.Held, rec.SessionRef, held, req.SessionRef)
			}
			byID, err := s.Record(ctx, c.ID)
			if err != nil || byID.State != ledger.StateAwaiting || byID.Key != req.Key {
				t.Fatalf("Record: got %+v, %v", byID, err)
			}
			// A hold is not a send: the settler has nothing to end or settle.
			if ok, err := s.Sending(ctx, c, ledger.Send{}); ok || err != nil {
				t.Fatalf("a send mark on a hold: got %v, %v; want refused", ok, err)
			}
		})

		t.Run("one approval of many takes it, then it runs the money path", func(t *testing.T) {
			_, c := hold("h2", time.Hour)
			var won atomic.Int64
			var claim *ledger.Claim
			var mu sync.Mutex
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					a, err := s.Approve(ctx, c.ID, time.Minute)
					if err != nil {
						t.Error(err)
					}
					if a != nil {
						won.Add(1)
						mu.Lock()
						claim = a
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if won.Load() != 1 {
				t.Fatalf("%d approvals took the hold, want exactly 1", won.Load())
			}
			if ok, err := s.Sending(ctx, claim, ledger.Send{}); !ok || err != nil {
				t.Fatalf("the approved claim's send mark: got %v, %v", ok, err)
			}
			if ok, err := s.Finish(ctx, claim, ledger.Outcome{Ending: ledger.EndAnswered, UpstreamStatus: 201, Response: created}); !ok || err != nil {
				t.Fatalf("finish: got %v, %v", ok, err)
			}
			if ok, _ := s.Decline(ctx, c.ID, ledger.EndDenied); ok {
				t.Fatal("a finished payment was declined")
			}
		})

		t.Run("a declined hold is never approved, and says why", func(t *testing.T) {
			req, c := hold("h3", time.Hour)
			if ok, err := s.Decline(ctx, c.ID, ledger.EndMismatch); !ok || err != nil {
				t.Fatalf("decline: got %v, %v", ok, err)
			}
			if a, err := s.Approve(ctx, c.ID, time.Minute); a != nil || err != nil {
				t.Fatalf("approve after decline: got %v, %v; want nothing", a, err)
			}
			_, rec, _ := s.Claim(ctx, req, time.Hour)
			if rec == nil || rec.State != ledger.StateDeclined || rec.Ending != ledger.EndMismatch {
				t.Fatalf("repeat: got %+v; want declined (mismatch)", rec)
			}
		})

		t.Run("a hold past its time is never approved, and expires", func(t *testing.T) {
			_, c := hold("h4", 50*time.Millisecond)
			wait(100 * time.Millisecond) // the hold's time passes on the store's clock
			if a, err := s.Approve(ctx, c.ID, time.Minute); a != nil || err != nil {
				t.Fatalf("approve after expiry: got %v, %v; want nothing", a, err)
			}
			if n, err := s.ExpireHolds(ctx); n < 1 || err != nil {
				t.Fatalf("ExpireHolds: got %d, %v; want at least this one", n, err)
			}
			rec, _ := s.Record(ctx, c.ID)
			if rec.State != ledger.StateDeclined || rec.Ending != ledger.EndExpired {
				t.Fatalf("got %s/%s, want declined/expired", rec.State, rec.Ending)
			}
		})

		t.Run("holds are listed and streamed", func(t *testing.T) {
			req, c := hold("h5", time.Hour)
			e, ok, err := s.Get(ctx, req.UserID, req.Key)
			if err != nil || !ok || e.State != ledger.StateAwaiting || e.Seq == 0 || e.SessionRef != req.SessionRef {
				t.Fatalf("Get: got %+v, %v, %v; want awaiting_approval with a stream position", e, ok, err)
			}
			_, _ = s.Decline(ctx, c.ID, ledger.EndDenied)
			e2, _, _ := s.Get(ctx, req.UserID, req.Key)
			if e2.State != ledger.StateDeclined || e2.Ending != ledger.EndDenied || e2.Seq <= e.Seq {
				t.Fatalf("after decline: got %+v; want declined/denied at a later position", e2)
			}
		})
	})
}

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
