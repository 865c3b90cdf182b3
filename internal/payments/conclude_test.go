package payments_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/money"
	"github.com/fintech-bff/bff/internal/payments"
)

// One row per rule of Conclude (conclude.go), in the order
// docs/payments.md states them (concludeCases).
func TestConclude(t *testing.T) {
	for _, tc := range concludeCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			got := payments.Conclude(tc.e)
			if got.Conclusion != tc.want {
				t.Fatalf("got %v (%s), want %v", got.Conclusion, got.Reason, tc.want)
			}
			if got.Conclusion == payments.Made && got.Payment.ID != "P" {
				t.Fatalf("made: got payment %q, want P", got.Payment.ID)
			}
		})
	}
}

// concludeCase is evidence and the conclusion it must lead to.
type concludeCase struct {
	name string
	e    payments.Evidence
	want payments.Conclusion
}

// concludeCases are TestConclude's rows: a payment made ("P") is the
// one Made must name.
func concludeCases(t *testing.T) []concludeCase {
	t0 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	req := content(t, `{"paymentInformation":{"amount":"12.50","currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}}}`)
	listed := listedAs
	same := `{"amount":12.5,"currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}}`
	snap := ledger.SendEvidence{Snapshot: true, SeenBefore: []string{"OLD"}, SeenFrom: t0.Add(-2 * time.Second), WindowEnd: t0.Add(30 * time.Second)}
	old := listed("OLD", t0.Add(-time.Hour), same)
	mine := listed("P", t0.Add(time.Second), same)
	whole := func(ps ...payments.Listed) payments.Listing { return payments.Listing{Payments: ps, Whole: true} }
	otherContent := []byte(`{"paymentInformation":{"amount":"12.50","currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}}}`)

	return []concludeCase{
		// Made.
		{"one fresh equal payment inside the window is made", payments.Evidence{Request: req, Snapshot: snap, Listing: whole(mine, old)}, payments.Made},
		{"made needs no quiet: an answer lost in flight can be proved", payments.Evidence{Request: req, Snapshot: snap, Listing: whole(mine), Quiet: false}, payments.Made},
		{"a listing cut below the snapshot still proves made", payments.Evidence{Request: req, Snapshot: snap, Listing: payments.Listing{Payments: []payments.Listed{mine}}}, payments.Made},
		{"an init of the payment by id owns nothing", payments.Evidence{Request: req, Snapshot: snap, Listing: whole(mine),
			Others: []ledger.OtherRequest{{Route: "/v2/pay", State: ledger.StateDone, PaymentID: "P", Sent: true}}}, payments.Made},
		{"another request with other content does not matter", payments.Evidence{Request: req, Snapshot: snap, Listing: whole(mine),
			Others: []ledger.OtherRequest{{State: ledger.StateUnknown, Sent: true, Content: []byte(`{"paymentInformation":{"amount":99,"currency":"EUR"}}`)}}}, payments.Made},
		{"another equal request the upstream refused does not matter", payments.Evidence{Request: req, Snapshot: snap, Listing: whole(mine),
			Others: []ledger.OtherRequest{{State: ledger.StateDone, Ending: ledger.EndAnswered, UpstreamStatus: 400, Sent: true, Content: otherContent}}}, payments.Made},
		{"another equal request with a payment of its own does not matter", payments.Evidence{Request: req, Snapshot: snap, Listing: whole(mine),
			Others: []ledger.OtherRequest{{State: ledger.StateDone, PaymentID: "Q", Sent: true, Content: otherContent}}}, payments.Made},
		{"another equal request that never sent does not matter", payments.Evidence{Request: req, Snapshot: snap, Listing: whole(mine),
			Others: []ledger.OtherRequest{{State: ledger.StateReleased, Ending: ledger.EndNeverSent, Content: otherContent}}}, payments.Made},

		// Not made.
		{"no fresh similar payment on a quiet request is not made", payments.Evidence{Request: req, Snapshot: snap, Listing: whole(old), Quiet: true}, payments.NotMade},
		{"a fresh payment of another amount does not stop not made", payments.Evidence{Request: req, Snapshot: snap, Quiet: true,
			Listing: whole(listed("X", t0.Add(time.Second), `{"amount":13,"currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}}`))}, payments.NotMade},

		// Unknown: what must never be concluded "not made".
		{"a fresh similar payment another request owns is not not-made", payments.Evidence{Request: req, Snapshot: snap, Quiet: true, Listing: whole(mine),
			Others: []ledger.OtherRequest{{State: ledger.StateDone, PaymentID: "P", Sent: true, Content: otherContent}}}, payments.Unknown},
		{"a fresh similar payment created after the window is not not-made", payments.Evidence{Request: req, Snapshot: snap, Quiet: true,
			Listing: whole(listed("P", t0.Add(time.Hour), same))}, payments.Unknown},
		{"a fresh similar payment created before the snapshot's time is not not-made", payments.Evidence{Request: req, Snapshot: snap, Quiet: true,
			Listing: whole(listed("P", t0.Add(-time.Hour), same))}, payments.Unknown},
		{"a fresh payment with other fields is not not-made", payments.Evidence{Request: req, Snapshot: snap, Quiet: true,
			Listing: whole(listed("P", t0.Add(time.Second), `{"amount":12.5,"currency":"EUR","creditorName":"Someone","creditorAccount":{"iban":"DE89370400440532013000"}}`))}, payments.Unknown},
		{"a request that may still be acting is not not-made", payments.Evidence{Request: req, Snapshot: snap, Listing: whole(old), Quiet: false}, payments.Unknown},
		{"a listing that did not reach the end is not not-made", payments.Evidence{Request: req, Snapshot: snap, Listing: payments.Listing{Payments: []payments.Listed{old}}, Quiet: true}, payments.Unknown},
		{"a snapshot that did not read the whole list is not not-made", payments.Evidence{Request: req, Quiet: true, Listing: whole(old),
			Snapshot: ledger.SendEvidence{Snapshot: true, SeenCut: t0.Add(-time.Minute), WindowEnd: t0.Add(time.Minute)}}, payments.Unknown},
		{"no snapshot proves nothing", payments.Evidence{Request: req, Listing: whole(), Quiet: true}, payments.Unknown},

		// Unknown: what must never be concluded "made".
		{"two fresh equal payments", payments.Evidence{Request: req, Snapshot: snap, Listing: whole(mine, listed("P2", t0.Add(2*time.Second), same))}, payments.Unknown},
		{"a payment in the snapshot", payments.Evidence{Request: req, Snapshot: snap, Listing: whole(old)}, payments.Unknown},
		{"a payment with extra fields", payments.Evidence{Request: req, Snapshot: snap,
			Listing: whole(listed("P", t0.Add(time.Second), `{"amount":12.5,"currency":"EUR","remittanceInformation":"x","creditorAccount":{"iban":"DE89370400440532013000"}}`))}, payments.Unknown},
		{"a payment to another creditor", payments.Evidence{Request: req, Snapshot: snap,
			Listing: whole(listed("P", t0.Add(time.Second), `{"amount":12.5,"currency":"EUR","creditorAccount":{"iban":"DE89 3704 0044 0532 0130 00"}}`))}, payments.Unknown},
		{"a payment another creation owns", payments.Evidence{Request: req, Snapshot: snap, Listing: whole(mine),
			Others: []ledger.OtherRequest{{State: ledger.StateDone, PaymentID: "P", Sent: true, Content: otherContent}}}, payments.Unknown},
		{"a request in flight the upstream would have made it of could have made it (similar, not equal)", payments.Evidence{Request: req, Snapshot: snap, Listing: whole(mine),
			Others: []ledger.OtherRequest{{State: ledger.StateInFlight, Sent: true, Content: []byte(`{"paymentInformation":{"amount":12.5,"currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"},"remittanceInformation":"dropped by the upstream"}}`)}}}, payments.Unknown},
		{"an equal request in flight could have made it", payments.Evidence{Request: req, Snapshot: snap, Listing: whole(mine),
			Others: []ledger.OtherRequest{{State: ledger.StateInFlight, Sent: true, Content: otherContent}}}, payments.Unknown},
		{"an equal open-banking init given back could have made it", payments.Evidence{Request: req, Snapshot: snap, Listing: whole(mine),
			Others: []ledger.OtherRequest{{Route: "/v2/pay", State: ledger.StateReleased, Ending: ledger.EndFailed, UpstreamStatus: 500, Sent: true, Content: otherContent}}}, payments.Unknown},
		{"an unreadable request could have made it", payments.Evidence{Request: req, Snapshot: snap, Listing: whole(mine),
			Others: []ledger.OtherRequest{{State: ledger.StateUnknown, Sent: true, Opaque: true}}}, payments.Unknown},
		{"outside the window", payments.Evidence{Request: req, Snapshot: snap, Listing: whole(listed("P", t0.Add(time.Hour), same))}, payments.Unknown},
		{"no window (no Date)", payments.Evidence{Request: req, Snapshot: ledger.SendEvidence{Snapshot: true}, Listing: whole(mine)}, payments.Unknown},
		{"no createdAt", payments.Evidence{Request: req, Snapshot: snap, Listing: whole(listed("P", time.Time{}, same))}, payments.Unknown},
	}
}

