package payments

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/money"
	"github.com/fintech-bff/bff/internal/mutant"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
	"github.com/gowebpki/jcs"
)

// Payments the user approves (docs/payments.md, "Payments the user
// approves"): which requests are held, the step-up answer, and a hold's
// approval or its end without a send. A hold that lapsed (past its time,
// or held under a policy since turned off) is ended by whoever meets it:
// the money path's repeat, or the recoverer.
//
// A change of where money goes is held like a payment: with step-up on,
// creating, changing or deleting a merchant (POST /v2/merchants, PUT or
// DELETE /v2/merchants/{id}) needs the user's approval, bound to the
// change itself, before it is sent. Otherwise a stolen session could
// re-point a merchant's account with an unheld request, before or after the
// user approves a payment to that merchant, and the money would go to the
// thief's account.

// HoldLedger is what holds need of the ledger: a held record read by its
// id, its one release (Approve), and its end without a send (Decline).
type HoldLedger interface {
	Record(ctx context.Context, id int64) (*ledger.Record, error)
	Approve(ctx context.Context, id int64, bound time.Duration, proof ledger.Approval) (*ledger.Claim, error)
	Decline(ctx context.Context, id int64, ending string) (bool, error)
}

var (
	_ HoldLedger = (*ledger.Postgres)(nil)
	_ HoldLedger = (*ledger.Memory)(nil)
)

// Holds holds the payments the policy names for the user's approval, and
// releases each once. A nil *Holds is step-up off: it holds nothing, and
// finds no hold to approve.
type Holds struct {
	base
	ledger  HoldLedger
	policy  StepUp
	refs    *holdRefs
	records *Records
	send    sender        // the money path
	timeout time.Duration // the upstream timeout: an approved send's claim ends within it
}

// sender sends an approved hold as the owner of its claim, by the money
// path's rules.
type sender interface {
	sendApproved(ctx context.Context, m *moneyCall) *problem.Problem
}

// StepUp is the policy of payments the user approves (payments.step_up):
// which payments are held for a fresh, stronger authentication bound to
// their content, and what that authentication must prove.
type StepUp struct {
	// Routes are the money routes whose payments may be held; empty:
	// every money route.
	Routes []string
	// Always holds every payment on Routes, whatever its amount.
	Always bool
	// Thresholds hold a payment whose amount is at or over its currency's
	// (upper-case ISO 4217 code → decimal amount). A currency not listed
	// is always held: an amount the policy cannot weigh is not waved
	// through.
	Thresholds map[string]string
	// ACRValues are the authentication context classes an approval may
	// carry (the ID token's acr must be one of them).
	ACRValues []string
	// MaxAge bounds how long before the approval the user authenticated
	// (the ID token's auth_time); the authentication must also come after
	// the payment was held.
	MaxAge time.Duration
	// HoldFor is how long a held payment waits for its approval; then it
	// is declined (expired) and never sent.
	HoldFor time.Duration
	// URL is the step-up endpoint as the client reaches it (the public
	// URL's /auth/step-up).
	URL string
	// Now is the clock an approval's auth_time is judged by (max_age, a
	// time ahead of it); time.Now when nil. Tests move it.
	Now func() time.Time
}

// approvalSkew is how far the identity provider's clock (auth_time) may be
// from the database's (the hold's time) and the BFF's.
const approvalSkew = 5 * time.Second

// wants reports whether a payment creation on route with content c needs
// the user's approval.
func (s *Holds) wants(route string, c Content) bool {
	if s == nil || c.Info == nil {
		return false
	}
	su := s.policy
	if len(su.Routes) > 0 && !slices.Contains(su.Routes, route) {
		return false
	}
	if su.Always {
		return true
	}
	limit, ok := su.Thresholds[c.Info.Amount.Currency]
	if !ok {
		return true
	}
	min, err := money.ParseMinor(limit, c.Info.Amount.Currency)
	return err != nil || c.Info.Amount.Minor >= min
}

