package payments

import (
	"context"

	"github.com/fintech-bff/bff/internal/ledger"
)

// SettleDue runs one look of the background settler, for tests.
func (s *Service) SettleDue(ctx context.Context) { s.recoverer.settleDue(ctx) }

// Fingerprint is what pay records of a request, for tests that claim a key
// as a dead owner would have.
var Fingerprint = fingerprint

// PaymentContent is the content pay records of a body (nil when it creates
// no payment), likewise.
func PaymentContent(body []byte) []byte {
	b, p := readBody(creationPath, body)
	if p != nil || !b.Creates() {
		return nil
	}
	return contentOf(b).Encode()
}

// SealCursor and OpenCursor are the cursors of GET /bff/payments, for
// tests.
func (s *Service) SealCursor(userID string, c ledger.Cursor) string {
	return s.records.sealCursor(userID, c)
}
func (s *Service) OpenCursor(userID, cursor string) (ledger.Cursor, bool) {
	return s.records.openCursor(userID, cursor)
}
