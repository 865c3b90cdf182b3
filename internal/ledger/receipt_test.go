package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
)

// An approval belongs to the attempt it released: when that attempt is
// given back (the upstream surely did not act) and the same key runs
// again, the row is claimed anew, and its facts do not carry the earlier
// approval into a run that was never held, nor into a new hold that
// waits or was declined.
func TestReceiptFactsApprovalOfTheCurrentAttempt(t *testing.T) {
	ctx := context.Background()
	stores(t, func(t *testing.T, s store, wait func(time.Duration)) {
		approvedThenGivenBack := func(t *testing.T) ledger.Request {
			t.Helper()
			req := request("stale approval")
			req.Content = []byte(`{"paymentInformation":{"amount":"10.00"}}`)
			req.Held = []byte(`{"p":"/v2/payments"}`)
			c, _, err := s.Claim(ctx, req, time.Hour)
			if err != nil || c == nil {
				t.Fatalf("hold: %v %v", c, err)
			}
			proof := ledger.Approval{ACR: "urn:bff:acr:mfa", AuthTime: time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC), DetailsSHA256: "abc"}
			a, err := s.Approve(ctx, c.ID, time.Minute, proof)
			if err != nil || a == nil {
				t.Fatalf("approve: %v %v", a, err)
			}
			if ok, err := s.Release(ctx, a, ledger.Outcome{Ending: ledger.EndNotSent}); !ok || err != nil {
				t.Fatalf("give back: %v %v", ok, err)
			}
			return req
		}
		t.Run("run again, not held", func(t *testing.T) {
			req := approvedThenGivenBack(t)
			req.Held = nil
			c, _, err := s.Claim(ctx, req, time.Hour)
			if err != nil || c == nil {
				t.Fatalf("claim again: %v %v", c, err)
			}
			if ok, err := s.Finish(ctx, c, ledger.Outcome{Ending: ledger.EndAnswered, UpstreamStatus: 201, PaymentID: "01JPAYMENT", Response: created}); !ok || err != nil {
				t.Fatalf("finish: %v %v", ok, err)
			}
			f, ok, err := s.Facts(ctx, req.UserID, req.Key)
			if err != nil || !ok || f.State != ledger.StateDone {
				t.Fatalf("facts: %+v %v %v", f, ok, err)
			}
			if f.Approval != nil {
				t.Fatalf("a run never held states the approval of an earlier attempt: %+v", f.Approval)
			}
		})
		t.Run("held again and declined", func(t *testing.T) {
			req := approvedThenGivenBack(t)
			c, _, err := s.Claim(ctx, req, time.Hour)
			if err != nil || c == nil {
				t.Fatalf("hold again: %v %v", c, err)
			}
			if f, _, _ := s.Facts(ctx, req.UserID, req.Key); f.State != ledger.StateAwaiting || f.Approval != nil {
				t.Fatalf("a new hold that waits states the earlier approval: %s %+v", f.State, f.Approval)
			}
			if ok, err := s.Decline(ctx, c.ID, ledger.EndExpired); !ok || err != nil {
				t.Fatalf("decline: %v %v", ok, err)
			}
			f, ok, err := s.Facts(ctx, req.UserID, req.Key)
			if err != nil || !ok || f.State != ledger.StateDeclined {
				t.Fatalf("facts: %+v %v %v", f, ok, err)
			}
			if f.Approval != nil {
				t.Fatalf("a declined hold states the approval of an earlier attempt: %+v", f.Approval)
			}
		})
	})
}
