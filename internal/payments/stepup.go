package payments

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/money"
	"github.com/fintech-bff/bff/internal/mutant"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
)

// Holds is what payments the user approves need of the ledger
// (docs/payments.md, "Payments the user approves"): a held record read by
// its id, its one release (Approve), its end without a send (Decline), and
// the end of holds that ran out.
type Holds interface {
	Record(ctx context.Context, id int64) (*ledger.Record, error)
	Approve(ctx context.Context, id int64, bound time.Duration) (*ledger.Claim, error)
	Decline(ctx context.Context, id int64, ending string) (bool, error)
	ExpireHolds(ctx context.Context) (int64, error)
}

var (
	_ Holds = (*ledger.Postgres)(nil)
	_ Holds = (*ledger.Memory)(nil)
)

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

// heldRequest is what a hold keeps to send once approved.
type heldRequest struct {
	// Method is the held request's method ("" for a POST: a payment).
	Method string `json:"m,omitempty"`
	Path   string `json:"p"` // the canonical upstream path
	Route  string `json:"r"` // the route template, for the metrics
	Query  string `json:"q,omitempty"`
	Body   []byte `json:"b"`
}

func (h heldRequest) method() string {
	if h.Method == "" {
		return http.MethodPost
	}
	return h.Method
}

// isPayeeChange reports whether the held request changes a merchant
// (payeechange.go) rather than making a payment.
func (h heldRequest) isPayeeChange() bool {
	return h.Path == merchantsPath || strings.HasPrefix(h.Path, merchantsPath+"/")
}

