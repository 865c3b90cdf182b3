package payments

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
)

// Claims is what the money path needs of the ledger (docs/payments.md, "How
// it is built"): the claim, the send mark (Sending), the owner's outcome
// (Finish, Release, Unknown), a claim ended past its deadline (Abandon), and
// the audit trail of a repeat (Event).
type Claims interface {
	Claim(ctx context.Context, req ledger.Request, bound time.Duration) (*ledger.Claim, *ledger.Record, error)
	Sending(ctx context.Context, c *ledger.Claim, s ledger.SendEvidence) (bool, error)
	Finish(ctx context.Context, c *ledger.Claim, o ledger.Outcome) (bool, error)
	Release(ctx context.Context, c *ledger.Claim, o ledger.Outcome) (bool, error)
	Unknown(ctx context.Context, c *ledger.Claim, o ledger.Outcome) (bool, error)
	Abandon(ctx context.Context, id int64) (ledger.State, error)
	Event(ctx context.Context, id int64, req ledger.Request, what string) error
}

var (
	_ Claims = (*ledger.Postgres)(nil)
	_ Claims = (*ledger.Memory)(nil)
)

// MaxKeyLen bounds an Idempotency-Key.
const MaxKeyLen = 255

// ownerMargin is how long after its upstream deadline the owner of a claim
// may still be storing its outcome. A claim's deadline is the upstream
// timeout plus this: past it, the owner can no longer reach the upstream,
// so another request (or the settler) may end the claim.
const ownerMargin = 5 * time.Second

// ledgerTimeout bounds each ledger call: a database that does not answer
// fails the payment with a clear 503 before anything is sent. storeTimeout
// bounds the credit guard's give-back to Redis the same way.
const (
	ledgerTimeout = 3 * time.Second
	storeTimeout  = 3 * time.Second
)

// replayHeaders are the response headers kept with a stored response.
var replayHeaders = []string{"Content-Type", "Location", "Retry-After", "Allow", "Cache-Control", "X-Request-Id"}

// upstreamFailure are the types of the upstream's own 500 (docs/errors.md,
// "Codes passed on from the upstream"; docs/payments.md).
var upstreamFailure = map[string]bool{"INTERNAL_ERROR": true, "INTERNAL_SERVER_ERROR": true}

// refusedBeforeActing are the upstream's typed answers that say it did not
// act on the request (the provider down, a lock, the caller not verified
// or not allowed: docs/payments.md, "What a frontend does"): the key is given back and a repeat
// with it runs again.
var refusedBeforeActing = map[string]bool{
	problem.CodeProviderUnavailable: true, problem.CodeResourceLocked: true,
	problem.CodeMCPTemporarilyUnavail: true, problem.CodeMCPForbidden: true, problem.CodeMCPNoServiceOrg: true,
}

// ValidKey reports whether an Idempotency-Key is acceptable: 1 to 255
// printable ASCII characters, no comma (a comma-joined header is several
// keys, RFC 9110 5.3).
func ValidKey(k string) bool {
	if len(k) == 0 || len(k) > MaxKeyLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e || k[i] == ',' {
			return false
		}
	}
	return true
}

// idempotencyKey reads the request's one Idempotency-Key.
func idempotencyKey(h http.Header) (string, *problem.Problem) {
	vs := h.Values("Idempotency-Key")
	switch {
	case len(vs) == 0 || (len(vs) == 1 && vs[0] == ""):
		return "", problem.New(problem.CodeIdempotencyKeyRequired, "send an Idempotency-Key header (a fresh random value per payment, kept across its retries)")
	case len(vs) > 1:
		return "", problem.New(problem.CodeIdempotencyKeyInvalid, "send one Idempotency-Key header, not several")
	case strings.Contains(vs[0], ","):
		return "", problem.New(problem.CodeIdempotencyKeyInvalid, "the Idempotency-Key header holds several keys; send one")
	case !ValidKey(vs[0]):
		return "", problem.New(problem.CodeIdempotencyKeyInvalid, "the Idempotency-Key must be 1 to 255 printable ASCII characters")
	}
	return vs[0], nil
}

