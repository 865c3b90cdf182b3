package metrics

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/fintech-bff/bff/internal/tokens"
)

// Tokens is the token cache's tokens.Observer: the token metrics of
// docs/operations.md ("Metrics reference").
type Tokens struct {
	lookups   *prometheus.CounterVec
	layers    *prometheus.CounterVec
	mints     *prometheus.CounterVec
	duration  prometheus.Histogram
	lockWaits *prometheus.HistogramVec
	refreshes *prometheus.CounterVec
}

var _ tokens.Observer = (*Tokens)(nil)

func newTokens(reg prometheus.Registerer) *Tokens {
	m := &Tokens{
		lookups: promauto.With(reg).NewCounterVec(prometheus.CounterOpts{
			Name: "bff_token_cache_requests_total",
			Help: "Token cache lookups by result (hit or miss).",
		}, []string{"result"}),
		layers: promauto.With(reg).NewCounterVec(prometheus.CounterOpts{
			Name: "bff_token_cache_layer_hits_total",
			Help: "Token cache hits by layer (local: in-process; redis: the shared store).",
		}, []string{"layer"}),
		mints: promauto.With(reg).NewCounterVec(prometheus.CounterOpts{
			Name: "bff_token_mints_total",
			Help: "Token mints at the upstream token endpoint by result (ok, auth, rejected, upstream, timeout, unreachable).",
		}, []string{"result"}),
		duration: promauto.With(reg).NewHistogram(prometheus.HistogramOpts{
			Name:    "bff_token_mint_duration_seconds",
			Help:    "Duration of token mints at the upstream token endpoint.",
			Buckets: prometheus.DefBuckets,
		}),
		lockWaits: promauto.With(reg).NewHistogramVec(prometheus.HistogramOpts{
			Name:    "bff_token_lock_wait_seconds",
			Help:    "Waits for another instance's mint of the same user's token, by how each wait step ended (notified, polled, timeout).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20},
		}, []string{"result"}),
		refreshes: promauto.With(reg).NewCounterVec(prometheus.CounterOpts{
			Name: "bff_token_refresh_ahead_total",
			Help: "Background refreshes of tokens near expiry, by result (ok, error).",
		}, []string{"result"}),
	}
	for _, r := range []lookup{lookupHit, lookupMiss} {
		m.lookups.WithLabelValues(string(r))
	}
	return m
}

// CacheLookup implements tokens.Observer: a miss is the lookups' miss, a
// hit of either layer their hit and that layer's.
func (m *Tokens) CacheLookup(result tokens.Lookup) {
	if result == tokens.LookupMiss {
		m.lookups.WithLabelValues(string(lookupMiss)).Inc()
		return
	}
	m.lookups.WithLabelValues(string(lookupHit)).Inc()
	m.layers.WithLabelValues(string(result)).Inc()
}

// Minted implements tokens.Observer.
func (m *Tokens) Minted(err error, took time.Duration) {
	m.duration.Observe(took.Seconds())
	m.mints.WithLabelValues(string(mintResult(err))).Inc()
}

// LockWait implements tokens.Observer.
func (m *Tokens) LockWait(result tokens.Wait, took time.Duration) {
	m.lockWaits.WithLabelValues(string(result)).Observe(took.Seconds())
}

// Refreshed implements tokens.Observer.
func (m *Tokens) Refreshed(err error) {
	m.refreshes.WithLabelValues(string(errorResult(err))).Inc()
}

// mintResult is a mint's result label: ok, the kind of a *tokens.MintError,
// else error.
func mintResult(err error) result {
	if me := (*tokens.MintError)(nil); errors.As(err, &me) {
		return result(me.Kind.String())
	}
	return errorResult(err)
}
