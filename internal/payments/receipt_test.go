package payments

import (
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/money"
	"github.com/fintech-bff/bff/internal/problem"
)

// A receipt states what the ledger knows and no more: a request whose
// outcome is not known has none (409, saying why), a done one states its
// answer, amount and payee from the recorded content, a declined one why
// it was not sent; an answer that does not open is not guessed.
func TestReceiptDocument(t *testing.T) {
	r := &Receipts{issuer: "https://bff.example", now: func() time.Time { return time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC) }}
	amount, err := money.ParseAmount("1000.50", "EUR")
	if err != nil {
		t.Fatal(err)
	}
	content := Content{Info: &money.Info{Amount: amount, CreditorName: "Jane Doe", CreditorAccount: &money.Account{IBAN: "DE89370400440532013000"}}}.Encode()
	created := time.Date(2026, 12, 5, 9, 59, 0, 0, time.UTC)
	facts := func(state ledger.State, answered int) ledger.Facts {
		return ledger.Facts{Entry: ledger.Entry{Key: "k1", Route: "/v2/payments", State: state, Answered: answered, PaymentID: "pay_1", CreatedAt: created},
			Content: content, FinishedAt: created.Add(time.Second)}
	}
	for _, tc := range []struct {
		state ledger.State
		why   string
	}{{ledger.StateInFlight, "still being sent"}, {ledger.StateAwaiting, "approval"}, {ledger.StateUnknown, "settling"}} {
		if _, p := r.document("alice", facts(tc.state, 0)); p == nil || p.Code != problem.CodeIdempotencyInProgress || p.Status != http.StatusConflict || !strings.Contains(p.Detail, tc.why) {
			t.Errorf("%s: got %v, want 409 IDEMPOTENCY_IN_PROGRESS saying %q", tc.state, p, tc.why)
		}
	}
	if _, p := r.document("alice", facts(ledger.StateDone, 0)); p == nil {
		t.Error("a done request whose answer does not open got a receipt")
	}
	d, p := r.document("alice", facts(ledger.StateDone, 201))
	if p != nil {
		t.Fatal(p)
	}
	if d.Status != 201 || d.Amount == nil || d.Amount.Minor != 100050 || d.Amount.Text != "1000.50" || d.Payee == nil ||
		d.Payee.Name != "Jane Doe" || d.Payee.Account != "DE89 … 3000" || d.BodySHA256 == "" || d.Approval != nil ||
		d.RequestedAt != "2026-12-05T09:59:00Z" || d.AnsweredAt != "2026-12-05T09:59:01Z" || d.IssuedAt != "2026-12-05T10:00:00Z" {
		t.Fatalf("done: %+v %+v %+v", d, d.Amount, d.Payee)
	}
	f := facts(ledger.StateDeclined, 0)
	f.Ending, f.PaymentID = "denied", ""
	f.Approval = nil
	if d, p := r.document("alice", f); p != nil || d.Status != 403 || d.Declined != "denied" || d.PaymentID != "" {
		t.Fatalf("declined: %+v %v", d, p)
	}
	f = facts(ledger.StateDone, 201)
	f.Approval = &ledger.Approval{ACR: "urn:bff:acr:mfa", AuthTime: created, DetailsSHA256: "h"}
	if d, _ := r.document("alice", f); d.Approval == nil || d.Approval.ACR != "urn:bff:acr:mfa" || d.Approval.AuthTime != "2026-12-05T09:59:00Z" || d.Approval.DetailsSHA256 != "h" {
		t.Fatalf("approved: %+v", d.Approval)
	}
}

func TestMaskIBAN(t *testing.T) {
	for in, want := range map[string]string{"DE89370400440532013000": "DE89 … 3000", "DE89 3704 0044 0532 0130 00": "DE89 … 3000", "DE8": "…",
		// Short enough that the kept characters are all or most of it:
		// nothing kept (the shortest IBAN, Norway's, has 15).
		"DE891234": "…", "NO93860111179": "…", "NO9386011117947": "NO93 … 7947",
		// Characters, not bytes: a multi-byte one is kept whole or not at
		// all, never cut into invalid UTF-8.
		"D€89370400440532013000é€": "D€89 … 00é€",
	} {
		got := MaskIBAN(in)
		if got != want {
			t.Errorf("MaskIBAN(%q) = %q, want %q", in, got, want)
		}
		if !utf8.ValidString(got) {
			t.Errorf("MaskIBAN(%q) = %q: not UTF-8", in, got)
		}
	}
}