// required is the answer to a held payment: 401 STEP_UP_REQUIRED
// with the step-up URL and RFC 9470's challenge.
func (s *Holds) required(userID, sessionRef string, id int64, until time.Time) *problem.Problem {
	p := problem.New(problem.CodeStepUpRequired, "this payment needs your approval; nothing was sent. Open stepUpUrl to approve it: it is then sent once, under the same Idempotency-Key")
	p.Ext = []problem.Member{
		{Name: "stepUpUrl", Value: s.refs.stepUpURL(userID, sessionRef, id)},
		{Name: "acrValues", Value: s.policy.ACRValues},
		{Name: "expiresAt", Value: until.UTC().Format(time.RFC3339)},
	}
	challenge := `Bearer error="insufficient_user_authentication", error_description="the payment needs your approval"`
	if len(s.policy.ACRValues) > 0 {
		challenge += `, acr_values="` + strings.Join(s.policy.ACRValues, " ") + `"`
	}
	if s.policy.MaxAge > 0 {
		secs := int64(s.policy.MaxAge / time.Second)
		p.Ext = append(p.Ext, problem.Member{Name: "maxAge", Value: secs})
		challenge += ", max_age=" + strconv.FormatInt(secs, 10)
	}
	p.WWWAuthenticate = challenge
	return p
}

// declined is the answer for a hold that ended without a send.
func declined(ending string) *problem.Problem {
	why := map[string]string{
		ledger.EndDenied:    "the approval was cancelled or refused at the identity provider",
		ledger.EndMismatch:  "the approval did not match this payment (its amount, payee or user, or the strength or time of the authentication)",
		ledger.EndExpired:   "it was not approved in time",
		ledger.EndWithdrawn: "payments are no longer approved here, so it cannot be approved",
	}[ending]
	if why == "" {
		why = "it was not approved"
	}
	return problem.New(problem.CodeStepUpDeclined, "this payment was not sent: "+why+". To pay, start again with a new Idempotency-Key")
}

// Hold is a held payment as its approval starts: what the identity
// provider shows the user and what the approval must prove.
type Hold struct {
	Key   string
	Route string
	// UserID and SessionRef are the user and session that made it: only
	// that session's approval releases it.
	UserID     string
	SessionRef string
	// Details is the RFC 9396 authorization_details (one
	// payment_initiation) derived from the held content.
	Details   json.RawMessage
	ACRValues []string
	MaxAge    time.Duration
	Expires   time.Time
}

// HeldPayment opens a step-up reference: the payment it names, still
// waiting for its approval.
func (s *Holds) HeldPayment(ctx context.Context, ref string) (Hold, *problem.Problem) {
	rec, p := s.heldRecord(ctx, ref)
	if p != nil {
		return Hold{}, p
	}
	if p := s.stillHeld(ctx, rec); p != nil {
		return Hold{}, p
	}
	details, p := s.heldDetails(ctx, rec, "")
	if p != nil {
		return Hold{}, p
	}
	return Hold{Key: rec.Key, Route: rec.Route, UserID: rec.UserID, SessionRef: rec.SessionRef, Details: details,
		ACRValues: s.policy.ACRValues, MaxAge: s.policy.MaxAge, Expires: rec.Deadline}, nil
}

// DeclineHold ends the hold ref names without a send, for the session
// sessionRef of userID that made it: the user cancelled at the provider,
// or the provider refused. When the payment is declined (now, or before),
// declined is the refusal a repeat of its key now gets (403
// STEP_UP_DECLINED) and failed is nil; otherwise declined is nil and failed
// says why it was not (another session's, approved meanwhile, the ledger).
func (s *Holds) DeclineHold(ctx context.Context, ref, userID, sessionRef string) (declined, failed *problem.Problem) {
	rec, p := s.heldRecord(ctx, ref)
	if p != nil {
		return nil, p
	}
	if rec.UserID != userID || rec.SessionRef != sessionRef {
		return nil, problem.New(problem.CodeNotFound, "no payment of this session waits for an approval under this reference")
	}
	p = s.stillHeld(ctx, rec)
	if p == nil {
		p = s.declineOrSay(ctx, rec.ID, ledger.EndDenied)
	}
	if p.Code == problem.CodeStepUpDeclined {
		return p, nil
	}
	return nil, p
}

