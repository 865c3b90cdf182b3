package payments

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the payments metrics. Labels carry bounded results only.
type Metrics struct {
	moneyReq *prometheus.CounterVec
}

// NewMetrics registers the payments metrics on reg: the requests by how
// they ended, and (from unknowns, read at scrape time within 500 ms) how
// many outcomes are unknown and since when.
func NewMetrics(reg prometheus.Registerer, unknowns func(context.Context) (int64, time.Time, error)) *Metrics {
	m := &Metrics{moneyReq: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bff_money_requests_total",
		Help: "Money-moving requests by how the BFF answered or the settler ended them: answered, released, unknown (502 PAYMENT_OUTCOME_UNKNOWN to the request that sent it), settled (by the owner), replayed, in_progress, outcome_unknown (a repeat of an unknown key), settled (a repeat), key_reused, key_required, key_invalid, ledger_unavailable, claim_lost, snapshot_failed, resent_after_401, released_unsent (an owner that died before its send mark), settled_background.",
	}, []string{"result"})}
	reg.MustRegister(m.moneyReq)
	if unknowns != nil {
		reg.MustRegister(&unknownCollector{read: unknowns})
	}
	return m
}

func (m *Metrics) money(result string) {
	if m != nil {
		m.moneyReq.WithLabelValues(result).Inc()
	}
}

// unknownCollector reads the ledger once per scrape for both gauges.
type unknownCollector struct {
	read func(context.Context) (int64, time.Time, error)
}

var (
	unknownDesc = prometheus.NewDesc("bff_payments_unknown",
		"Money-moving requests whose outcome is unknown now (PAYMENT_OUTCOME_UNKNOWN), in the ledger.", nil, nil)
	unknownAgeDesc = prometheus.NewDesc("bff_payments_unknown_oldest_seconds",
		"How long ago the oldest still-unknown money-moving request ended; 0 when there is none.", nil, nil)
)

func (c *unknownCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- unknownDesc
	ch <- unknownAgeDesc
}

func (c *unknownCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	n, oldest, err := c.read(ctx)
	if err != nil {
		// The ledger is down: bff_ledger_up says so; no made-up figures.
		return
	}
	age := 0.0
	if !oldest.IsZero() {
		age = max(time.Since(oldest).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(unknownDesc, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(unknownAgeDesc, prometheus.GaugeValue, age)
}
