package payments

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/webhooks"
)

// A webhook id is known for as long as an instance would still take its
// message (docs/payments.md, "Webhooks"). Ids are kept, and pruned, on the ledger's clock;
// timestamps are checked on each instance's, and each may be clockSkew
// off the ledger's. For every pair of offsets, the message is first taken
// by instance A with a timestamp a whole tolerance ahead of A's clock (the
// latest A takes), and comes again to instance B at the last second B
// still takes it: the id is still known then, after a prune, and the
// replay changes nothing. In the worst pair (A ahead, B behind) that
// second is deliveriesKept after the first delivery on the ledger's clock:
// a retention a microsecond shorter forgets the id (the rule shown to
// fail when broken).
func TestDeliveryIDsOutliveTheirTimestamps(t *testing.T) {
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("a-webhook-signing-key-of-32-bytes"))
	v, err := webhooks.NewVerifier([]string{secret}, webhooks.DefaultTolerance)
	if err != nil {
		t.Fatal(err)
	}
	const tol = webhooks.DefaultTolerance
	offsets := []time.Duration{-clockSkew, 0, clockSkew} // an instance's clock minus the ledger's
	for _, a := range offsets {
		for _, b := range offsets {
			t.Run(fmt.Sprintf("A %+v, B %+v", a, b), func(t *testing.T) {
				ctx := context.Background()
				t0 := time.Unix(1_800_000_000, 0) // the ledger's clock at the first delivery
				dbNow := t0
				led, err := ledger.NewMemory(func() time.Time { return dbNow }, make([]byte, 32), nil)
				if err != nil {
					t.Fatal(err)
				}
				s := New(Options{Ledger: led})
				ts := t0.Add(a + tol) // a tolerance ahead of A's clock
				body := []byte(`{"type":"payment.status_changed","timestamp":"2027-01-15T08:00:00Z","data":{"id":"01JNOPAYMENT","status":"ACSC","updatedAt":"2027-01-15T08:00:00Z"}}`)
				sig, err := webhooks.Sign(secret, "msg_skewed", ts, body)
				if err != nil {
					t.Fatal(err)
				}
				h := http.Header{}
				h.Set(webhooks.HeaderID, "msg_skewed")
				h.Set(webhooks.HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
				h.Set(webhooks.HeaderSignature, sig)
				u := ledger.StatusUpdate{PaymentID: "01JNOPAYMENT", Status: "ACSC", At: ts}
				if _, err := v.Verify(h, body, t0.Add(a)); err != nil {
					t.Fatalf("A does not take the message: %v", err)
				}
				if d, err := s.StatusPushed(ctx, "msg_skewed", u); err != nil || d == ledger.DeliveryReplayed {
					t.Fatalf("the first delivery: got %v, %v", d, err)
				}
				// B's clock reads ts + tolerance: the last second B takes it.
				last := ts.Add(tol - b)
				if _, err := v.Verify(h, body, last.Add(b)); err != nil {
					t.Fatalf("B does not take the message at its last second: %v", err)
				}
				if _, err := v.Verify(h, body, last.Add(b+time.Second)); !errors.Is(err, webhooks.ErrStale) {
					t.Fatalf("B takes the message a second after its last: %v", err)
				}
				dbNow = last
				s.follower.pruneDeliveries(ctx)
				if d, err := s.StatusPushed(ctx, "msg_skewed", u); err != nil || d != ledger.DeliveryReplayed {
					t.Fatalf("the replay at B's last second (%s after the first delivery, ids kept %s): got %v, %v; want Replayed",
						last.Sub(t0), deliveriesKept, d, err)
				}
				if a != clockSkew || b != -clockSkew {
					return
				}
				if last.Sub(t0) != deliveriesKept {
					t.Fatalf("the worst case's last second is %s after the first delivery, want deliveriesKept (%s)", last.Sub(t0), deliveriesKept)
				}
				if err := led.PruneDeliveries(ctx, deliveriesKept-time.Microsecond); err != nil {
					t.Fatal(err)
				}
				if d, _ := s.StatusPushed(ctx, "msg_skewed", u); d == ledger.DeliveryReplayed {
					t.Fatal("a retention a microsecond shorter still knows the id: the test checks nothing")
				}
			})
		}
	}
}
