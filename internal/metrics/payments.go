package metrics

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/fintech-bff/bff/internal/limits"
	"github.com/fintech-bff/bff/internal/payments"
)

// Payments is the payments service's payments.Observer. Labels carry
// bounded results only.
type Payments struct {
	moneyReq *prometheus.CounterVec
	followed *prometheus.CounterVec // shared with Edge (the webhooks it answers)
	refusals *prometheus.CounterVec // shared with Edge
}

var _ payments.Observer = (*Payments)(nil)

func newPayments(reg prometheus.Registerer, followed, refusals *prometheus.CounterVec) *Payments {
	return &Payments{refusals: refusals, followed: followed, moneyReq: promauto.With(reg).NewCounterVec(prometheus.CounterOpts{
		Name: "bff_money_requests_total",
		Help: "Money-moving requests by how the BFF answered or the settler ended them: answered, released, unknown (502 PAYMENT_OUTCOME_UNKNOWN to the request that sent it), settled (by the owner), replayed, in_progress, outcome_unknown (a repeat of an unknown key), settled (a repeat), not_made (a repeat of an unknown key proved not made, then run), key_reused, key_required, key_invalid, route_refused (a path variant the upstream does not define), body_refused (duplicate or case-variant keys), ledger_unavailable, claim_lost, snapshot_failed, resent_after_401, released_unsent (an owner that died before its send mark), settled_background, not_made_background (the settler proved an unknown outcome not made and gave the key back); for payments the user approves (payments.step_up): held (answered STEP_UP_REQUIRED, not sent), approved (an approval matched and released it), declined_denied, declined_mismatch, declined_expired (never sent).",
	}, []string{"result"})}
}

// MoneyRequest implements payments.Observer.
func (m *Payments) MoneyRequest(result payments.MoneyResult) {
	m.moneyReq.WithLabelValues(string(result)).Inc()
}

// Followed implements payments.Observer.
func (m *Payments) Followed(result payments.FollowResult) {
	m.followed.WithLabelValues(string(result)).Inc()
}

// Refused implements payments.Observer.
func (m *Payments) Refused(limit limits.Kind) { m.refusals.WithLabelValues(string(limit)).Inc() }

// unknownGauges registers the gauges of the payments whose outcome is
// unknown, read from the ledger (unknowns) at scrape time.
func unknownGauges(reg prometheus.Registerer, unknowns func(context.Context) (int64, time.Time, error)) {
	u := &unknownReader{read: unknowns}
	promauto.With(reg).NewGaugeFunc(prometheus.GaugeOpts{
		Name: "bff_payments_unknown",
		Help: "Money-moving requests whose outcome is unknown now (PAYMENT_OUTCOME_UNKNOWN), in the ledger; NaN while the ledger does not answer.",
	}, func() float64 { n, _ := u.get(); return n })
	promauto.With(reg).NewGaugeFunc(prometheus.GaugeOpts{
		Name: "bff_payments_unknown_oldest_seconds",
		Help: "How long ago the oldest still-unknown money-moving request ended; 0 when there is none, NaN while the ledger does not answer.",
	}, func() float64 { _, age := u.get(); return age })
}

// unknownReader reads the ledger at most once a second for both gauges, so
// a scrape costs one query (within 500 ms).
type unknownReader struct {
	read func(context.Context) (int64, time.Time, error)

	mu     sync.Mutex
	at     time.Time
	n, age float64
}

func (u *unknownReader) get() (n, age float64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if time.Since(u.at) < time.Second {
		return u.n, u.age
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	count, oldest, err := u.read(ctx)
	u.at = time.Now()
	switch {
	case err != nil:
		// The ledger is down: bff_ledger_up says so; no made-up figures.
		u.n, u.age = math.NaN(), math.NaN()
	case oldest.IsZero():
		u.n, u.age = float64(count), 0
	default:
		u.n, u.age = float64(count), max(time.Since(oldest).Seconds(), 0)
	}
	return u.n, u.age
}
