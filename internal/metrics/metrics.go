// Package metrics is the BFF's Prometheus side: every bff_* metric is
// defined and registered here, once, on the registry it is given, and each
// package that reports events implements nothing of Prometheus: it declares
// an Observer of its own events (tokens.Observer, session.Observer, ...)
// with a no-op default, and the types here implement those Observers on
// the metrics. The edge keeps Prometheus only to serve /metrics.
//
// A package rather than cmd/bff, because the metrics are a job of their
// own (names, help texts, label values bounded against cardinality, the
// per-label-set cache of the request path) and are tested alone here
// against a registry, with no binary to build; the edge's benchmark uses
// the real Observer to measure the request path with its metrics; and
// cmd/bff stays wiring. This package imports the packages whose Observers
// it implements (for the compile-time checks, and the types their events
// carry: a mint's error kind, the codes a metric may carry), but never
// Echo or the edge, whose tests import it; metrics.Edge is checked
// against edge.Observer in this package's tests.
//
// Every Observer is implemented here; Budgets (limits.Observer) is the one
// whose event is a log line, not a metric.
package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics holds every metric of the BFF, registered on one registry. Its
// fields are the Observers to give each package; all are safe for
// concurrent use.
type Metrics struct {
	Tokens   *Tokens   // tokens.Observer
	Sessions *Sessions // session.Observer
	Login    *Login    // login.Observer
	Upstream *Upstream // proxy.Observer
	Payments *Payments // payments.Observer
	Edge     *Edge     // edge.Observer
	DPoP     *DPoP     // edge.DPoPObserver

	reg prometheus.Registerer
}

// New registers the BFF's metrics on reg, with the Go runtime's and the
// process's collectors. Probe adds the gauges read at scrape time, once
// what they read exists.
func New(reg prometheus.Registerer) *Metrics {
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// The edge's and the payments' refusals, in one metric.
	refusals := promauto.With(reg).NewCounterVec(prometheus.CounterOpts{
		Name: "bff_limit_refusals_total",
		Help: "Requests refused by a limit before reaching the upstream, by limit (requests, auth, backchannel, pending_logins, dpop, refresh, streams, streams_address, streams_instance).",
	}, []string{"limit"})
	// The payments' follower and webhooks, and the webhooks the edge
	// answers alone, in one metric.
	followed := promauto.With(reg).NewCounterVec(prometheus.CounterOpts{
		Name: "bff_payment_follow_total",
		Help: "Polls of followed payments at the upstream (changed, unchanged, not_found, failed, lease_lost) and status webhooks (webhook_applied, webhook_unmatched, webhook_replayed, webhook_ignored, webhook_forged, webhook_stale, webhook_malformed).",
	}, []string{"result"})
	return &Metrics{
		Tokens:   newTokens(reg),
		Sessions: newSessions(reg),
		Login:    newLogin(reg),
		Upstream: newUpstream(reg),
		Payments: newPayments(reg, followed, refusals),
		Edge:     newEdge(reg, followed, refusals),
		DPoP:     newDPoP(reg),
		reg:      reg,
	}
}

// Probes are what the gauges read at scrape time; a nil one registers no
// gauge.
type Probes struct {
	// Store pings the shared store (Redis): bff_store_up.
	Store func(context.Context) error
	// Ledger pings the payments ledger (PostgreSQL): bff_ledger_up.
	Ledger func(context.Context) error
	// Unknowns counts the payments whose outcome is unknown in the ledger
	// and says when the oldest of them ended (zero: none):
	// bff_payments_unknown and bff_payments_unknown_oldest_seconds.
	Unknowns func(context.Context) (int64, time.Time, error)
	// Streams counts the event streams open on this instance:
	// bff_event_streams.
	Streams func() int
	// StreamsLimit is the most event streams this instance holds
	// (limits.streams_per_instance, or its derived bound; 0: none):
	// bff_event_streams_limit.
	StreamsLimit func() int
}

// Probe registers the gauges read at scrape time on the registry New was
// given; call it once.
func (m *Metrics) Probe(p Probes) {
	if p.Store != nil {
		promauto.With(m.reg).NewGaugeFunc(prometheus.GaugeOpts{
			Name: "bff_store_up", Help: "1 when the shared store (Redis) answers a ping within 500 ms at scrape time, else 0.",
		}, up(p.Store))
	}
	if p.Ledger != nil {
		promauto.With(m.reg).NewGaugeFunc(prometheus.GaugeOpts{
			Name: "bff_ledger_up", Help: "1 when the payments ledger (PostgreSQL) answers a ping within 500 ms at scrape time, else 0.",
		}, up(p.Ledger))
	}
	if p.Unknowns != nil {
		unknownGauges(m.reg, p.Unknowns)
	}
	if p.Streams != nil {
		promauto.With(m.reg).NewGaugeFunc(prometheus.GaugeOpts{
			Name: "bff_event_streams", Help: "Event streams (GET /bff/events) open on this instance.",
		}, func() float64 { return float64(p.Streams()) })
	}
	if p.StreamsLimit != nil {
		promauto.With(m.reg).NewGaugeFunc(prometheus.GaugeOpts{
			Name: "bff_event_streams_limit", Help: "The most event streams this instance holds (limits.streams_per_instance, else half its descriptor limit); one more is refused with 503.",
		}, func() float64 { return float64(p.StreamsLimit()) })
	}
}

// up reads ping at scrape time: 1 when it answers within 500 ms, else 0.
func up(ping func(context.Context) error) func() float64 {
	return func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		if ping(ctx) != nil {
			return 0
		}
		return 1
	}
}
