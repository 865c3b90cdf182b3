package payments

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/proxy"
)

// The recoverer settles, in the background, what no request is left to
// settle: every instance runs it, and the ledger leases each record to one
// of them at a time. A claim past its deadline is ended (given back when
// its owner never marked the send, else unknown), and each unknown outcome
// is looked for in the upstream's payment list as soon as, and as long as,
// the evidence may allow; a repeat of the key then replays what was found.
// Its loop also runs the holds' expiry (Holds.expire).

// RecoveryLedger is what the recoverer needs of the ledger besides the
// evidence: the records due a look (Due), and a claim past its deadline
// ended (Abandon).
type RecoveryLedger interface {
	Due(ctx context.Context, limit int, lease, maxLease, giveUp time.Duration) ([]*ledger.Record, error)
	Abandon(ctx context.Context, id int64) (ledger.State, error)
}

var (
	_ RecoveryLedger = (*ledger.Postgres)(nil)
	_ RecoveryLedger = (*ledger.Memory)(nil)
)

// Recoverer is the background settler.
type Recoverer struct {
	base
	ledger   RecoveryLedger
	evidence *evidence
	holds    *Holds // their expiry
	pace     recoveryPace
}

// newRecoverer returns the recoverer that leases through led, settles
// with ev and expires holds' holds, at the default pace.
func newRecoverer(b base, led RecoveryLedger, ev *evidence, holds *Holds) *Recoverer {
	return &Recoverer{base: b, ledger: led, evidence: ev, holds: holds, pace: defaultPace}
}

// recoveryPace is how the recoverer paces itself.
type recoveryPace struct {
	every    time.Duration // how often each instance asks the ledger for due records
	batch    int           // records leased at most per look
	lease    time.Duration // first wait before a record is looked at again (doubling)
	maxLease time.Duration // the longest wait between looks
	giveUp   time.Duration // after this long unknown, a record is left unknown for good
}

// defaultPace: an unknown record is looked at after 2 s, 4 s, 8 s, …
// then every 5 minutes, for a day. Past its WindowEnd nothing new can
// appear for it, so the later looks only catch an upstream whose list was
// late; a day bounds the cost of that.
var defaultPace = recoveryPace{every: time.Second, batch: 32, lease: 2 * time.Second, maxLease: 5 * time.Minute, giveUp: 24 * time.Hour}

// Run recovers until ctx ends.
func (s *Recoverer) Run(ctx context.Context) {
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
		if time.Since(expired) >= expireEvery {
			expired = time.Now()
			s.holds.expire(ctx)
		}
	}
}

// expireEvery is how often each instance declines the holds that ran out.
const expireEvery = 10 * time.Second

// settleDue leases the due records and settles each.
func (s *Recoverer) settleDue(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	recs, err := s.ledger.Due(lctx, s.pace.batch, s.pace.lease, s.pace.maxLease, s.pace.giveUp)
	cancel()
	if err != nil {
		s.log.Warn("the recoverer could not read the ledger", slog.String("error", err.Error()))
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
func (s *Recoverer) settleRecord(ctx context.Context, rec *ledger.Record) {
	if rec.State == ledger.StateInFlight {
		lctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
		state, err := s.ledger.Abandon(lctx, rec.ID)
		cancel()
		switch {
		case err != nil:
			s.log.Warn("the recoverer could not end a stale claim", slog.String("error", err.Error()))
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
	res := s.evidence.settle(ctx, c, subjectOf(rec))
	applied, err := s.evidence.store(ctx, s.evidence.unknown(rec), recordPath(rec), rec.UpstreamStatus, res)
	if err != nil {
		s.log.Warn("the recoverer could not store a settled outcome", slog.String("error", err.Error()))
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