// heldRecord reads the record a reference names.
func (s *Holds) heldRecord(ctx context.Context, ref string) (*ledger.Record, *problem.Problem) {
	if s == nil {
		return nil, problem.New(problem.CodeNotFound, "payments are not held for approval here")
	}
	notFound := problem.New(problem.CodeNotFound, "no payment waits for an approval under this reference")
	id, userID, sessionRef, ok := s.refs.open(ref)
	if !ok {
		return nil, notFound
	}
	lctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	rec, err := s.ledger.Record(lctx, id)
	cancel()
	switch {
	case errors.Is(err, ledger.ErrNoRecord):
		return nil, notFound
	case err != nil:
		return nil, s.ledgerFailed("", err)
	case rec.UserID != userID || rec.SessionRef != sessionRef || rec.Held == nil:
		// The key was given back and claimed again since: not this hold.
		return nil, notFound
	}
	return rec, nil
}

// stillHeld is nil when rec waits for its approval, else the answer that
// says what became of it (a hold past its time is declined here).
func (s *Holds) stillHeld(ctx context.Context, rec *ledger.Record) *problem.Problem {
	switch {
	case rec.State == ledger.StateAwaiting && rec.Expired:
		return s.declineOrSay(ctx, rec.ID, ledger.EndExpired)
	case rec.State == ledger.StateAwaiting:
		return nil
	case rec.State == ledger.StateDeclined:
		return declined(rec.Ending)
	}
	return problem.New(problem.CodeNotFound, "this payment no longer waits for an approval: it was approved already; read its outcome in GET /bff/payments")
}

// decline ends hold id without a send, and reports whether it did: false
// when another approval or end won it meanwhile (or the ledger failed).
func (s *Holds) decline(ctx context.Context, id int64, ending string) bool {
	return s.declineHold(ctx, s.ledger, id, ending)
}

// declineOrSay declines hold id, and answers what is true afterwards: the
// refusal when this decline ended it, else what became of it meanwhile.
func (s *Holds) declineOrSay(ctx context.Context, id int64, ending string) *problem.Problem {
	if s.decline(ctx, id, ending) {
		return declined(ending)
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ledgerTimeout)
	rec, err := s.ledger.Record(lctx, id)
	cancel()
	switch {
	case err != nil:
		return s.ledgerFailed("", err)
	case rec.State == ledger.StateDeclined:
		return declined(rec.Ending)
	case rec.State == ledger.StateAwaiting:
		return problem.New(problem.CodeLedgerUnavailable, "this payment's approval could not be recorded right now; it was not sent and still waits")
	}
	return problem.New(problem.CodeNotFound, "this payment no longer waits for an approval: it was approved meanwhile; read its outcome in GET /bff/payments")
}

// Approval is what the identity provider proved when the user approved.
type Approval struct {
	UserID   string // the ID token's user claim
	ACR      string
	AuthTime time.Time
	// Details are the authorization_details the provider granted.
	Details   json.RawMessage
	RequestID string
	ClientIP  string
}

// proof is what the ledger keeps of the approval, for the payment's
// receipt: the class and time of the authentication, and the SHA-256 of
// the granted details' canonical JSON (RFC 8785), which anyone holding
// the details can compute again.
func (a Approval) proof() ledger.Approval {
	p := ledger.Approval{ACR: a.ACR, AuthTime: a.AuthTime.UTC()}
	if c, err := jcs.Transform(a.Details); err == nil {
		sum := sha256.Sum256(c)
		p.DetailsSHA256 = base64.RawURLEncoding.EncodeToString(sum[:])
	}
	return p
}

