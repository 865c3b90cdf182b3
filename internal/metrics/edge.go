package metrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/fintech-bff/bff/internal/limits"
	"github.com/fintech-bff/bff/internal/login"
	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/session"
)

// Edge is the HTTP edge's edge.Observer, on the public and the admin
// listener: the edge's metrics (docs/operations.md, "Metrics reference"), logins and
// revocations, and the per-address and per-session refusals. Labels are
// route templates, bounded method names and known codes, never raw paths.
// (The check that it satisfies edge.Observer is in the tests: the edge's
// benchmark uses this type, so this package does not import the edge.)
type Edge struct {
	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	errors      *prometheus.CounterVec
	logins      *prometheus.CounterVec
	revocations *prometheus.CounterVec
	refusals    *prometheus.CounterVec // shared with Payments
	followed    *prometheus.CounterVec // shared with Payments
	// series caches the children per label set (bounded: route templates,
	// known methods, status codes), sparing a label hash per request.
	series sync.Map // seriesKey -> *series
}

type seriesKey struct {
	route  string
	method httpMethod
	status int
}

type series struct {
	count prometheus.Counter
	dur   prometheus.Observer
}

func newEdge(reg prometheus.Registerer, followed, refusals *prometheus.CounterVec) *Edge {
	return &Edge{
		refusals: refusals,
		followed: followed,
		requests: promauto.With(reg).NewCounterVec(prometheus.CounterOpts{
			Name: "bff_http_requests_total",
			Help: "Requests served on the public listener by route template, method and status code.",
		}, []string{"route", "method", "code"}),
		duration: promauto.With(reg).NewHistogramVec(prometheus.HistogramOpts{
			Name:    "bff_http_request_duration_seconds",
			Help:    "Time to serve a request on the public listener by route template and method.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route", "method"}),
		errors: promauto.With(reg).NewCounterVec(prometheus.CounterOpts{
			Name: "bff_errors_total",
			Help: "Error envelopes sent, by code (the BFF's codes; an upstream's own error type counts as UPSTREAM_OTHER).",
		}, []string{"code"}),
		logins: promauto.With(reg).NewCounterVec(prometheus.CounterOpts{
			Name: "bff_logins_total",
			Help: "Login outcomes by method (dev, oidc, mobile) and result (ok, failed, state, invalid_grant, code_issued).",
		}, []string{"method", "result"}),
		revocations: promauto.With(reg).NewCounterVec(prometheus.CounterOpts{
			Name: "bff_session_revocations_total",
			Help: "Sessions ended before their timeout, by reason (logout, user, admin, backchannel).",
		}, []string{"reason"}),
	}
}

// Served implements edge.Observer.
func (m *Edge) Served(route, method string, status int, took time.Duration) {
	k := seriesKey{route, methodOf(method), status}
	v, ok := m.series.Load(k)
	if !ok {
		v, _ = m.series.LoadOrStore(k, &series{
			count: m.requests.WithLabelValues(k.route, string(k.method), strconv.Itoa(status)),
			dur:   m.duration.WithLabelValues(k.route, string(k.method)),
		})
	}
	s := v.(*series)
	s.count.Inc()
	s.dur.Observe(took.Seconds())
}

// Problem implements edge.Observer: an upstream's own error type counts
// as UPSTREAM_OTHER, so an upstream cannot grow the label's cardinality.
func (m *Edge) Problem(code string) {
	m.errors.WithLabelValues(string(errorCodeOf(code))).Inc()
}

// Login implements edge.Observer.
func (m *Edge) Login(method login.Method, result login.Outcome) {
	m.logins.WithLabelValues(string(method), string(result)).Inc()
}

// Revoked implements edge.Observer.
func (m *Edge) Revoked(reason session.Reason, n int) {
	m.revocations.WithLabelValues(string(reason)).Add(float64(n))
}

// Refused implements edge.Observer.
func (m *Edge) Refused(limit limits.Kind) { m.refusals.WithLabelValues(string(limit)).Inc() }

// Webhook implements edge.Observer: bff_payment_follow_total's
// webhook_forged, webhook_stale, webhook_malformed and webhook_ignored.
func (m *Edge) Webhook(result payments.FollowResult) {
	m.followed.WithLabelValues(string(result)).Inc()
}