// holds reports whether a payment creation on route with content c needs
// the user's approval.
func (s *Service) holds(route string, c Content) bool {
	su := s.stepUp
	if su == nil || (len(su.Routes) > 0 && !slices.Contains(su.Routes, route)) {
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

// holdRef is the opaque reference of a hold in its step-up URL: the
// record's id, its user and the session that made it, sealed, so it names
// nothing of the ledger and cannot be made or altered outside the BFF.
func (s *Service) holdRef(userID, sessionRef string, id int64) string {
	b := binary.BigEndian.AppendUint64(nil, uint64(id))
	b = append(append(append(b, userID...), 0), sessionRef...)
	return base64.RawURLEncoding.EncodeToString(s.holdBox.Seal(nil, b, []byte("bff step-up hold")))
}

// maxRefLen bounds a reference read from a URL.
const maxRefLen = 1024

// openHoldRef reads a reference holdRef made.
func (s *Service) openHoldRef(ref string) (id int64, userID, sessionRef string, ok bool) {
	if len(ref) > maxRefLen {
		return 0, "", "", false
	}
	sealed, err := base64.RawURLEncoding.Strict().DecodeString(ref)
	if err != nil {
		return 0, "", "", false
	}
	b, err := s.holdBox.Open(nil, sealed, []byte("bff step-up hold"))
	if err != nil || len(b) < 9 {
		return 0, "", "", false
	}
	id = int64(binary.BigEndian.Uint64(b[:8]))
	userID, sessionRef, ok = strings.Cut(string(b[8:]), "\x00")
	return id, userID, sessionRef, ok && id > 0
}

// stepUpURL is where the client sends the user to approve hold id.
func (s *Service) stepUpURL(userID, sessionRef string, id int64) string {
	return s.stepUp.URL + "?payment=" + url.QueryEscape(s.holdRef(userID, sessionRef, id))
}

// stepUpRequired is the answer to a held payment: 401 STEP_UP_REQUIRED
// with the step-up URL and RFC 9470's challenge.
func (s *Service) stepUpRequired(userID, sessionRef string, id int64, until time.Time) *problem.Problem {
	p := problem.New(problem.CodeStepUpRequired, "this payment needs your approval; nothing was sent. Open stepUpUrl to approve it: it is then sent once, under the same Idempotency-Key")
	p.Ext = []problem.Member{
		{Name: "stepUpUrl", Value: s.stepUpURL(userID, sessionRef, id)},
		{Name: "acrValues", Value: s.stepUp.ACRValues},
		{Name: "expiresAt", Value: until.UTC().Format(time.RFC3339)},
	}
	challenge := `Bearer error="insufficient_user_authentication", error_description="the payment needs your approval"`
	if len(s.stepUp.ACRValues) > 0 {
		challenge += `, acr_values="` + strings.Join(s.stepUp.ACRValues, " ") + `"`
	}
	if s.stepUp.MaxAge > 0 {
		secs := int64(s.stepUp.MaxAge / time.Second)
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
func (s *Service) HeldPayment(ctx context.Context, ref string) (Hold, *problem.Problem) {
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
		ACRValues: s.stepUp.ACRValues, MaxAge: s.stepUp.MaxAge, Expires: rec.Deadline}, nil
}

// DeclineHold ends the hold ref names without a send, for the session
// sessionRef of userID that made it: the user cancelled at the provider,
// or the provider refused. When the payment is declined (now, or before),
// declined is the refusal a repeat of its key now gets (403
// STEP_UP_DECLINED) and failed is nil; otherwise declined is nil and failed
// says why it was not (another session's, approved meanwhile, the ledger).
func (s *Service) DeclineHold(ctx context.Context, ref, userID, sessionRef string) (declined, failed *problem.Problem) {
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
func (s *Service) heldRecord(ctx context.Context, ref string) (*ledger.Record, *problem.Problem) {
	if s.stepUp == nil || s.holdsOf == nil {
		return nil, problem.New(problem.CodeNotFound, "payments are not held for approval here")
	}
	notFound := problem.New(problem.CodeNotFound, "no payment waits for an approval under this reference")
	id, userID, sessionRef, ok := s.openHoldRef(ref)
	if !ok {
		return nil, notFound
	}
	lctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	rec, err := s.holdsOf.Record(lctx, id)
	cancel()
	switch {
	case errors.Is(err, ledger.ErrNoRecord):
		return nil, notFound
	case err != nil:
		return nil, s.ledgerFailed(proxy.Call{}, err)
	case rec.UserID != userID || rec.SessionRef != sessionRef || rec.Held == nil:
		// The key was given back and claimed again since: not this hold.
		return nil, notFound
	}
	return rec, nil
}

// stillHeld is nil when rec waits for its approval, else the answer that
// says what became of it (a hold past its time is declined here).
func (s *Service) stillHeld(ctx context.Context, rec *ledger.Record) *problem.Problem {
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
func (s *Service) decline(ctx context.Context, id int64, ending string) bool {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ledgerTimeout)
	defer cancel()
	ok, err := s.holdsOf.Decline(lctx, id, ending)
	if err != nil {
		s.log.Warn("a held payment could not be declined; it expires at its deadline", slog.String("error", err.Error()))
		return false
	}
	if ok {
		s.observe.MoneyRequest(declinedResult(ending))
	}
	return ok
}

// declineOrSay declines hold id, and answers what is true afterwards: the
// refusal when this decline ended it, else what became of it meanwhile.
func (s *Service) declineOrSay(ctx context.Context, id int64, ending string) *problem.Problem {
	if s.decline(ctx, id, ending) {
		return declined(ending)
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ledgerTimeout)
	rec, err := s.holdsOf.Record(lctx, id)
	cancel()
	switch {
	case err != nil:
		return s.ledgerFailed(proxy.Call{}, err)
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

// Approve checks an approval, completed in session sessionRef of userID,
// against the held payment ref names (the user, the session, the authentication's class and time, and the granted
// authorization_details against the held content) and, when every check
// holds, sends the payment once under its key, by the money path's rules.
// An approval that does not match ends the hold (declined, never sent).
// It returns the payment's record after its send.
func (s *Service) Approve(ctx context.Context, ref, userID, sessionRef string, a Approval) (Record, *problem.Problem) {
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
		return Record{}, s.ledgerFailed(proxy.Call{}, ledger.ErrUnreadable)
	}
	bg := context.WithoutCancel(ctx)
	lctx, cancel := context.WithTimeout(bg, ledgerTimeout)
	claim, err := s.holdsOf.Approve(lctx, rec.ID, s.timeout+ownerMargin)
	cancel()
	switch {
	case err != nil:
		return Record{}, s.ledgerFailed(proxy.Call{}, err)
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
	sctx, scancel := context.WithTimeout(bg, s.timeout)
	defer scancel()
	_, sendProblem := s.sendAsOwner(sctx, bg, &recorder{header: http.Header{}}, m)
	if sendProblem != nil {
		s.log.Info("an approved payment's send ended in an error", slog.String("requestId", a.RequestID), slog.String("code", sendProblem.Code))
	}
	// What became of it is the ledger's record, never a guess: done or
	// unknown as the money path stored it; none when the key was given
	// back (the upstream surely did not act), and then the send's own
	// refusal is the answer.
	gctx, gcancel := context.WithTimeout(bg, ledgerTimeout)
	defer gcancel()
	e, ok, err := s.entries.Get(gctx, rec.UserID, rec.Key)
	switch {
	case err != nil:
		return Record{}, problem.Wrap(problem.CodeLedgerUnavailable,
			"the payment was approved and handled, but its record cannot be read right now; read GET /bff/payments/{key} shortly", err)
	case !ok && sendProblem != nil:
		return Record{}, sendProblem
	case !ok:
		return Record{}, problem.New(problem.CodeLedgerUnavailable, "the payment was approved, but its record cannot be found; read GET /bff/payments/{key} shortly")
	}
	return s.record(rec.UserID, e), nil
}

// mismatch says why an approval does not release rec ("" when it does),
// or, when the approval matches the held payment but for a merchant's
// account that changed since it was shown, the answer that holds it again.
func (s *Service) mismatch(ctx context.Context, rec *ledger.Record, a Approval) (string, *problem.Problem) {
	now := time.Now()
	if s.stepUp.Now != nil {
		now = s.stepUp.Now()
	}
	switch {
	case a.UserID != rec.UserID:
		return "the approval is another user's", nil
	case !slices.Contains(s.stepUp.ACRValues, a.ACR) && len(s.stepUp.ACRValues) > 0:
		return "the authentication's class (acr) is not one the policy accepts", nil
	case a.AuthTime.IsZero():
		return "the approval carries no auth_time", nil
	case a.AuthTime.Before(rec.ClaimedAt.Add(-approvalSkew)):
		return "the authentication happened before the payment was held", nil
	case a.AuthTime.After(now.Add(approvalSkew)):
		return "the authentication's time is in the future", nil
	case s.stepUp.MaxAge > 0 && now.Sub(a.AuthTime) > s.stepUp.MaxAge+approvalSkew:
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
	pe, p := s.payeeOf(ctx, rec.UserID, a.RequestID, c)
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
		p.Ext = []problem.Member{{Name: "stepUpUrl", Value: s.stepUpURL(rec.UserID, rec.SessionRef, rec.ID)}}
		return "", p
	}
	return "the granted authorization_details are not the held payment's", nil
}

// DetailType is the RFC 9396 type of a payment's authorization details.
const DetailType = "payment_initiation"

// paymentDetail is the authorization detail (RFC 9396, payment_initiation)
// of a payment's content: what the identity provider shows the user and
// what the approval must grant, field for field. The amount is the
// canonical decimal of the held payment (money.Amount.String), exactly
// what was sent.
func paymentDetail(c Content) paymentInitiation {
	i := c.Info
	d := paymentInitiation{Type: DetailType, CreditorName: i.CreditorName, MerchantID: i.MerchantID,
		RemittanceInformationUnstructured: i.RemittanceInformation}
	d.InstructedAmount.Currency, d.InstructedAmount.Amount = i.Amount.Currency, i.Amount.String()
	if i.CreditorAccount != nil {
		d.CreditorAccount = &ibanRef{IBAN: i.CreditorAccount.IBAN}
	}
	if i.DebtorAccount != nil {
		d.DebtorAccount = &ibanRef{IBAN: i.DebtorAccount.IBAN}
	}
	return d
}

// paymentInitiation is one RFC 9396 authorization detail of type
// payment_initiation, as the BFF asks for it and as the provider grants it.
type paymentInitiation struct {
	Type             string `json:"type"`
	InstructedAmount struct {
		Currency string `json:"currency"`
		Amount   string `json:"amount"`
	} `json:"instructedAmount"`
	CreditorName                      string   `json:"creditorName,omitempty"`
	MerchantID                        string   `json:"merchantId,omitempty"`
	CreditorAccount                   *ibanRef `json:"creditorAccount,omitempty"`
	DebtorAccount                     *ibanRef `json:"debtorAccount,omitempty"`
	RemittanceInformationUnstructured string   `json:"remittanceInformationUnstructured,omitempty"`
}

type ibanRef struct {
	IBAN string `json:"iban"`
}

// repointed is the granted detail got with the payee of want: the name too
// when the payment names none of its own (it showed the merchant's), so
// an approval that differs from want only in where the money goes (the
// merchant renamed or re-pointed since it was shown) is told apart from
// one of another payment.
func repointed(got, want paymentInitiation, c Content) paymentInitiation {
	if c.Info.CreditorName == "" {
		got.CreditorName = want.CreditorName
	}
	got.CreditorAccount = want.CreditorAccount
	return got
}

// grantedDetail reads the granted authorization_details: exactly one
// payment_initiation, with no member the BFF did not ask for.
func grantedDetail(granted json.RawMessage) (paymentInitiation, bool) {
	var list []json.RawMessage
	if json.Unmarshal(granted, &list) != nil {
		return paymentInitiation{}, false
	}
	var found json.RawMessage
	for _, raw := range list {
		var head struct{ Type string }
		if json.Unmarshal(raw, &head) == nil && head.Type == DetailType {
			if found != nil {
				return paymentInitiation{}, false
			}
			found = raw
		}
	}
	if found == nil {
		return paymentInitiation{}, false
	}
	var got paymentInitiation
	d := json.NewDecoder(bytes.NewReader(found))
	d.DisallowUnknownFields()
	if d.Decode(&got) != nil {
		return paymentInitiation{}, false
	}
	return got, true
}

// sameDetail reports whether got is want: every text equal, the amount
// equal to the minor unit (read exactly from its decimal text, never
// through a float).
func sameDetail(got, want paymentInitiation) bool {
	amount := money.ReadAmount(got.InstructedAmount.Amount, got.InstructedAmount.Currency)
	wantAmount, err := money.ParseAmount(want.InstructedAmount.Amount, want.InstructedAmount.Currency)
	if err != nil || !amount.Exact || amount.Amount != wantAmount || got.InstructedAmount.Currency != want.InstructedAmount.Currency {
		return false
	}
	return got.Type == want.Type && got.CreditorName == want.CreditorName && got.MerchantID == want.MerchantID &&
		sameIBAN(got.CreditorAccount, want.CreditorAccount) && sameIBAN(got.DebtorAccount, want.DebtorAccount) &&
		got.RemittanceInformationUnstructured == want.RemittanceInformationUnstructured
}

func sameIBAN(a, b *ibanRef) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.IBAN == b.IBAN
}

// expireHolds declines the holds that ran out, so their users' lists and
// streams say so without a repeat.
func (s *Service) expireHolds(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	n, err := s.holdsOf.ExpireHolds(lctx)
	cancel()
	if err != nil {
		s.log.Warn("the settler could not expire held payments", slog.String("error", err.Error()))
		return
	}
	for range n {
		s.observe.MoneyRequest(declinedResult(ledger.EndExpired))
	}
}
