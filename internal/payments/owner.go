package payments

import (
	"context"
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

// The owner of a claim sends its request: a snapshot of the user's
// payments first (what settling must never take for this request's), the
// durable send mark, then the one send, and its conclusion, each class of
// end one named phase. After an upstream 401 it settles, and sends once
// more only when settling concludes that the upstream made nothing.

// upstreamFailure are the types of the upstream's own 500 (docs/errors.md,
// "Codes passed on from the upstream"; docs/payments.md).
var upstreamFailure = map[proxy.ErrorType]bool{"INTERNAL_ERROR": true, "INTERNAL_SERVER_ERROR": true}

// refusedBeforeActing are the upstream's typed answers that say it did not
// act on the request (the provider down, a lock, the caller not verified
// or not allowed: docs/payments.md, "What a frontend does"): the key is
// given back and a repeat with it runs again.
var refusedBeforeActing = map[string]bool{
	problem.CodeProviderUnavailable: true, problem.CodeResourceLocked: true,
	problem.CodeMCPTemporarilyUnavail: true, problem.CodeMCPForbidden: true, problem.CodeMCPNoServiceOrg: true,
}

// OwnerLedger is what the owner of a claim needs of the ledger: the send
// mark (Sending) and its outcome (Finish, Release, Unknown).
type OwnerLedger interface {
	Sending(ctx context.Context, c *ledger.Claim, s ledger.SendEvidence) (bool, error)
	Finish(ctx context.Context, c *ledger.Claim, o ledger.Outcome) (bool, error)
	Release(ctx context.Context, c *ledger.Claim, o ledger.Outcome) (bool, error)
	Unknown(ctx context.Context, c *ledger.Claim, o ledger.Outcome) (bool, error)
}

// owners is what every claim's owner shares: the upstream, its slice of
// the ledger, the evidence, the upstream timeout. The money path runs its
// new claims through it, and Holds its approved ones. Safe for concurrent
// use.
type owners struct {
	base
	ledger   OwnerLedger
	evidence *evidence
	timeout  time.Duration // the upstream timeout: a request's sends end within it
}

// newOwners returns the owners that mark and store through led.
func newOwners(b base, led OwnerLedger, ev *evidence, timeout time.Duration) *owners {
	return &owners{base: b, ledger: led, evidence: ev, timeout: timeout}
}

// run sends m, whose claim it holds, as its owner, and writes the answer
// to w. ctx bounds the upstream work; bg the ledger writes after it.
func (s *owners) run(ctx, bg context.Context, w http.ResponseWriter, m *moneyCall) (labels, *problem.Problem) {
	return (&owner{owners: s, ctx: ctx, bg: bg, w: w, m: m}).run()
}

// sendApproved sends an approved hold, whose claim m holds, as its owner
// (Holds' sender): the answer is stored, never written to a client.
func (s *owners) sendApproved(bg context.Context, m *moneyCall) *problem.Problem {
	ctx, cancel := context.WithTimeout(bg, s.timeout)
	defer cancel()
	_, p := s.run(ctx, bg, &recorder{header: http.Header{}}, m)
	return p
}

// labels is what the edge learns of a money request for its metrics.
type labels struct {
	upstreamStatus int    // the last upstream status; 0 when none
	replayedCode   string // the code of a stored refusal replayed
}

// errClaimLost is the send mark's failure when the claim ran out before
// the send: another request or the recoverer has it now, and nothing was
// sent.
var errClaimLost = errors.New("the claim ran out before the send")

// owner is one claim's owner at work. ctx bounds the upstream work; bg
// (the request's values, never its cancellation) the ledger writes after
// it.
type owner struct {
	owners  *owners
	ctx, bg context.Context
	w       http.ResponseWriter
	m       *moneyCall
	snap    ledger.SendEvidence
	sends   int // the sends made so far
}

// sent is one send's end: the reply, and the failure the client is told.
type sent struct {
	rep  proxy.Reply
	p    *problem.Problem
	code string // p's code; "" when none
}

// run sends, and concludes each send, until a phase concludes for good.
func (o *owner) run() (labels, *problem.Problem) {
	if o.m.creates {
		o.snap = o.owners.evidence.snapshot(o.ctx, o.m.call, o.m.wanted())
	}
	for {
		o.sends++
		s := o.send()
		if again, p := o.conclude(s); !again {
			return labels{upstreamStatus: s.rep.Status}, p
		}
	}
}

// send makes the one send, the mark written just before it.
func (o *owner) send() sent {
	m := o.m
	rep, p := o.owners.up.Exchange(o.ctx, proxy.Exchange{
		Call: m.call, Target: m.target, Method: m.method, RawQuery: m.rawQuery,
		Header: m.header, Body: m.body, Once: true, BeforeSend: o.mark,
	})
	s := sent{rep: rep, p: p}
	if p != nil {
		s.code = p.Code
	}
	return s
}

// mark is the durable mark written just before the send (BeforeSend): a
// claim whose owner dies before it provably sent nothing. A claim that is
// no longer the owner's fails it with errClaimLost.
func (o *owner) mark(ctx context.Context) error {
	ok, err := withLedger(ctx, func(ctx context.Context) (bool, error) {
		return o.owners.ledger.Sending(ctx, o.m.claim, o.snap)
	})
	if err != nil {
		o.owners.observe.MoneyRequest(MoneyLedgerUnavailable)
		return o.owners.shed("payments cannot be recorded right now; nothing was sent, retry with the same Idempotency-Key", err)
	}
	if !ok {
		p := problem.Wrap(problem.CodeLedgerUnavailable, "this payment's claim ran out before it could be sent; nothing was sent, retry with the same Idempotency-Key", errClaimLost)
		p.RetryAfter = "1"
		return p
	}
	return nil
}

// conclude names the class of the send's end and runs its phase: again
// asks for one more send.
func (o *owner) conclude(s sent) (again bool, p *problem.Problem) {
	rep := s.rep
	switch {
	case s.p != nil && errors.Is(s.p, errClaimLost):
		// Another request or the recoverer has the claim now, and nothing
		// was sent.
		o.owners.observe.MoneyRequest(MoneyClaimLost)
		return false, s.p
	case !rep.Sent:
		return false, o.giveBack(ledger.EndNotSent, s)
	case rep.Answered() && rep.Status == http.StatusUnauthorized:
		return o.afterUnauthorized(s)
	case rep.Answered() && refusedBeforeActing[s.code]:
		return false, o.giveBack(ledger.EndRefused, s)
	case rep.Answered() && rep.Status < 500:
		return false, o.keepAnswer(s)
	case rep.Answered() && rep.Status == http.StatusInternalServerError && upstreamFailure[rep.Type]:
		return false, o.afterUpstreamFailure(s)
	}
	return false, o.afterLostAnswer(s)
}

// afterUnauthorized: the upstream refused the token after receiving the
// send. Settling decides: made, or not made (sent once more with a fresh
// token, a fresh snapshot and a fresh mark, once), or unknown.
func (o *owner) afterUnauthorized(s sent) (again bool, p *problem.Problem) {
	res := o.settle(true)
	if res.Conclusion == NotMade && o.sends == 1 && o.ctx.Err() == nil {
		o.owners.observe.MoneyRequest(MoneyResentAfter401)
		if o.snap = o.owners.evidence.snapshot(o.ctx, o.m.call, o.m.wanted()); !o.snap.Snapshot {
			return false, o.unknown(s)
		}
		return true, nil
	}
	return false, o.concluded(res, s, ledger.EndRefused)
}

// keepAnswer stores the upstream's answer (below 500) for every repeat of
// the key: its success, written to the client, or its refusal, kept as
// the client sees it (the caller renders the same problem for this
// request id).
func (o *owner) keepAnswer(s sent) *problem.Problem {
	m := o.m
	answer := &recorder{header: http.Header{}}
	out := ledger.Outcome{Ending: ledger.EndAnswered, UpstreamStatus: s.rep.Status}
	if s.p != nil {
		problem.Write(answer, s.p, m.call.RequestID)
	} else {
		answer.write(s.rep.Status, s.rep.Header, s.rep.Body)
		if m.method == http.MethodPost && !strings.HasPrefix(m.target.Path, merchantsPath) {
			out.PaymentID = paymentID(s.rep.Body) // a merchant's id is no payment to follow
		}
	}
	out.Response = answer.response()
	o.store(MoneyAnswered, out, o.owners.ledger.Finish)
	if s.p == nil {
		answer.copyTo(o.w)
	}
	return s.p
}

// afterUpstreamFailure: the upstream's own error body (its documented
// 500), which it documents as a request that failed. A creation is given
// back only when settling concludes "not made"; an init of an existing
// payment creates nothing, and rests on the upstream's word. A gateway's
// 5xx, whatever its body, is no such word (afterLostAnswer).
func (o *owner) afterUpstreamFailure(s sent) *problem.Problem {
	if !o.m.creates {
		return o.giveBack(ledger.EndFailed, s)
	}
	return o.concluded(o.settle(true), s, ledger.EndFailed)
}

// afterLostAnswer: a timeout, a hang-up, a gateway's 5xx, a reply cut or
// too large to keep. The upstream may still be acting; only its payment
// list can tell, and only "made" can be concluded now.
func (o *owner) afterLostAnswer(s sent) *problem.Problem {
	if res := o.settle(false); res.Conclusion == Made {
		return o.concluded(res, s, "")
	}
	return o.unknown(s)
}

// settle settles this claim's request now; answered: the upstream
// answered the send, so it is no longer acting.
func (o *owner) settle(answered bool) Result {
	m := o.m
	return o.owners.evidence.settle(o.bg, m.call, subject{id: m.claim.ID, content: m.req.Content,
		claimedAt: m.claim.ClaimedAt, snapshot: o.snap, answered: answered})
}

// concluded stores what settling concluded on the owner's claim, the
// evidence's one way (evidence.store): made, the settled answer, written
// to the client; not made, the key given back (ending says how it is
// known); unknown, the outcome unknown.
func (o *owner) concluded(res Result, s sent, ending string) *problem.Problem {
	if res.Conclusion == Unknown {
		return o.unknown(s)
	}
	_, _ = o.owners.evidence.store(o.bg, claimSite{o: o, s: s, ending: ending}, o.m.target.Path, s.rep.Status, res)
	if res.Conclusion == Made {
		return nil
	}
	return s.p
}

// claimSite is the owner's claim as the site of a conclusion: made
// finishes it with the settled answer and writes that to the client, not
// made gives the key back. Both store as the owner stores (store), so
// they report applied.
type claimSite struct {
	o      *owner
	s      sent
	ending string
}

func (c claimSite) made(_ context.Context, out ledger.Outcome) (bool, error) {
	c.o.store(MoneySettled, out, c.o.owners.ledger.Finish)
	fromResponse(out.Response).copyTo(c.o.w)
	return true, nil
}

func (c claimSite) notMade(context.Context) (bool, error) {
	c.o.giveBack(c.ending, c.s)
	return true, nil
}

// giveBack gives the key back: the upstream surely did not act (ending
// says how it is known), and a repeat runs again.
func (o *owner) giveBack(ending string, s sent) *problem.Problem {
	o.store(MoneyReleased, ledger.Outcome{Ending: ending, UpstreamStatus: s.rep.Status}, o.owners.ledger.Release)
	return s.p
}

// unknown records that the outcome cannot be known now: the key is never
// sent again, and the recoverer keeps looking.
func (o *owner) unknown(s sent) *problem.Problem {
	o.store(MoneyUnknownToSender, ledger.Outcome{Ending: ledger.EndAmbiguous, UpstreamStatus: s.rep.Status}, o.owners.ledger.Unknown)
	return unknownAnswer(s.code, s.rep.Status)
}

// store stores how the owner's request ended, trying again while the
// ledger does not answer within ownerMargin. Should it never land, the
// claim stays in flight, the recoverer ends it at its deadline (unknown:
// it was marked) and settles it from the upstream: never run twice.
func (o *owner) store(result MoneyResult, out ledger.Outcome, write func(context.Context, *ledger.Claim, ledger.Outcome) (bool, error)) {
	o.owners.observe.MoneyRequest(result)
	ctx, cancel := context.WithTimeout(o.bg, ownerMargin)
	defer cancel()
	log := o.owners.log.With(slog.String("requestId", o.m.call.RequestID), slog.String("outcome", string(result)))
	for delay := 100 * time.Millisecond; ; delay *= 2 {
		wctx, wcancel := context.WithTimeout(ctx, ledgerTimeout)
		applied, err := write(wctx, o.m.claim, out)
		wcancel()
		switch {
		case err == nil && !applied:
			// Past its deadline, the record was ended without the owner
			// (and maybe settled): the owner's answer, the upstream's own,
			// is what the client gets; the ledger keeps its own.
			log.Error("a payment's outcome arrived after its record was ended by another request or the recoverer; the client gets the upstream's answer, compare it with the ledger's")
			return
		case err == nil:
			return
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			log.Error("a payment's outcome could not be written to the ledger; the recoverer ends it at its deadline", slog.String("error", err.Error()))
			return
		}
	}
}

// unknownAnswer is the answer when the upstream may or may not have acted
// (502 PAYMENT_OUTCOME_UNKNOWN), to its sender or to a repeat of its key.
func unknownAnswer(code string, status int) *problem.Problem {
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
