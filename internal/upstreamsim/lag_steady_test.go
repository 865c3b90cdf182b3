package upstreamsim

import (
	"testing"
	"time"
)

// The list lag runs in real time: a step back of the simulator's clock
// does not hide a payment for as long as the step (an upstream's list lags
// its creations by its replication, not by its clock).
func TestListLagIgnoresAStepBack(t *testing.T) {
	h := newHarness(t, Options{ListLag: 300 * time.Millisecond})
	tok := h.token("alice")
	id, _ := h.createPayment(tok, paymentBody("Order before a step back"))
	h.sim.Advance(-time.Minute)
	h.sim.Advance(300 * time.Millisecond)
	items := h.do("GET", "/v2/payments?limit=500", tok, nil).json(t)["items"].([]any)
	for _, it := range items {
		if it.(map[string]any)["id"] == id {
			return
		}
	}
	t.Fatalf("a payment made before the clock stepped back a minute is still hidden %s after it was made", 300*time.Millisecond)
}