// Approve checks an approval, completed in session sessionRef of userID,
// against the held payment ref names (the user, the session, the authentication's class and time, and the granted
// authorization_details against the held content) and, when every check
// holds, sends the payment once under its key, by the money path's rules.
// An approval that does not match ends the hold (declined, never sent).
// It returns the payment's record after its send.
func (s *Holds) Approve(ctx context.Context, ref, userID, sessionRef string, a Approval) (Record, *problem.Problem) {
	rec, p := s.heldRecord(ctx, ref)
	if p != nil {
		return Record{}, p
	}
	if rec.UserID != userID || rec.SessionRef != sessionRef {
		// Another session's hold: a stolen session's payment is not
		// released from the user's session, nor the other way round. The
		// hold stays for its own session.
		return Record{}, problem.New(problem.CodeNotFound, "no payment of this session waits for an approval under this reference")
	}
	if p := s.stillHeld(ctx, rec); p != nil {
		return Record{}, p
	}
	why, rebind := s.mismatch(ctx, rec, a)
	if rebind != nil {
		// The merchant's account changed after the user was shown it: the
		// payment is not sent to an account the user did not approve, and
		// it waits for an approval that shows the account it would go to.
		s.log.Warn("a merchant payment's account changed since its approval was shown; the payment is held again, not sent",
			slog.String("requestId", a.RequestID))
		return Record{}, rebind
	}
	if why != "" {
		s.log.Warn("a payment approval did not match its held payment; the payment is declined and not sent",
			slog.String("requestId", a.RequestID), slog.String("reason", why))
		return Record{}, s.declineOrSay(ctx, rec.ID, ledger.EndMismatch)
	}
	var held heldRequest
	if json.Unmarshal(rec.Held, &held) != nil {
		return Record{}, s.ledgerFailed(a.RequestID, ledger.ErrUnreadable)
	}
	return s.release(context.WithoutCancel(ctx), rec, held, a)
}

// release releases an approved hold: its one claim, and its send by the
// money path. What became of it is the ledger's record, never a guess.
func (s *Holds) release(bg context.Context, rec *ledger.Record, held heldRequest, a Approval) (Record, *problem.Problem) {
	claim, err := withLedger(bg, func(ctx context.Context) (*ledger.Claim, error) {
		return s.ledger.Approve(ctx, rec.ID, s.timeout+ownerMargin, a.proof())
	})
	switch {
	case err != nil:
		return Record{}, s.ledgerFailed(a.RequestID, err)
	case claim == nil:
		// Approved meanwhile (another tab, another instance), or run out.
		return Record{}, problem.New(problem.CodeNotFound, "this payment no longer waits for an approval; read its outcome in GET /bff/payments")
	}
	s.observe.MoneyRequest(MoneyApproved)
	call := proxy.Call{UserID: rec.UserID, RequestID: a.RequestID, ClientIP: a.ClientIP, Path: held.Path, SessionRef: rec.SessionRef}
	m := &moneyCall{
		call: call, target: proxy.Target{Path: held.Path, Route: held.Route}, rawQuery: held.Query,
		header: http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json"}},
		req: ledger.Request{UserID: rec.UserID, Route: rec.Route, Key: rec.Key, Fingerprint: rec.Fingerprint,
			Content: rec.Content, SessionRef: rec.SessionRef, ClientIP: a.ClientIP, RequestID: a.RequestID},
		claim: claim, body: held.Body, creates: !held.isPayeeChange(), method: held.method(),
	}
	sendProblem := s.send.sendApproved(bg, m)
	if sendProblem != nil {
		s.log.Info("an approved payment's send ended in an error", slog.String("requestId", a.RequestID), slog.String("code", sendProblem.Code))
	}
	// Done or unknown as the money path stored it; none when the key was
	// given back (the upstream surely did not act), and then the send's
	// own refusal is the answer.
	r, ok, err := s.records.get(bg, rec.UserID, rec.Key)
	switch {
	case err != nil:
		return Record{}, problem.Wrap(problem.CodeLedgerUnavailable,
			"the payment was approved and handled, but its record cannot be read right now; read GET /bff/payments/{key} shortly", err)
	case !ok && sendProblem != nil:
		return Record{}, sendProblem
	case !ok:
		return Record{}, problem.New(problem.CodeLedgerUnavailable, "the payment was approved, but its record cannot be found; read GET /bff/payments/{key} shortly")
	}
	return r, nil
}

