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
// approval or its end without a send: held, approved, declined, expired.
// A hold that lapsed (past its time, or held under a policy since turned
// off: lapsed) is ended by whoever meets it: the money path's repeat, a
// step-up read, or the recoverer's loop (Holds.expire).
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

// ExpiryLedger is what the holds' expiry needs of the ledger: every hold
// past its deadline declined (ExpireHolds).
type ExpiryLedger interface {
	ExpireHolds(ctx context.Context) (int64, error)
}

var (
	_ HoldLedger   = (*ledger.Postgres)(nil)
	_ HoldLedger   = (*ledger.Memory)(nil)
	_ ExpiryLedger = (*ledger.Postgres)(nil)
	_ ExpiryLedger = (*ledger.Memory)(nil)
)

// Holds holds the payments the policy names for the user's approval,
// releases each once, and ends those declined or lapsed. With step-up off
// (policy.refs.holding, the one place that is decided) it holds nothing
// and finds no hold to approve, and still ends the holds made before it
// was turned off. Safe for concurrent use.
type Holds struct {
	base
	ledger   HoldLedger
	expiring ExpiryLedger // the background's: the expiry runs in the recoverer's loop
	policy   holdPolicy
	records  *Records
	send     sender        // the owner of an approved hold's claim
	timeout  time.Duration // the upstream timeout: an approved send's claim ends within it
}

// sender sends an approved hold as the owner of its claim, by the money
// path's rules (owners).
type sender interface {
	sendApproved(ctx context.Context, m *moneyCall) *problem.Problem
}

var _ sender = (*owners)(nil)