// fingerprint identifies a request: method, path, query and body (on the
// creation and the init, the body as the BFF read it: two bodies that are
// the same payment are the same request).
func fingerprint(method, path, query string, body []byte) []byte {
	h := sha256.New()
	for _, s := range []string{method, path, query} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	h.Write(body)
	return h.Sum(nil)
}

// labels is what the edge learns of a money request for its metrics.
type labels struct {
	upstreamStatus int    // the last upstream status; 0 when none
	replayedCode   string // the code of a stored refusal replayed
}

// moneyCall is one money-moving request that won its claim. It keeps what
// its sends need of the client's request, never the request itself (whose
// context is the client's connection: the payment is detached from it).
type moneyCall struct {
	call     proxy.Call
	target   proxy.Target
	rawQuery string
	header   http.Header // the client's; proxy sends only the allowlisted ones
	req      ledger.Request
	claim    *ledger.Claim
	body     []byte // what is sent: the model's encoding on the creation and the init
	creates  bool   // it asks the upstream to create a payment: settled from its list
	// content is what it asks the upstream to create, as read (nil Info
	// when it came from a record: wanted reads the record's).
	content Content
	// method is what is sent: a POST, but for a held change of a merchant.
	method string
	// rawFingerprint is the fingerprint of the client's own bytes: a
	// record claimed by a version that fingerprinted those is the same
	// request.
	rawFingerprint []byte
}

// pay runs a money-moving POST at most once per key: claimed in the ledger
// before anything is sent, marked durably just before the one send, never
// sent again after an end the BFF cannot read.
func (s *Service) pay(w http.ResponseWriter, r *http.Request, c proxy.Call, t proxy.Target, route string) (labels, *problem.Problem) {
	body, p := s.up.Body(r) // 413 BODY_TOO_LARGE first, as on every route
	if p != nil {
		return labels{}, p
	}
	key, p := idempotencyKey(r.Header)
	if p != nil {
		if p.Code == problem.CodeIdempotencyKeyRequired {
			s.observe.MoneyRequest(MoneyKeyRequired)
		} else {
			s.observe.MoneyRequest(MoneyKeyInvalid)
		}
		return labels{}, p
	}
	path, ok := canonicalPath(t.Path)
	if !ok {
		s.observe.MoneyRequest(MoneyRouteRefused)
		return labels{}, problem.New(problem.CodeRouteNotFound, "the upstream defines no money-moving endpoint at this path; nothing was sent")
	}
	t.Path = path
	if p := readable(r.Header, body); p != nil {
		s.observe.MoneyRequest(MoneyBodyRefused)
		return labels{}, p
	}
	header := r.Header
	rawFingerprint := fingerprint(r.Method, t.Path, r.URL.RawQuery, body)
	var content Content
	if path == creationPath || path == initPath {
		// The BFF sends what it read: the body is decoded once into the
		// model, and from here on everything (the record, the comparisons,
		// a hold, the send) uses its canonical encoding, never the
		// client's bytes.
		if p := noQuery(r.URL); p != nil {
			s.observe.MoneyRequest(MoneyBodyRefused)
			return labels{}, p
		}
		if p := checkMediaType(r.Header); p != nil {
			s.observe.MoneyRequest(MoneyBodyRefused)
			return labels{}, p
		}
		read, p := readBody(path, body)
		if p != nil {
			s.observe.MoneyRequest(MoneyBodyRefused)
			return labels{}, p
		}
		body, content = read.Encode(), contentOf(read)
		header = r.Header.Clone()
		header.Set("Content-Type", "application/json")
	}
	creates := content.Info != nil
	req := ledger.Request{
		UserID: c.UserID, Route: route, Key: key, Fingerprint: fingerprint(r.Method, t.Path, r.URL.RawQuery, body),
		SessionRef: c.SessionRef, ClientIP: c.ClientIP, RequestID: c.RequestID,
	}
	if creates {
		req.Content = content.Encode()
	}
	if creates && s.holds(route, content) {
		req.Held, _ = json.Marshal(heldRequest{Path: path, Route: t.Route, Query: r.URL.RawQuery, Body: body})
	}
	// The payment is detached from the client: a mobile app that loses its
	// connection mid-payment finds the outcome stored when it retries. Its
	// deadline starts before the claim, so the claim's deadline (the same
	// timeout plus ownerMargin, on the database's clock) comes later.
	bg := context.WithoutCancel(r.Context())
	ctx, cancel := context.WithTimeout(bg, s.timeout)
	defer cancel()
	m := &moneyCall{call: c, target: t, rawQuery: r.URL.RawQuery, header: header, req: req, body: body,
		creates: creates, content: content, method: http.MethodPost, rawFingerprint: rawFingerprint}
	if req.Held != nil {
		return s.hold(ctx, bg, w, m)
	}
	claim, rec, err := s.claim(bg, req)
	switch {
	case err != nil:
		return labels{}, s.ledgerFailed(c, err)
	case rec != nil:
		return s.answerRepeat(ctx, bg, w, m, rec)
	}
	m.claim = claim
	return s.sendAsOwner(ctx, bg, w, m)
}

