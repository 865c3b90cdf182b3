package edge

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fintech-bff/bff/internal/problem"
)

// Metrics are the edge's metrics, shared by the public and admin handlers.
type Metrics struct {
	http *httpMetrics
	auth *authMetrics
}

// NewMetrics registers the edge's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	return &Metrics{http: newHTTPMetrics(reg), auth: newAuthMetrics(reg)}
}

// httpMetrics are the edge's metrics of the contract (section 5). Labels
// are route templates and bounded method names, never raw paths.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	errors   *prometheus.CounterVec
	// series caches the children per label set (bounded: route templates,
	// known methods, status codes), sparing a label hash per request.
	series sync.Map // seriesKey -> *series
}

type seriesKey struct {
	route, method string
	status        int
}

type series struct {
	count prometheus.Counter
	dur   prometheus.Observer
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bff_http_requests_total",
			Help: "Requests served on the public listener by route template, method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "bff_http_request_duration_seconds",
			Help:    "Time to serve a request on the public listener by route template and method.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route", "method"}),
	}
	m.errors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bff_errors_total",
		Help: "Error envelopes sent, by code (the BFF's codes; an upstream's own error type counts as UPSTREAM_OTHER).",
	}, []string{"code"})
	reg.MustRegister(m.requests, m.duration, m.errors)
	return m
}

// problem counts one error envelope.
func (m *httpMetrics) problem(code string) {
	if !problem.Known(code) {
		code = "UPSTREAM_OTHER"
	}
	m.errors.WithLabelValues(code).Inc()
}

func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return m
	}
	return "OTHER"
}

func (m *httpMetrics) observe(route, method string, status int, took time.Duration) {
	k := seriesKey{route, methodLabel(method), status}
	v, ok := m.series.Load(k)
	if !ok {
		v, _ = m.series.LoadOrStore(k, &series{
			count: m.requests.WithLabelValues(k.route, k.method, strconv.Itoa(status)),
			dur:   m.duration.WithLabelValues(k.route, k.method),
		})
	}
	s := v.(*series)
	s.count.Inc()
	s.dur.Observe(took.Seconds())
}

// authMetrics count logins and session revocations.
type authMetrics struct {
	logins      *prometheus.CounterVec
	revocations *prometheus.CounterVec
}

func newAuthMetrics(reg prometheus.Registerer) *authMetrics {
	m := &authMetrics{
		logins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bff_logins_total",
			Help: "Login outcomes by method (dev, oidc, mobile) and result (ok, failed, state, invalid_grant, code_issued).",
		}, []string{"method", "result"}),
		revocations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bff_session_revocations_total",
			Help: "Sessions ended before their timeout, by reason (logout, user, admin, backchannel).",
		}, []string{"reason"}),
	}
	reg.MustRegister(m.logins, m.revocations)
	return m
}

func (m *authMetrics) login(method, result string) { m.logins.WithLabelValues(method, result).Inc() }

func (m *authMetrics) revoked(reason string, n int) {
	m.revocations.WithLabelValues(reason).Add(float64(n))
}
