package webhooks

import "crypto/hmac"

// published are the webhook secrets printed in this repository, whose keys
// anyone can read: the upstream simulator's default (its
// DefaultWebhookSecret, in config.dev.yaml), the example secret of the
// Standard Webhooks specification, and those of tests and docs. A BFF in
// production refuses them (payments.webhook_secrets): a webhook signed
// with one proves nothing. TestPublishedHoldsEverySecretInTheRepository
// fails when a secret printed in the repository is missing here.
var published = []string{
	"whsec_dXBzdHJlYW0tc2ltIGRldmVsb3BtZW50IHdlYmhvb2tzIQ==", // upstreamsim.DefaultWebhookSecret
	"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",                 // the Standard Webhooks test vector
	"whsec_dGVzdCB3ZWJob29rIHNlY3JldCwgMzIgYnl0ZXMh",         // docs/upstream-sim-control.md, the simulator's tests
	"whsec_ZW52IHdlYmhvb2sgc2VjcmV0LCAzMiBieXRlcyE=",         // cmd/upstream-sim's tests
	"whsec_ZmxhZyB3ZWJob29rIHNlY3JldCwgMzIgYnl0ZXMh",         // cmd/upstream-sim's tests
	"whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",                 // the simulator's fuzz seed: 24 zero bytes
	// Written in the tests as "whsec_" + the base64 of a readable key.
	"whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=", // "0123456789abcdef0123456789abcdef"
	"whsec_YW5vdGhlciBrZXksIHJvdGF0ZWQgaW4sIDMyIGJ5dGU=", // "another key, rotated in, 32 byte"
	"whsec_bm90IGEga2V5IHRoZSByZWNlaXZlciBrbm93cyEhISE=", // "not a key the receiver knows!!!!"
	"whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", // 32 zero bytes
}

// Published reports whether secret's key is that of a secret printed in
// this repository (published). Keys are compared, not their spelling, so a
// secret written differently (its base64's unused bits) is still found.
// A malformed secret is not published: ParseSecret refuses it anyway.
func Published(secret string) bool {
	key, err := ParseSecret(secret)
	if err != nil {
		return false
	}
	for _, p := range published {
		if k, err := ParseSecret(p); err == nil && hmac.Equal(k, key) {
			return true
		}
	}
	return false
}