// hold claims a request held for the user's approval (m.req.Held): it is
// recorded, not sent, and answered 401 STEP_UP_REQUIRED; a repeat of its
// key gets what became of it.
func (s *Service) hold(ctx, bg context.Context, w http.ResponseWriter, m *moneyCall) (labels, *problem.Problem) {
	claim, rec, err := s.claim(bg, m.req)
	switch {
	case err != nil:
		return labels{}, s.ledgerFailed(m.call, err)
	case rec != nil:
		return s.answerRepeat(ctx, bg, w, m, rec)
	}
	s.observe.MoneyRequest(MoneyHeld)
	return labels{}, s.stepUpRequired(m.req.UserID, m.req.SessionRef, claim.ID, claim.ClaimedAt.Add(s.stepUp.HoldFor))
}

func (s *Service) claim(ctx context.Context, req ledger.Request) (*ledger.Claim, *ledger.Record, error) {
	lctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	defer cancel()
	bound := s.timeout + ownerMargin
	if req.Held != nil {
		bound = s.stepUp.HoldFor
	}
	return s.claims.Claim(lctx, req, bound)
}

// sendAsOwner sends the claimed request: a snapshot of the user's payments first
// (what settling must never take for this request's), the durable mark,
// then the one send, and its conclusion. ctx bounds the upstream work; bg
// (the request's values, never its cancellation) the ledger writes after
// it. After an upstream 401 it settles, and sends once more only when
// settling concludes that the upstream made nothing.
func (s *Service) sendAsOwner(ctx, bg context.Context, w http.ResponseWriter, m *moneyCall) (labels, *problem.Problem) {
	var snap ledger.SendEvidence
	if m.creates {
		snap = s.snapshot(ctx, m.call, m.wanted())
	}
	// answered: the upstream answered the send, so it is no longer acting.
	subjectNow := func(answered bool) subject {
		return subject{id: m.claim.ID, content: m.req.Content, claimedAt: m.claim.ClaimedAt, snapshot: snap, answered: answered}
	}
	for sends := 1; ; sends++ {
		lost := false
		rep, p := s.up.Exchange(ctx, proxy.Exchange{
			Call: m.call, Target: m.target, Method: m.method, RawQuery: m.rawQuery,
			Header: m.header, Body: m.body, Once: true, BeforeSend: s.sendMark(m.claim, snap, &lost),
		})
		out := labels{upstreamStatus: rep.Status}
		code := ""
		if p != nil {
			code = p.Code
		}
		switch {
		case lost:
			// The claim ran out before the send: another request or the
			// settler has it now, and nothing was sent.
			s.observe.MoneyRequest(MoneyClaimLost)
			return out, p
		case !rep.Sent:
			s.storeOutcome(bg, m, MoneyReleased, ledger.Outcome{Ending: ledger.EndNotSent, UpstreamStatus: rep.Status}, s.claims.Release)
			return out, p
		case rep.Answered() && rep.Status == http.StatusUnauthorized:
			res := s.settle(bg, m.call, subjectNow(true))
			switch {
			case res.Conclusion == Made:
				return out, s.answerSettled(bg, w, m, settledAnswer(m.target.Path, res.Payment), rep.Status)
			case res.Conclusion == NotMade && sends == 1 && ctx.Err() == nil:
				// The upstream refused the token and made nothing: one more
				// send, with a fresh token (the transport dropped the
				// refused one), a fresh snapshot and a fresh mark.
				s.observe.MoneyRequest(MoneyResentAfter401)
				if snap = s.snapshot(ctx, m.call, m.wanted()); !snap.Snapshot {
					return out, s.storeUnknown(bg, m, rep.Status, code)
				}
				continue
			case res.Conclusion == NotMade:
				s.storeOutcome(bg, m, MoneyReleased, ledger.Outcome{Ending: ledger.EndRefused, UpstreamStatus: rep.Status}, s.claims.Release)
				return out, p
			}
			return out, s.storeUnknown(bg, m, rep.Status, code)
		case rep.Answered() && refusedBeforeActing[code]:
			s.storeOutcome(bg, m, MoneyReleased, ledger.Outcome{Ending: ledger.EndRefused, UpstreamStatus: rep.Status}, s.claims.Release)
			return out, p
		case rep.Answered() && rep.Status < 500:
			answer := &recorder{header: http.Header{}}
			o := ledger.Outcome{Ending: ledger.EndAnswered, UpstreamStatus: rep.Status}
			if p != nil {
				// The upstream's refusal, kept as the client sees it (the
				// caller renders the same problem for this request id) so
				// that a repeat replays it.
				problem.Write(answer, p, m.call.RequestID)
			} else {
				answer.write(rep.Status, rep.Header, rep.Body)
				if m.method == http.MethodPost && !strings.HasPrefix(m.target.Path, merchantsPath) {
					o.PaymentID = paymentID(rep.Body) // a merchant's id is no payment to follow
				}
			}
			o.Response = answer.response()
			s.storeOutcome(bg, m, MoneyAnswered, o, s.claims.Finish)
			if p == nil {
				answer.copyTo(w)
			}
			return out, p
		case rep.Answered() && rep.Status == http.StatusInternalServerError && upstreamFailure[rep.Type]:
			// The upstream's own error body (its documented 500), which it
			// documents as a request that failed. A
			// creation is given back only when settling concludes "not
			// made"; an init of an existing payment creates nothing, and
			// rests on the upstream's word. A gateway's 5xx, whatever its
			// body, is no such word.
			if !m.creates {
				s.storeOutcome(bg, m, MoneyReleased, ledger.Outcome{Ending: ledger.EndFailed, UpstreamStatus: rep.Status}, s.claims.Release)
				return out, p
			}
			res := s.settle(bg, m.call, subjectNow(true))
			switch res.Conclusion {
			case Made:
				return out, s.answerSettled(bg, w, m, settledAnswer(m.target.Path, res.Payment), rep.Status)
			case NotMade:
				s.storeOutcome(bg, m, MoneyReleased, ledger.Outcome{Ending: ledger.EndFailed, UpstreamStatus: rep.Status}, s.claims.Release)
				return out, p
			}
			return out, s.storeUnknown(bg, m, rep.Status, code)
		}
		// A timeout, a hang-up, a gateway's 5xx, a reply cut or too large
		// to keep: the upstream may still be acting; only its payment list
		// can tell, and only "made" can be concluded now.
		if res := s.settle(bg, m.call, subjectNow(false)); res.Conclusion == Made {
			return out, s.answerSettled(bg, w, m, settledAnswer(m.target.Path, res.Payment), rep.Status)
		}
		return out, s.storeUnknown(bg, m, rep.Status, code)
	}
}

