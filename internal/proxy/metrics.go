package proxy

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the upstream-side metrics of the contract (section 5). Labels
// carry route templates and bounded error types only.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	refusals *prometheus.CounterVec
}

// NewMetrics registers the proxy's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bff_upstream_requests_total",
			Help: "Upstream API calls (each attempt), by route template, status and upstream error type.",
		}, []string{"route", "status", "type"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "bff_upstream_request_duration_seconds",
			Help:    "Time to the upstream's response headers, per attempt, by route template.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bff_limit_refusals_total",
			Help: "Requests refused by a limit before reaching the upstream, by limit (requests, auth, refresh).",
		}, []string{"limit"}),
	}
	reg.MustRegister(m.requests, m.duration, m.refusals)
	return m
}

// Refused counts a request a limit refused; the edge counts its own here
// too, so one metric holds every limit.
func (m *Metrics) Refused(limit string) { m.refused(limit) }

func (m *Metrics) refused(limit string) {
	if m != nil {
		m.refusals.WithLabelValues(limit).Inc()
	}
}

func (m *Metrics) observe(route string, status int, typ string, took time.Duration) {
	if m == nil {
		return
	}
	s := "error" // no reply: transport failure
	if status > 0 {
		s = strconv.Itoa(status)
	}
	m.requests.WithLabelValues(route, s, typ).Inc()
	m.duration.WithLabelValues(route).Observe(took.Seconds())
}
