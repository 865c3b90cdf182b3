package payments

// The results payments reports to its Observer: the values of the metrics
// bff_money_requests_total{result} and bff_payment_follows_total{result},
// named once here rather than spelled at each call.

// MoneyResult is how a money-moving request was answered, or how the
// settler ended one.
type MoneyResult string

// The money results. A repeat of a key reports its ledger audit event by
// the same word (replayed, in_progress, key_reused, outcome_unknown,
// settled, not_made, held, approved).
//
// An unknown outcome is one word in Go, "unknown", whoever meets it; the
// values keep the words docs/operations.md documents to operators:
// MoneyUnknownToSender is `unknown` (the 502 PAYMENT_OUTCOME_UNKNOWN of the
// request that sent the payment), MoneyUnknownToRepeat is `outcome_unknown`
// (the same 502 to each repeat of its key, the ledger's EventUnknown). The
// record's state is `unknown` (ledger.StateUnknown) and the owner's ending
// `ambiguous` (ledger.EndAmbiguous: the answer was lost).
const (
	MoneyAnswered          MoneyResult = "answered"
	MoneyApproved          MoneyResult = "approved"
	MoneyBodyRefused       MoneyResult = "body_refused"
	MoneyClaimLost         MoneyResult = "claim_lost"
	MoneyDeclinedDenied    MoneyResult = "declined_denied"
	MoneyDeclinedExpired   MoneyResult = "declined_expired"
	MoneyDeclinedMismatch  MoneyResult = "declined_mismatch"
	MoneyDeclinedWithdrawn MoneyResult = "declined_withdrawn"
	MoneyHeld              MoneyResult = "held"
	MoneyInProgress        MoneyResult = "in_progress"
	MoneyKeyInvalid        MoneyResult = "key_invalid"
	MoneyKeyRequired       MoneyResult = "key_required"
	MoneyKeyReused         MoneyResult = "key_reused"
	MoneyLedgerUnavailable MoneyResult = "ledger_unavailable"
	MoneyNotMade           MoneyResult = "not_made"
	MoneyNotMadeBackground MoneyResult = "not_made_background"
	MoneyReleased          MoneyResult = "released"
	MoneyReleasedUnsent    MoneyResult = "released_unsent"
	MoneyReplayed          MoneyResult = "replayed"
	MoneyResentAfter401    MoneyResult = "resent_after_401"
	MoneyRouteRefused      MoneyResult = "route_refused"
	MoneySettled           MoneyResult = "settled"
	MoneySettledBackground MoneyResult = "settled_background"
	MoneySnapshotFailed    MoneyResult = "snapshot_failed"
	MoneyUnknownToRepeat   MoneyResult = "outcome_unknown"
	MoneyUnknownToSender   MoneyResult = "unknown"
)

// declinedResult is the result of a hold ended without a send, by its
// ending (ledger.EndDenied, EndMismatch, EndExpired, EndWithdrawn).
func declinedResult(ending string) MoneyResult { return MoneyResult("declined_" + ending) }

// FollowResult is what a poll of a followed payment, or a webhook, did.
type FollowResult string

// The follow results.
const (
	FollowChanged          FollowResult = "changed"
	FollowFailed           FollowResult = "failed"
	FollowLeaseLost        FollowResult = "lease_lost"
	FollowNotFound         FollowResult = "not_found"
	FollowUnchanged        FollowResult = "unchanged"
	FollowWebhookApplied   FollowResult = "webhook_applied"
	FollowWebhookReplayed  FollowResult = "webhook_replayed"
	FollowWebhookUnmatched FollowResult = "webhook_unmatched"
)