// sendMark is the durable mark written just before the send (BeforeSend): a
// claim whose owner dies before it provably sent nothing. lost is set when
// the claim was no longer the owner's to send.
func (s *Service) sendMark(claim *ledger.Claim, ev ledger.SendEvidence, lost *bool) func(context.Context) error {
	return func(ctx context.Context) error {
		lctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
		defer cancel()
		ok, err := s.claims.Sending(lctx, claim, ev)
		if err != nil {
			s.observe.MoneyRequest(MoneyLedgerUnavailable)
			return problem.Wrap(problem.CodeLedgerUnavailable, "payments cannot be recorded right now; nothing was sent, retry with the same Idempotency-Key", err)
		}
		if !ok {
			*lost = true
			p := problem.New(problem.CodeLedgerUnavailable, "this payment's claim ran out before it could be sent; nothing was sent, retry with the same Idempotency-Key")
			p.RetryAfter = "1"
			return p
		}
		return nil
	}
}

// answerSettled stores the settled answer of a payment settling proved
// made, and writes it.
func (s *Service) answerSettled(bg context.Context, w http.ResponseWriter, m *moneyCall, o ledger.Outcome, status int) *problem.Problem {
	o.UpstreamStatus = status
	s.storeOutcome(bg, m, MoneySettled, o, s.claims.Finish)
	fromResponse(o.Response).copyTo(w)
	return nil
}

