package payments

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/proxy"
)

// settlerPace is how the background settler paces itself.
type settlerPace struct {
	every    time.Duration // how often each instance asks the ledger for due records
	batch    int           // records leased at most per look
	lease    time.Duration // first wait before a record is looked at again (doubling)
	maxLease time.Duration // the longest wait between looks
	giveUp   time.Duration // after this long unknown, a record is left unknown for good
}

// defaultSettlerPace: an unknown record is looked at after 2 s, 4 s, 8 s, …
// then every 5 minutes, for a day. Past its WindowEnd nothing new can
// appear for it, so the later looks only catch an upstream whose list was
// late; a day bounds the cost of that.
var defaultSettlerPace = settlerPace{every: time.Second, batch: 32, lease: 2 * time.Second, maxLease: 5 * time.Minute, giveUp: 24 * time.Hour}

// Run settles unknown outcomes in the background until ctx ends: every
// instance runs it, and the ledger leases each record to one of them at a
// time. A claim past its deadline is ended (given back when its owner never
// marked the send, else unknown), and each unknown outcome is looked for
// in the upstream's payment list as soon as, and as long as, the evidence
// may allow; a repeat of the key then replays what was found.
func (s *Service) Run(ctx context.Context) {
	if s.settlements == nil {
		return
	}
	t := time.NewTicker(s.pace.every)
	defer t.Stop()
	var expired time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.settleDue(ctx)
		// A hold read past its time is declined by its reader anyway
		// (stillHeld, answerRepeat); this only makes lists and streams say
		// so without a read, which a few seconds late does not harm.
		// Holds expire also after step-up was turned off: none can be
		// approved any more (a held change of a merchant is not read again
		// by a repeat, which is forwarded unheld then).
		if s.holdsOf != nil && time.Since(expired) >= expireEvery {
			expired = time.Now()
			s.expireHolds(ctx)
		}
	}
}

// expireEvery is how often each instance declines the holds that ran out.
const expireEvery = 10 * time.Second

// settleDue leases the due records and settles each.
func (s *Service) settleDue(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	recs, err := s.settlements.Due(lctx, s.pace.batch, s.pace.lease, s.pace.maxLease, s.pace.giveUp)
	cancel()
	if err != nil {
		s.log.Warn("the settler could not read the ledger", slog.String("error", err.Error()))
		return
	}
	for _, rec := range recs {
		if ctx.Err() != nil {
			return
		}
		s.settleRecord(ctx, rec)
	}
}

// settleRecord ends rec's claim when it is past its deadline (given back
// when never marked, else unknown), then settles it when it is unknown.
func (s *Service) settleRecord(ctx context.Context, rec *ledger.Record) {
	if rec.State == ledger.StateInFlight {
		lctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
		state, err := s.claims.Abandon(lctx, rec.ID)
		cancel()
		switch {
		case err != nil:
			s.log.Warn("the settler could not end a stale claim", slog.String("error", err.Error()))
			return
		case state == ledger.StateReleased:
			s.observe.MoneyRequest(MoneyReleasedUnsent)
			return
		case state != ledger.StateUnknown:
			return
		}
	}
	if rec.Content == nil || !rec.Send.Snapshot {
		return
	}
	// The settler acts for the record's user, under the request id that
	// claimed it, so the upstream's log ties its look-ups to the payment.
	c := proxy.Call{UserID: rec.UserID, RequestID: rec.RequestID + "-settle-" + strconv.FormatInt(rec.ID, 10)}
	res := s.settle(ctx, c, subjectOf(rec))
	lctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	defer cancel()
	var applied bool
	var err error
	switch res.Conclusion {
	case Made:
		o := settledAnswer(recordPath(rec), res.Payment)
		o.UpstreamStatus = rec.UpstreamStatus
		applied, err = s.settlements.Settle(lctx, rec.ID, o)
	case NotMade:
		applied, err = s.settlements.GiveBack(lctx, rec.ID)
	default:
		return
	}
	if err != nil {
		s.log.Warn("the settler could not store a settled outcome", slog.String("error", err.Error()))
		return
	}
	if !applied {
		return
	}
	if res.Conclusion == Made {
		s.observe.MoneyRequest(MoneySettledBackground)
		s.log.Info("an unknown payment outcome was settled from the upstream's list", slog.String("requestId", rec.RequestID))
		return
	}
	s.observe.MoneyRequest(MoneyNotMadeBackground)
	s.log.Info("an unknown payment outcome was proved not made; its key is given back", slog.String("requestId", rec.RequestID))
}

// recordPath is the endpoint a settleable record was sent to, from its
// money route: the open-banking init under /v2/pay, else the creation.
func recordPath(rec *ledger.Record) string {
	if strings.HasPrefix(initPath, rec.Route) && !strings.HasPrefix(creationPath, rec.Route) {
		return initPath
	}
	return creationPath
}