func content(t *testing.T, body string) payments.Content {
	t.Helper()
	c, ok := payments.ParseContent(payments.PaymentContent([]byte(body)))
	if !ok {
		t.Fatalf("no content in %s", body)
	}
	return c
}

// listedAs is a payment as the upstream lists it, read as settling reads it.
func listedAs(id string, at time.Time, info string) payments.Listed {
	return payments.Listed{ID: id, CreatedAt: at, Info: json.RawMessage(info), Content: money.ReadSeen(json.RawMessage(info))}
}

// Equal is exact on the model: every member the model has, the amount to
// the minor unit, an absent member (null, "", left out) equal only to an
// absent one; members only the upstream adds are not the request's.
func TestContentEqual(t *testing.T) {
	for _, tc := range []struct {
		sent, listed string
		want         bool
	}{
		{`{"amount":"10.00","currency":"EUR"}`, `{"amount":10,"currency":"EUR"}`, true},
		{`{"amount":10,"currency":"EUR"}`, `{"amount":10.0,"currency":"EUR"}`, true},
		{`{"amount":10,"currency":"EUR"}`, `{"amount":1e1,"currency":"EUR"}`, true},
		{`{"amount":10,"currency":"EUR"}`, `{"amount":10.000000000000002,"currency":"EUR"}`, false},
		{`{"amount":10,"currency":"EUR"}`, `{"amount":10,"currency":"eur"}`, false},
		{`{"amount":10,"currency":"EUR","creditorName":"1e3"}`, `{"amount":10,"currency":"EUR","creditorName":"1000"}`, false},
		{`{"amount":10,"currency":"EUR"}`, `{"amount":10,"currency":"EUR","creditorName":"x"}`, false},
		{`{"amount":10,"currency":"EUR","remittanceInformation":""}`, `{"amount":10,"currency":"EUR"}`, true},
		{`{"amount":10,"currency":"EUR","debtorAccount":null}`, `{"amount":10,"currency":"EUR","remittanceInformation":null}`, true},
		{`{"amount":10,"currency":"EUR","creditorAccount":{"iban":"A"}}`, `{"amount":10,"currency":"EUR","creditorAccount":{"iban":"A","name":"n"}}`, true},
		{`{"amount":10,"currency":"EUR","creditorAccount":{"iban":"A"}}`, `{"amount":10,"currency":"EUR","creditorAccount":{"iban":"B"}}`, false},
	} {
		c := content(t, `{"paymentInformation":`+tc.sent+`}`)
		if got := c.Equal(listedAs("P", time.Time{}, tc.listed)); got != tc.want {
			t.Errorf("Equal(%s, %s): got %v, want %v", tc.sent, tc.listed, got, tc.want)
		}
		if !c.Similar(listedAs("P", time.Time{}, tc.listed)) && tc.want {
			t.Errorf("Similar(%s, %s): an equal payment must be similar", tc.sent, tc.listed)
		}
	}
}