// storeUnknown records that the outcome cannot be known now: the key is
// never sent again, and the settler keeps looking.
func (s *Service) storeUnknown(bg context.Context, m *moneyCall, status int, code string) *problem.Problem {
	s.storeOutcome(bg, m, MoneyUnknown, ledger.Outcome{Ending: ledger.EndAmbiguous, UpstreamStatus: status}, s.claims.Unknown)
	return outcomeUnknown(code, status)
}

// storeOutcome stores how the owner's request ended, trying again while the
// ledger does not answer within ownerMargin. Should it never land, the
// claim stays in flight, the settler ends it at its deadline (unknown: it
// was marked) and settles it from the upstream: never run twice.
func (s *Service) storeOutcome(bg context.Context, m *moneyCall, result MoneyResult, o ledger.Outcome, write func(context.Context, *ledger.Claim, ledger.Outcome) (bool, error)) {
	s.observe.MoneyRequest(result)
	ctx, cancel := context.WithTimeout(bg, ownerMargin)
	defer cancel()
	delay := 100 * time.Millisecond
	for {
		wctx, wcancel := context.WithTimeout(ctx, ledgerTimeout)
		applied, err := write(wctx, m.claim, o)
		wcancel()
		if err == nil {
			if !applied {
				// Past its deadline, the record was ended without the owner
				// (and maybe settled): the owner's answer, the upstream's
				// own, is what the client gets; the ledger keeps its own.
				s.log.Error("a payment's outcome arrived after its record was ended by another request or the settler; the client gets the upstream's answer, compare it with the ledger's",
					slog.String("requestId", m.call.RequestID), slog.String("outcome", string(result)))
			}
			return
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			s.log.Error("a payment's outcome could not be written to the ledger; the settler ends it at its deadline",
				slog.String("requestId", m.call.RequestID), slog.String("outcome", string(result)), slog.String("error", err.Error()))
			return
		}
		delay *= 2
	}
}

