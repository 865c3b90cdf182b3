package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/fintech-bff/bff/internal/session"
)

// Sessions is the session manager's session.Observer.
type Sessions struct {
	created prometheus.Counter
}

var _ session.Observer = (*Sessions)(nil)

func newSessions(reg prometheus.Registerer) *Sessions {
	return &Sessions{created: promauto.With(reg).NewCounter(prometheus.CounterOpts{
		Name: "bff_sessions_created_total", Help: "BFF sessions created (logins).",
	})}
}

// Created implements session.Observer.
func (m *Sessions) Created() { m.created.Inc() }
