package payments

import (
	"context"
	"errors"
	"net/http"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/problem"
)

// A repeat is a request whose key another request already claimed. Each
// ledger state it can meet is one named transition: most answer (the
// stored answer, or what became of the request); a claim given back, or
// one whose owner died before its send mark, or an unknown outcome that
// settling now proves not made, is claimed again and run here. A short
// loop drives them, since the record may move under it meanwhile.

// repeatTries bounds how often a repeat reads a record that moved under
// it before it gives up with 503.
const repeatTries = 3

// repeat is one repeated request at work; ctx and bg as the owner's.
type repeat struct {
	path    *MoneyPath
	ctx, bg context.Context
	w       http.ResponseWriter
	m       *moneyCall
}

// step is a transition's end: an answer, or next, the record to go on
// with.
type step struct {
	next *ledger.Record
	out  labels
	p    *problem.Problem
}

func answered(out labels, p *problem.Problem) step { return step{out: out, p: p} }

// answer answers the repeat that met rec.
func (r *repeat) answer(rec *ledger.Record) (labels, *problem.Problem) {
	for range repeatTries {
		st := r.at(rec)
		if st.next == nil {
			return st.out, st.p
		}
		rec = st.next
	}
	return labels{}, r.path.ledgerFailed(r.m.call.RequestID, errors.New("a repeated payment's record kept changing under it"))
}

// at is the transition from rec's state: one named transition each.
func (r *repeat) at(rec *ledger.Record) step {
	switch {
	case !r.m.sameRequest(rec):
		return r.reused(rec)
	case rec.State == ledger.StateAwaiting && r.path.holds.policy.lapsed(rec) != "":
		return r.lapsedHold(rec)
	case rec.State == ledger.StateAwaiting:
		return r.awaiting(rec)
	case rec.State == ledger.StateDeclined:
		return r.wasDeclined(rec)
	case rec.State == ledger.StateDone:
		return r.done(rec)
	case rec.State == ledger.StateInFlight && rec.Expired:
		return r.ownerGone(rec)
	case rec.State == ledger.StateInFlight:
		return r.inFlight(rec)
	case rec.State == ledger.StateReleased:
		return r.claimAgain()
	}
	return r.settleUnknown(rec)
}

// reused: the key was claimed by another request (another body, path or
// query): refused, never sent.
func (r *repeat) reused(rec *ledger.Record) step {
	r.event(rec, ledger.EventReused)
	return answered(labels{}, problem.New(problem.CodeIdempotencyKeyReused, "this Idempotency-Key was used for a different request"))
}

// awaiting: held for the user's approval, not sent; the answer says where
// to approve it.
func (r *repeat) awaiting(rec *ledger.Record) step {
	r.event(rec, ledger.EventHeld)
	return answered(labels{}, r.path.holds.policy.required(rec.UserID, rec.SessionRef, rec.ID, rec.Deadline))
}

// wasDeclined: held and never approved, so never sent; its refusal replayed.
func (r *repeat) wasDeclined(rec *ledger.Record) step {
	r.event(rec, ledger.EventReplayed)
	return answered(labels{replayedCode: problem.CodeStepUpDeclined}, declined(rec.Ending))
}

// done: the stored answer, replayed.
func (r *repeat) done(rec *ledger.Record) step {
	r.event(rec, ledger.EventReplayed)
	return answered(labels{replayedCode: replay(r.w, rec.Response)}, nil)
}

// inFlight: its owner is still at work, within its deadline: retry shortly.
func (r *repeat) inFlight(rec *ledger.Record) step {
	r.event(rec, ledger.EventInProgress)
	p := problem.New(problem.CodeIdempotencyInProgress, "a request with this Idempotency-Key is still being processed; retry shortly")
	p.RetryAfter = "1"
	return answered(labels{}, p)
}

// lapsedHold: a hold that can no longer be approved (Holds.lapsed) is
// declined, never sent. When another request ended it meanwhile, read
// what it became.
func (r *repeat) lapsedHold(rec *ledger.Record) step {
	ending := r.path.holds.policy.lapsed(rec)
	if r.path.holds.decline(r.bg, rec.ID, ending) {
		r.event(rec, ledger.EventReplayed)
		return answered(labels{replayedCode: problem.CodeStepUpDeclined}, declined(ending))
	}
	return r.claimAgain()
}

// ownerGone: the owner is past its deadline (it died or hung) and can no
// longer reach the upstream. Its claim is ended: given back when it never
// marked its send (then claimed again here), else unknown (then settled).
func (r *repeat) ownerGone(rec *ledger.Record) step {
	state, err := withLedger(r.bg, func(ctx context.Context) (ledger.State, error) {
		return r.path.ledger.Abandon(ctx, rec.ID)
	})
	switch {
	case err != nil:
		return answered(labels{}, r.path.ledgerFailed(r.m.call.RequestID, err))
	case state == ledger.StateUnknown:
		rec.State = ledger.StateUnknown
		return step{next: rec}
	case state == ledger.StateReleased:
		r.path.observe.MoneyRequest(MoneyReleasedUnsent)
	}
	// Given back, or moved on meanwhile: claim again.
	return r.claimAgain()
}

// settleUnknown settles an unknown outcome now: made replays the settled
// answer, not made gives the key back and runs it here, and unknown stays
// unknown.
func (r *repeat) settleUnknown(rec *ledger.Record) step {
	ev := r.path.evidence
	res := ev.settle(r.bg, r.m.call, subjectOf(rec))
	applied, err := ev.store(r.bg, ev.unknown(rec), r.m.target.Path, rec.UpstreamStatus, res)
	switch {
	case err != nil:
		return answered(labels{}, r.path.ledgerFailed(r.m.call.RequestID, err))
	case res.Conclusion == Unknown:
		r.event(rec, ledger.EventUnknown)
		return answered(labels{}, unknownAnswer("", rec.UpstreamStatus))
	case res.Conclusion == NotMade && applied:
		r.event(rec, ledger.EventNotMade)
	case res.Conclusion == Made && applied:
		r.event(rec, ledger.EventSettled)
		return answered(labels{replayedCode: replay(r.w, settledAnswer(r.m.target.Path, res.Payment).Response)}, nil)
	}
	// Given back now, or ended by another request or the recoverer
	// meanwhile: read it again (and run it, when it was given back).
	return r.claimAgain()
}

// claimAgain claims the key again and runs it; when another request
// claimed it first, its record is the one to go on with.
func (r *repeat) claimAgain() step {
	m := r.m
	claim, next, err := r.path.claim(r.bg, m.req)
	switch {
	case err != nil:
		return answered(labels{}, r.path.ledgerFailed(m.call.RequestID, err))
	case claim != nil && m.req.Held != nil:
		// Claimed again for the user's approval: held, not sent.
		return answered(labels{}, r.path.holds.newlyHeld(m, claim))
	case claim != nil:
		m.claim = claim
		return answered(r.path.owners.run(r.ctx, r.bg, r.w, m))
	}
	return step{next: next}
}

// event writes the repeat's audit event on rec.
func (r *repeat) event(rec *ledger.Record, what ledger.AuditEvent) {
	r.path.event(r.bg, r.m, rec.ID, what)
}
