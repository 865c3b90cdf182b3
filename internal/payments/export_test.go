package payments

import "context"

// SettleDue runs one look of the background settler, for tests.
func (s *Service) SettleDue(ctx context.Context) { s.settleDue(ctx) }

// Fingerprint and MatchKey are what pay records of a request, for tests
// that claim a key as a dead owner would have.
var (
	Fingerprint    = fingerprint
	MatchKey       = matchKey
	PaymentContent = paymentContent
)
