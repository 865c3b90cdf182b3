package edge

import (
	"github.com/fintech-bff/bff/internal/login"
	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/session"
)

// The Observer's words are typed in the packages the metrics may import,
// since the metrics do not import the edge (its tests use them):
// login.Method and login.Outcome (Login), session.Reason (Revoked),
// limits.Kind (Refused) and payments.FollowResult (Webhook), whose values
// for the webhooks the edge answers alone, before anything is stored, are
// these.
const (
	WebhookForged    payments.FollowResult = "webhook_forged"    // its signature does not verify
	WebhookStale     payments.FollowResult = "webhook_stale"     // its timestamp is too far from this clock
	WebhookMalformed payments.FollowResult = "webhook_malformed" // unreadable, or not a status change
	WebhookIgnored   payments.FollowResult = "webhook_ignored"   // a type or a status the BFF does not read
)

// sessionMethod is the method a login that made a session with method m
// (session.MethodDev, MethodOIDC, MethodMobile) is counted under: the same
// word.
func sessionMethod(m string) login.Method {
	switch m {
	case session.MethodDev:
		return login.MethodDev
	case session.MethodOIDC:
		return login.MethodOIDC
	case session.MethodMobile:
		return login.MethodMobile
	}
	return login.MethodUnknown // never: a session has one of the three
}
