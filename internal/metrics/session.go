package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fintech-bff/bff/internal/session"
)

// Sessions is the session manager's session.Observer.
type Sessions struct {
	created prometheus.Counter
}

var _ session.Observer = (*Sessions)(nil)

func newSessions(reg prometheus.Registerer) *Sessions {
	return &Sessions{created: counter(reg, prometheus.CounterOpts{
		Name: "bff_sessions_created_total", Help: "BFF sessions created (logins).",
	})}
}

// Created implements session.Observer.
func (m *Sessions) Created() { m.created.Inc() }
