package tokens

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics is an Observer that exports the contract's token metrics and the
// cache's own.
type Metrics struct {
	lookups   *prometheus.CounterVec
	layers    *prometheus.CounterVec
	mints     *prometheus.CounterVec
	duration  prometheus.Histogram
	lockWaits *prometheus.HistogramVec
	refreshes *prometheus.CounterVec
}

var _ Observer = (*Metrics)(nil)

// NewMetrics registers the token metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bff_token_cache_requests_total",
			Help: "Token cache lookups by result (hit or miss).",
		}, []string{"result"}),
		layers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bff_token_cache_layer_hits_total",
			Help: "Token cache hits by layer (local: in-process; redis: the shared store).",
		}, []string{"layer"}),
		mints: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bff_token_mints_total",
			Help: "Token mints at the upstream token endpoint by result (ok, auth, rejected, upstream, timeout, unreachable).",
		}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "bff_token_mint_duration_seconds",
			Help:    "Duration of token mints at the upstream token endpoint.",
			Buckets: prometheus.DefBuckets,
		}),
		lockWaits: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "bff_token_lock_wait_seconds",
			Help:    "Waits for another instance's mint of the same user's token, by how each wait step ended (notified, polled, timeout).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20},
		}, []string{"result"}),
		refreshes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bff_token_refresh_ahead_total",
			Help: "Background refreshes of tokens near expiry, by result (ok, error).",
		}, []string{"result"}),
	}
	reg.MustRegister(m.lookups, m.layers, m.mints, m.duration, m.lockWaits, m.refreshes)
	for _, r := range []string{"hit", "miss"} {
		m.lookups.WithLabelValues(r)
	}
	return m
}

// CacheLookup implements Observer.
func (m *Metrics) CacheLookup(result string) {
	if result == "miss" {
		m.lookups.WithLabelValues("miss").Inc()
		return
	}
	m.lookups.WithLabelValues("hit").Inc()
	m.layers.WithLabelValues(result).Inc()
}

// Minted implements Observer.
func (m *Metrics) Minted(err error, took time.Duration) {
	m.duration.Observe(took.Seconds())
	m.mints.WithLabelValues(resultOf(err)).Inc()
}

// LockWait implements Observer.
func (m *Metrics) LockWait(result string, took time.Duration) {
	m.lockWaits.WithLabelValues(result).Observe(took.Seconds())
}

// Refreshed implements Observer.
func (m *Metrics) Refreshed(err error) {
	r := "ok"
	if err != nil {
		r = "error"
	}
	m.refreshes.WithLabelValues(r).Inc()
}

func resultOf(err error) string {
	var me *MintError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &me):
		return me.Kind.String()
	}
	return "error"
}
