package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/fintech-bff/bff/internal/login"
)

// Login is the OpenID Connect login's login.Observer.
type Login struct {
	keyFetches prometheus.Counter
}

var _ login.Observer = (*Login)(nil)

func newLogin(reg prometheus.Registerer) *Login {
	return &Login{keyFetches: promauto.With(reg).NewCounter(prometheus.CounterOpts{
		Name: "bff_oidc_key_fetches_total", Help: "Fetches of the OpenID provider's signing keys (at most one per 30 s, only for a key id not held).",
	})}
}

// KeysFetched implements login.Observer.
func (m *Login) KeysFetched() { m.keyFetches.Inc() }
