package ledger_test

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
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
			if ok, err := s.Sending(ctx, c, ledger.SendEvidence{}); ok || err != nil {
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
					a, err := s.Approve(ctx, c.ID, time.Minute, ledger.Approval{})
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
			if ok, err := s.Sending(ctx, claim, ledger.SendEvidence{}); !ok || err != nil {
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
			if a, err := s.Approve(ctx, c.ID, time.Minute, ledger.Approval{}); a != nil || err != nil {
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
			if a, err := s.Approve(ctx, c.ID, time.Minute, ledger.Approval{}); a != nil || err != nil {
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

		t.Run("the hold's own claim never sends: once approved, only the approval's claim may", func(t *testing.T) {
			_, c := hold("h6", time.Hour)
			a, err := s.Approve(ctx, c.ID, time.Minute, ledger.Approval{})
			if err != nil || a == nil || a.ID != c.ID || a.Owner == c.Owner {
				t.Fatalf("approve: got %+v, %v; want a claim of the record with an owner of its own", a, err)
			}
			if ok, _ := s.Sending(ctx, c, ledger.SendEvidence{}); ok {
				t.Fatal("the hold's claim marked a send after the approval")
			}
			if ok, _ := s.Finish(ctx, c, ledger.Outcome{Ending: ledger.EndAnswered, PaymentID: "01JHOLDER"}); ok {
				t.Fatal("the hold's claim finished the approved payment")
			}
			if again, err := s.Approve(ctx, c.ID, time.Minute, ledger.Approval{}); again != nil || err != nil {
				t.Fatalf("a second approval after the first: got %v, %v; want nothing", again, err)
			}
			rec, _ := s.Record(ctx, c.ID)
			if rec.State != ledger.StateInFlight || rec.Sent || rec.PaymentID != "" {
				t.Fatalf("got %+v; want the approved record in flight, untouched", rec)
			}
		})

		t.Run("a hold is declined once: the first reason stands", func(t *testing.T) {
			_, c := hold("h7", time.Hour)
			if ok, err := s.Decline(ctx, c.ID, ledger.EndDenied); !ok || err != nil {
				t.Fatalf("decline: got %v, %v", ok, err)
			}
			if ok, err := s.Decline(ctx, c.ID, ledger.EndMismatch); ok || err != nil {
				t.Fatalf("a second decline: got %v, %v; want refused", ok, err)
			}
			if rec, _ := s.Record(ctx, c.ID); rec.State != ledger.StateDeclined || rec.Ending != ledger.EndDenied {
				t.Fatalf("got %s/%s, want declined/denied", rec.State, rec.Ending)
			}
		})

		t.Run("expiring holds leaves the live ones, and declines each expired one once", func(t *testing.T) {
			_, live := hold("h8", time.Hour)
			_, old := hold("h9", 50*time.Millisecond)
			wait(100 * time.Millisecond)
			if n, err := s.ExpireHolds(ctx); n < 1 || err != nil {
				t.Fatalf("ExpireHolds: got %d, %v; want at least the old hold", n, err)
			}
			if n, err := s.ExpireHolds(ctx); n != 0 || err != nil {
				t.Fatalf("ExpireHolds again: got %d, %v; want none left", n, err)
			}
			if rec, _ := s.Record(ctx, old.ID); rec.State != ledger.StateDeclined || rec.Ending != ledger.EndExpired {
				t.Fatalf("the old hold: got %s/%s, want declined/expired", rec.State, rec.Ending)
			}
			if rec, _ := s.Record(ctx, live.ID); rec.State != ledger.StateAwaiting || rec.Ending != "" {
				t.Fatalf("the live hold: got %s/%s, want still awaiting approval", rec.State, rec.Ending)
			}
			if a, err := s.Approve(ctx, live.ID, time.Minute, ledger.Approval{}); a == nil || err != nil {
				t.Fatalf("approving the live hold: got %v, %v", a, err)
			}
		})
	})
}

// TestReceiptFacts: what a receipt states is what the ledger holds: the
// content sent (opened), when it was answered, and for a released hold
// the approval's proof, written with the release itself; a request
// never held has no approval.
func TestReceiptFacts(t *testing.T) {
	ctx := context.Background()
	stores(t, func(t *testing.T, s store, wait func(time.Duration)) {
		req := request("receipt")
		req.Content = []byte(`{"paymentInformation":{"amount":"10.00"}}`)
		req.Held = []byte(`{"p":"/v2/payments"}`)
		c, _, err := s.Claim(ctx, req, time.Hour)
		if err != nil || c == nil {
			t.Fatalf("hold: %v %v", c, err)
		}
		if f, ok, err := s.Facts(ctx, req.UserID, req.Key); err != nil || !ok || f.State != ledger.StateAwaiting || f.Approval != nil {
			t.Fatalf("held: %+v %v %v", f, ok, err)
		}
		proof := ledger.Approval{ACR: "urn:bff:acr:mfa", AuthTime: time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC), DetailsSHA256: "abc"}
		a, err := s.Approve(ctx, c.ID, time.Minute, proof)
		if err != nil || a == nil {
			t.Fatalf("approve: %v %v", a, err)
		}
		if ok, err := s.Finish(ctx, a, ledger.Outcome{Ending: ledger.EndAnswered, UpstreamStatus: 201, PaymentID: "01JPAYMENT", Response: created}); !ok || err != nil {
			t.Fatalf("finish: %v %v", ok, err)
		}
		f, ok, err := s.Facts(ctx, req.UserID, req.Key)
		if err != nil || !ok {
			t.Fatalf("facts: %v %v", ok, err)
		}
		if f.State != ledger.StateDone || f.Answered != 201 || f.PaymentID != "01JPAYMENT" || !bytes.Equal(f.Content, req.Content) ||
			f.FinishedAt.IsZero() || f.Approval == nil || f.Approval.ACR != proof.ACR || !f.Approval.AuthTime.Equal(proof.AuthTime) || f.Approval.DetailsSHA256 != "abc" {
			t.Fatalf("facts after the release: %+v (approval %+v)", f, f.Approval)
		}
		plain := request("never held")
		pc, _, _ := s.Claim(ctx, plain, time.Hour)
		_, _ = s.Finish(ctx, pc, ledger.Outcome{Ending: ledger.EndAnswered, UpstreamStatus: 201, Response: created})
		if f, ok, err := s.Facts(ctx, plain.UserID, plain.Key); err != nil || !ok || f.Approval != nil || f.Content != nil {
			t.Fatalf("a request never held: %+v %v %v", f, ok, err)
		}
		if _, ok, err := s.Facts(ctx, "bob", req.Key); ok || err != nil {
			t.Fatalf("another user's key: %v %v", ok, err)
		}
	})
}