// answerRepeat answers a request whose key another request already claimed: the
// stored answer written to w, or the failure. A claim whose owner died
// before its send mark, or an unknown outcome that settling now concludes
// was not made, is given back and run here.
func (s *Service) answerRepeat(ctx, bg context.Context, w http.ResponseWriter, m *moneyCall, rec *ledger.Record) (labels, *problem.Problem) {
	event := func(id int64, what string) {
		s.observe.MoneyRequest(MoneyResult(what)) // the audit event's word is the result's
		ectx, cancel := context.WithTimeout(bg, ledgerTimeout)
		defer cancel()
		if err := s.claims.Event(ectx, id, m.req, what); err != nil {
			s.log.Warn("a payment's audit event could not be written", slog.String("requestId", m.call.RequestID), slog.String("error", err.Error()))
		}
	}
	// runAgain claims the given-back key and runs it; rec is what stands
	// instead when another request claimed it first.
	runAgain := func() (bool, labels, *problem.Problem) {
		claim, next, err := s.claim(bg, m.req)
		if err != nil {
			return true, labels{}, s.ledgerFailed(m.call, err)
		}
		switch {
		case claim != nil && m.req.Held != nil:
			// Claimed again for the user's approval: held, not sent.
			s.observe.MoneyRequest(MoneyHeld)
			return true, labels{}, s.stepUpRequired(m.req.UserID, m.req.SessionRef, claim.ID, claim.ClaimedAt.Add(s.stepUp.HoldFor))
		case claim != nil:
			m.claim = claim
			out, p := s.sendAsOwner(ctx, bg, w, m)
			return true, out, p
		}
		rec = next
		return false, labels{}, nil
	}
	for tries := 0; tries < 3; tries++ {
		switch {
		case !m.sameRequest(rec):
			event(rec.ID, ledger.EventReused)
			return labels{}, problem.New(problem.CodeIdempotencyKeyReused, "this Idempotency-Key was used for a different request")
		case rec.State == ledger.StateAwaiting && (rec.Expired || s.stepUp == nil):
			// Past its time, or held under a step-up policy since turned
			// off (no approval can come): declined, never sent. When
			// another request ended it meanwhile, read what it became.
			ending := ledger.EndExpired
			if !rec.Expired {
				ending = ledger.EndWithdrawn
			}
			if s.decline(bg, rec.ID, ending) {
				event(rec.ID, ledger.EventReplayed)
				return labels{replayedCode: problem.CodeStepUpDeclined}, declined(ending)
			}
			if done, out, p := runAgain(); done {
				return out, p
			}
			continue
		case rec.State == ledger.StateAwaiting:
			event(rec.ID, ledger.EventHeld)
			return labels{}, s.stepUpRequired(rec.UserID, rec.SessionRef, rec.ID, rec.Deadline)
		case rec.State == ledger.StateDeclined:
			event(rec.ID, ledger.EventReplayed)
			return labels{replayedCode: problem.CodeStepUpDeclined}, declined(rec.Ending)
		case rec.State == ledger.StateDone:
			event(rec.ID, ledger.EventReplayed)
			return labels{replayedCode: replay(w, rec.Response)}, nil
		case rec.State == ledger.StateInFlight && rec.Expired:
			// The owner is past its deadline: it died or hung, and can no
			// longer reach the upstream.
			lctx, cancel := context.WithTimeout(bg, ledgerTimeout)
			state, err := s.claims.Abandon(lctx, rec.ID)
			cancel()
			if err != nil {
				return labels{}, s.ledgerFailed(m.call, err)
			}
			if state == ledger.StateReleased {
				s.observe.MoneyRequest(MoneyReleasedUnsent)
			}
			if state == ledger.StateUnknown {
				rec.State = ledger.StateUnknown
				continue
			}
			// Given back (the owner never marked its send), or moved on
			// meanwhile: claim again.
			if done, out, p := runAgain(); done {
				return out, p
			}
			continue
		case rec.State == ledger.StateReleased:
			if done, out, p := runAgain(); done {
				return out, p
			}
			continue
		case rec.State == ledger.StateInFlight:
			event(rec.ID, ledger.EventInProgress)
			p := problem.New(problem.CodeIdempotencyInProgress, "a request with this Idempotency-Key is still being processed; retry shortly")
			p.RetryAfter = "1"
			return labels{}, p
		}
		// Unknown: settle it now.
		res := s.settle(bg, m.call, subjectOf(rec))
		lctx, cancel := context.WithTimeout(bg, ledgerTimeout)
		var applied bool
		var err error
		switch res.Conclusion {
		case Made:
			applied, err = s.settlements.Settle(lctx, rec.ID, settledAnswer(m.target.Path, res.Payment))
		case NotMade:
			applied, err = s.settlements.GiveBack(lctx, rec.ID)
		}
		cancel()
		switch {
		case err != nil:
			return labels{}, s.ledgerFailed(m.call, err)
		case res.Conclusion == Unknown:
			event(rec.ID, ledger.EventUnknown)
			return labels{}, outcomeUnknown("", rec.UpstreamStatus)
		case res.Conclusion == NotMade && applied:
			event(rec.ID, ledger.EventNotMade)
			if done, out, p := runAgain(); done {
				return out, p
			}
			continue
		case res.Conclusion == Made && applied:
			event(rec.ID, ledger.EventSettled)
			o := settledAnswer(m.target.Path, res.Payment)
			return labels{replayedCode: replay(w, o.Response)}, nil
		}
		// Another request or the settler ended it meanwhile: read it again
		// (and run it, when it was given back).
		if done, out, p := runAgain(); done {
			return out, p
		}
	}
	return labels{}, s.ledgerFailed(m.call, errors.New("a repeated payment's record kept changing under it"))
}

