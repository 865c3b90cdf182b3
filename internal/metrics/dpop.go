package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/fintech-bff/bff/internal/dpop"
)

// DPoP is the edge's edge.DPoPObserver: the device binding of native
// sessions (docs/operations.md, "Device-bound sessions (DPoP)"). Its labels
// are a proof's use, the bounded set of refusal reasons and the binding;
// never a token, a key or its thumbprint. (Checked against
// edge.DPoPObserver in the tests, as Edge is.)
type DPoP struct {
	proofs   *prometheus.CounterVec
	sessions *prometheus.CounterVec
}

func newDPoP(reg prometheus.Registerer) *DPoP {
	m := &DPoP{
		proofs: promauto.With(reg).NewCounterVec(prometheus.CounterOpts{
			Name: "bff_dpop_proofs_total",
			Help: "DPoP proofs checked, by use (login, request) and result (ok, or why refused: missing, multiple, scheme, malformed, alg, typ, jwk, signature, key, htm, htu, iat, jti, ath, replay).",
		}, []string{"use", "result"}),
		sessions: promauto.With(reg).NewCounterVec(prometheus.CounterOpts{
			Name: "bff_dpop_native_sessions_total",
			Help: "Sessions made by POST /auth/mobile/token, by binding: dpop (bound to the app's key) or bearer (unbound).",
		}, []string{"binding"}),
	}
	// At zero from the start, so that a rate of the unbound ones reads 0,
	// not nothing, before the first login.
	for _, b := range []dpop.Binding{dpop.BindingDPoP, dpop.BindingBearer} {
		m.sessions.WithLabelValues(string(b))
	}
	for _, use := range []dpop.Use{dpop.UseLogin, dpop.UseRequest} {
		m.proofs.WithLabelValues(string(use), string(resultOK))
	}
	return m
}

// Proof implements edge.DPoPObserver.
func (m *DPoP) Proof(use dpop.Use, refused dpop.Reason) {
	m.proofs.WithLabelValues(string(use), string(proofResult(refused))).Inc()
}

// NativeSession implements edge.DPoPObserver.
func (m *DPoP) NativeSession(binding dpop.Binding) {
	m.sessions.WithLabelValues(string(binding)).Inc()
}
