package login

// How logins ended, as the edge reports them: the values of
// bff_logins_total{method, result}, named once here rather than spelled at
// each call. (The edge runs the logins: dev, OpenID, the native apps' and
// the payments' step-ups; this package holds their words because the
// metrics may import it and not the edge.)

// Method is the kind of login a result is counted under.
type Method string

// The methods. The first three are a session's methods by the same words
// (session.MethodDev, MethodOIDC, MethodMobile).
const (
	MethodDev    Method = "dev"     // the development login
	MethodOIDC   Method = "oidc"    // a browser's OpenID Connect login
	MethodMobile Method = "mobile"  // a native app's login
	MethodStepUp Method = "step_up" // the approval of a held payment
	// MethodUnknown is a callback whose state names no login this
	// browser started: its method cannot be known.
	MethodUnknown Method = "unknown"
)

// Outcome is how a login, or a step of one, ended.
type Outcome string

// The outcomes.
const (
	OutcomeOK Outcome = "ok" // a session was made
	// OutcomeStarted is a step-up sent to the provider.
	OutcomeStarted Outcome = "started"
	// OutcomeCodeIssued is a native app's one-time code issued at the
	// callback; the app redeems it next.
	OutcomeCodeIssued Outcome = "code_issued"
	// OutcomeFailed is a login (or approval) that did not complete.
	OutcomeFailed Outcome = "failed"
	// OutcomeState is a callback whose state is unknown, expired, used
	// or not this browser's (ErrState).
	OutcomeState Outcome = "state"
	// OutcomeInvalidGrant is a one-time code refused (ErrInvalidGrant).
	OutcomeInvalidGrant Outcome = "invalid_grant"
	// OutcomeApproved is a step-up that approved and released its payment.
	OutcomeApproved Outcome = "approved"
	// OutcomeDeclined is a step-up the user refused: its payment is
	// declined, never sent.
	OutcomeDeclined Outcome = "declined"
)