// mismatch says why an approval does not release rec ("" when it does),
// or, when the approval matches the held payment but for a merchant's
// account that changed since it was shown, the answer that holds it again.
func (s *Holds) mismatch(ctx context.Context, rec *ledger.Record, a Approval) (string, *problem.Problem) {
	now := time.Now()
	if s.policy.Now != nil {
		now = s.policy.Now()
	}
	switch {
	case a.UserID != rec.UserID:
		return "the approval is another user's", nil
	case !slices.Contains(s.policy.ACRValues, a.ACR) && len(s.policy.ACRValues) > 0:
		return "the authentication's class (acr) is not one the policy accepts", nil
	case a.AuthTime.IsZero():
		return "the approval carries no auth_time", nil
	case a.AuthTime.Before(rec.ClaimedAt.Add(-approvalSkew)):
		return "the authentication happened before the payment was held", nil
	case a.AuthTime.After(now.Add(approvalSkew)):
		return "the authentication's time is in the future", nil
	case s.policy.MaxAge > 0 && now.Sub(a.AuthTime) > s.policy.MaxAge+approvalSkew:
		return "the authentication is older than max_age", nil
	}
	if mutant.Is(mutant.ApprovalContentUnchecked) {
		return "", nil
	}
	var held heldRequest
	if json.Unmarshal(rec.Held, &held) == nil && held.isPayeeChange() {
		if want, ok := payeeChangeOf(held); !ok || !grantedChange(a.Details, want) {
			return "the granted authorization_details are not the held change of a merchant", nil
		}
		return "", nil
	}
	c, ok := ParseContent(rec.Content)
	if !ok {
		return "the held payment has no content to compare", nil
	}
	pe, p := payeeOf(ctx, s.up, rec.UserID, a.RequestID, c)
	if p != nil {
		return "", p // the payee cannot be checked now: nothing is sent, the hold stays
	}
	want := withPayee(paymentDetail(c), pe)
	got, ok := grantedDetail(a.Details)
	switch {
	case ok && sameDetail(got, want):
		return "", nil
	case ok && pe != nil && sameDetail(repointed(got, want, c), want):
		p := problem.New(problem.CodeStepUpRequired, "the merchant's account changed after this payment's approval was shown; it was not sent, and waits for an approval that shows the account it would now go to")
		p.Ext = []problem.Member{{Name: "stepUpUrl", Value: s.refs.stepUpURL(rec.UserID, rec.SessionRef, rec.ID)}}
		return "", p
	}
	return "the granted authorization_details are not the held payment's", nil
}

// changes reports whether a call to path with method changes where
// money goes and is held: with step-up on, a POST, PUT or DELETE under the
// merchants.
func (s *Holds) changes(path, method string) bool {
	if s == nil {
		return false
	}
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodDelete:
	default:
		return false
	}
	return path == merchantsPath || strings.HasPrefix(path, merchantsPath+"/")
}

// heldDetails is the authorization_details of a held record: its payment
// (with the payee it goes to) or its change of a merchant. requestID names
// the look-up of a merchant, when one is needed.
func (s *Holds) heldDetails(ctx context.Context, rec *ledger.Record, requestID string) (json.RawMessage, *problem.Problem) {
	var held heldRequest
	if json.Unmarshal(rec.Held, &held) != nil {
		return nil, s.ledgerFailed(requestID, ledger.ErrUnreadable)
	}
	if held.isPayeeChange() {
		d, ok := payeeChangeOf(held)
		if !ok {
			return nil, s.ledgerFailed(requestID, ledger.ErrUnreadable)
		}
		b, _ := json.Marshal([]payeeChange{d})
		return b, nil
	}
	c, ok := ParseContent(rec.Content)
	if !ok {
		// Held by an earlier version in a form this model does not read:
		// it cannot be shown, so it cannot be approved (its hold expires).
		return nil, problem.New(problem.CodeNotFound, "this payment cannot be shown for an approval (it was held by an earlier version); it will not be sent: pay again with a new Idempotency-Key")
	}
	pe, p := payeeOf(ctx, s.up, rec.UserID, requestID, c)
	if p != nil {
		return nil, p
	}
	b, _ := json.Marshal([]paymentInitiation{withPayee(paymentDetail(c), pe)})
	return b, nil
}