// newHolds returns the holds of policy (nil: step-up off), read and ended
// through led and expired through expiring, their references refs; an
// approved hold is sent through send within timeout, and read back from
// records.
func newHolds(b base, led HoldLedger, expiring ExpiryLedger, policy *StepUp, refs holdRefs, records *Records, send sender, timeout time.Duration) *Holds {
	h := &Holds{base: b, ledger: led, expiring: expiring, policy: holdPolicy{refs: refs}, records: records, send: send, timeout: timeout}
	if policy != nil {
		h.policy.StepUp = *policy
	}
	return h
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

// holdPolicy is step-up's policy and its references: which requests are
// held, the answer that says so, when a hold can no longer be approved,
// and what an approval must prove. The zero value holds nothing.
type holdPolicy struct {
	StepUp
	refs holdRefs
}

// wants reports whether a payment creation on route with content c needs
// the user's approval.
func (su holdPolicy) wants(route string, c Content) bool {
	if !su.refs.holding() || c.Info == nil {
		return false
	}
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

// changes reports whether a call to path with method changes where
// money goes and is held: with step-up on, a POST, PUT or DELETE under the
// merchants.
func (su holdPolicy) changes(path, method string) bool {
	if !su.refs.holding() {
		return false
	}
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodDelete:
	default:
		return false
	}
	return path == merchantsPath || strings.HasPrefix(path, merchantsPath+"/")
}

// lapsed is the ending of an awaiting hold that can no longer be approved
// (expired: past its time; withdrawn: held under a step-up policy since
// turned off), or "" while it can.
func (su holdPolicy) lapsed(rec *ledger.Record) string {
	switch {
	case rec.Expired:
		return ledger.EndExpired
	case !su.refs.holding():
		return ledger.EndWithdrawn
	}
	return ""
}

// required is the answer to a held payment: 401 STEP_UP_REQUIRED
// with the step-up URL and RFC 9470's challenge.
func (su holdPolicy) required(userID, sessionRef string, id int64, until time.Time) *problem.Problem {
	p := problem.New(problem.CodeStepUpRequired, "this payment needs your approval; nothing was sent. Open stepUpUrl to approve it: it is then sent once, under the same Idempotency-Key")
	p.Ext = []problem.Member{
		{Name: "stepUpUrl", Value: su.refs.stepUpURL(userID, sessionRef, id)},
		{Name: "acrValues", Value: su.ACRValues},
		{Name: "expiresAt", Value: until.UTC().Format(time.RFC3339)},
	}
	challenge := `Bearer error="insufficient_user_authentication", error_description="the payment needs your approval"`
	if len(su.ACRValues) > 0 {
		challenge += `, acr_values="` + strings.Join(su.ACRValues, " ") + `"`
	}
	if su.MaxAge > 0 {
		secs := int64(su.MaxAge / time.Second)
		p.Ext = append(p.Ext, problem.Member{Name: "maxAge", Value: secs})
		challenge += ", max_age=" + strconv.FormatInt(secs, 10)
	}
	p.WWWAuthenticate = challenge
	return p
}

// newlyHeld is the answer to a request claimed for the user's approval
// (claim), reported as held.
func (s *Holds) newlyHeld(m *moneyCall, claim *ledger.Claim) *problem.Problem {
	s.observe.MoneyRequest(MoneyHeld)
	return s.policy.required(m.req.UserID, m.req.SessionRef, claim.ID, claim.ClaimedAt.Add(s.policy.HoldFor))
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

// Declined is a hold ended without a send; Ending says why
// (ledger.EndDenied, EndMismatch, EndExpired, EndWithdrawn).
type Declined struct {
	Ending string
}

// Answer is the refusal a repeat of the payment's key gets from now on: 403
// STEP_UP_DECLINED, saying why.
func (d Declined) Answer() *problem.Problem { return declined(d.Ending) }

// HeldPayment opens a step-up reference: the payment it names, still
// waiting for its approval.
func (s *Holds) HeldPayment(ctx context.Context, ref string) (Hold, *problem.Problem) {
	rec, p := s.heldRecord(ctx, ref)
	if p != nil {
		return Hold{}, p
	}
	if d, p := s.standing(ctx, rec); p != nil || d != nil {
		return Hold{}, answerOf(d, p)
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
// or the provider refused. It returns the decline when the payment is
// declined (now, or before), else the error that says why it was not
// (another session's, approved meanwhile, the ledger): a *problem.Problem.
func (s *Holds) DeclineHold(ctx context.Context, ref, userID, sessionRef string) (Declined, error) {
	rec, p := s.heldRecord(ctx, ref)
	if p != nil {
		return Declined{}, p
	}
	if rec.UserID != userID || rec.SessionRef != sessionRef {
		return Declined{}, problem.New(problem.CodeNotFound, "no payment of this session waits for an approval under this reference")
	}
	d, p := s.standing(ctx, rec)
	if p == nil && d == nil {
		d, p = s.declineOrSay(ctx, rec.ID, ledger.EndDenied)
	}
	if p != nil {
		return Declined{}, p
	}
	return *d, nil
}

// heldRecord reads the record a reference names.
func (s *Holds) heldRecord(ctx context.Context, ref string) (*ledger.Record, *problem.Problem) {
	if !s.policy.refs.holding() {
		return nil, problem.New(problem.CodeNotFound, "payments are not held for approval here")
	}
	notFound := problem.New(problem.CodeNotFound, "no payment waits for an approval under this reference")
	id, userID, sessionRef, ok := s.policy.refs.open(ref)
	if !ok {
		return nil, notFound
	}
	rec, err := withLedger(ctx, func(ctx context.Context) (*ledger.Record, error) { return s.ledger.Record(ctx, id) })
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

// standing says what became of the hold rec: nil and nil while it waits
// for its approval, its decline when it was declined (a hold past its time
// is declined here), else the answer that says what it became.
func (s *Holds) standing(ctx context.Context, rec *ledger.Record) (*Declined, *problem.Problem) {
	switch {
	case rec.State == ledger.StateAwaiting && rec.Expired:
		return s.declineOrSay(ctx, rec.ID, ledger.EndExpired)
	case rec.State == ledger.StateAwaiting:
		return nil, nil
	case rec.State == ledger.StateDeclined:
		return &Declined{Ending: rec.Ending}, nil
	}
	return nil, problem.New(problem.CodeNotFound, "this payment no longer waits for an approval: it was approved already; read its outcome in GET /bff/payments")
}

// answerOf is the answer to a hold that no longer waits: its refusal when
// declined, else p.
func answerOf(d *Declined, p *problem.Problem) *problem.Problem {
	if p == nil && d != nil {
		return d.Answer()
	}
	return p
}

// decline ends hold id without a send (ending says why), and reports
// whether this call ended it: false when another approval or end won it
// meanwhile, or the ledger failed (the hold then expires at its deadline).
func (s *Holds) decline(ctx context.Context, id int64, ending string) bool {
	ok, err := withLedger(context.WithoutCancel(ctx), func(ctx context.Context) (bool, error) {
		return s.ledger.Decline(ctx, id, ending)
	})
	if err != nil {
		s.log.Warn("a held payment could not be declined; it expires at its deadline", slog.String("error", err.Error()))
		return false
	}
	if ok {
		s.observe.MoneyRequest(declinedResult(ending))
	}
	return ok
}

// declineOrSay declines hold id, and says what is true afterwards: its
// decline when this call or another ended it so, else the answer that
// says what became of it meanwhile.
func (s *Holds) declineOrSay(ctx context.Context, id int64, ending string) (*Declined, *problem.Problem) {
	if s.decline(ctx, id, ending) {
		return &Declined{Ending: ending}, nil
	}
	rec, err := withLedger(context.WithoutCancel(ctx), func(ctx context.Context) (*ledger.Record, error) { return s.ledger.Record(ctx, id) })
	switch {
	case err != nil:
		return nil, s.ledgerFailed("", err)
	case rec.State == ledger.StateDeclined:
		return &Declined{Ending: rec.Ending}, nil
	case rec.State == ledger.StateAwaiting:
		return nil, problem.New(problem.CodeLedgerUnavailable, "this payment's approval could not be recorded right now; it was not sent and still waits")
	}
	return nil, problem.New(problem.CodeNotFound, "this payment no longer waits for an approval: it was approved meanwhile; read its outcome in GET /bff/payments")
}

// expire declines the holds that ran out, so their users' lists and
// streams say so without a read (the recoverer's loop runs it). A hold
// read past its time is declined by its reader anyway (standing, a
// repeat), so a few seconds late does no harm. Holds expire also after
// step-up was turned off: none can be approved any more (a held change of
// a merchant is not read again by a repeat, which is forwarded unheld
// then).
func (s *Holds) expire(ctx context.Context) {
	n, err := withLedger(ctx, s.expiring.ExpireHolds)
	if err != nil {
		s.log.Warn("the recoverer could not expire held payments", slog.String("error", err.Error()))
		return
	}
	for range n {
		s.observe.MoneyRequest(declinedResult(ledger.EndExpired))
	}
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
	if d, p := s.standing(ctx, rec); p != nil || d != nil {
		return Record{}, answerOf(d, p)
	}
	why, rebind := s.policy.mismatch(ctx, s.up, rec, a)
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
		return Record{}, answerOf(s.declineOrSay(ctx, rec.ID, ledger.EndMismatch))
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
func (su holdPolicy) mismatch(ctx context.Context, up Upstream, rec *ledger.Record, a Approval) (string, *problem.Problem) {
	now := time.Now()
	if su.Now != nil {
		now = su.Now()
	}
	switch {
	case a.UserID != rec.UserID:
		return "the approval is another user's", nil
	case !slices.Contains(su.ACRValues, a.ACR) && len(su.ACRValues) > 0:
		return "the authentication's class (acr) is not one the policy accepts", nil
	case a.AuthTime.IsZero():
		return "the approval carries no auth_time", nil
	case a.AuthTime.Before(rec.ClaimedAt.Add(-approvalSkew)):
		return "the authentication happened before the payment was held", nil
	case a.AuthTime.After(now.Add(approvalSkew)):
		return "the authentication's time is in the future", nil
	case su.MaxAge > 0 && now.Sub(a.AuthTime) > su.MaxAge+approvalSkew:
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
	pe, p := payeeOf(ctx, up, rec.UserID, a.RequestID, c)
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
		p.Ext = []problem.Member{{Name: "stepUpUrl", Value: su.refs.stepUpURL(rec.UserID, rec.SessionRef, rec.ID)}}
		return "", p
	}
	return "the granted authorization_details are not the held payment's", nil
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
