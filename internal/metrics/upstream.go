package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/fintech-bff/bff/internal/proxy"
)

// Upstream is the forwarder's proxy.Observer: the upstream-side metrics of
// docs/operations.md ("Metrics reference"). Labels carry route templates and bounded error
// types only.
type Upstream struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

var _ proxy.Observer = (*Upstream)(nil)

func newUpstream(reg prometheus.Registerer) *Upstream {
	return &Upstream{
		requests: promauto.With(reg).NewCounterVec(prometheus.CounterOpts{
			Name: "bff_upstream_requests_total",
			Help: "Upstream API calls (each attempt), by route template, status and upstream error type.",
		}, []string{"route", "status", "type"}),
		duration: promauto.With(reg).NewHistogramVec(prometheus.HistogramOpts{
			Name:    "bff_upstream_request_duration_seconds",
			Help:    "Time to the upstream's response headers, per attempt, by route template.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route"}),
	}
}

// Attempted implements proxy.Observer.
func (m *Upstream) Attempted(route string, status int, errType proxy.ErrorType, took time.Duration) {
	m.requests.WithLabelValues(route, string(upstreamStatusOf(status)), string(errType)).Inc()
	m.duration.WithLabelValues(route).Observe(took.Seconds())
}