// wanted is what the request asks the upstream to create: as read, or
// from its record (an approved hold's).
func (m *moneyCall) wanted() Content {
	if m.content.Info != nil {
		return m.content
	}
	c, _ := ParseContent(m.req.Content)
	return c
}

// sameRequest reports whether rec was claimed by this same request: its
// fingerprint is this request's, or (a record an earlier version claimed)
// that of the client's own bytes, which is then the one to claim it by.
func (m *moneyCall) sameRequest(rec *ledger.Record) bool {
	if bytes.Equal(rec.Fingerprint, m.rawFingerprint) {
		m.req.Fingerprint = rec.Fingerprint
	}
	return bytes.Equal(rec.Fingerprint, m.req.Fingerprint)
}

// ledgerFailed is 503 LEDGER_UNAVAILABLE: nothing was sent upstream.
func (s *Service) ledgerFailed(c proxy.Call, err error) *problem.Problem {
	s.observe.MoneyRequest(MoneyLedgerUnavailable)
	s.log.Error("the payments ledger failed; the payment was not sent", slog.String("requestId", c.RequestID), slog.String("error", err.Error()))
	detail := "payments cannot be recorded right now; nothing was sent, retry with the same Idempotency-Key"
	if errors.Is(err, ledger.ErrUnreadable) {
		detail = "this payment's stored answer cannot be read right now; nothing was sent again"
	}
	return problem.Wrap(problem.CodeLedgerUnavailable, detail, err)
}

// outcomeUnknown is the answer when the upstream may or may not have acted.
func outcomeUnknown(code string, status int) *problem.Problem {
	detail := "the upstream may or may not have made this payment and it could not be confirmed; it will not be sent again. Check the payment list before making a new payment"
	switch {
	case code == problem.CodeUpstreamTimeout:
		detail = "the upstream did not answer in time; " + detail
	case status == http.StatusUnauthorized:
		detail = "the upstream refused the BFF's credentials after receiving this payment; " + detail
	case status >= 500:
		detail = "the upstream failed while handling this payment; " + detail
	}
	return problem.New(problem.CodePaymentOutcomeUnknown, detail)
}

// paymentID reads the id a 2xx money-moving reply names, for the audit.
func paymentID(body []byte) string {
	var v struct {
		ID        string `json:"id"`
		PaymentID string `json:"paymentId"`
	}
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	if v.ID != "" {
		return v.ID
	}
	return v.PaymentID
}
