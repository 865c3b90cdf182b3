package upstreamsim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// The upstream documents no deduplication by Idempotency-Key, so the
// simulator does none: the same payment sent twice with the same key is
// two payments. (The BFF's own idempotency is what the e2e tests check.)
func TestNoIdempotencyKeyDeduplication(t *testing.T) {
	h := newHarness(t, Options{})
	tok := h.token("alice")
	before := len(h.sim.PaymentRemittances("alice"))
	body, _ := json.Marshal(paymentBody("twice with one key"))
	var ids []string
	for range 2 {
		req, _ := http.NewRequest("POST", h.url+"/v2/payments", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Idempotency-Key", "same-key-1")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var created struct {
			ID string `json:"id"`
		}
		if res.StatusCode != http.StatusCreated || json.Unmarshal(b, &created) != nil || created.ID == "" {
			t.Fatalf("got %d %s, want 201 with a payment id", res.StatusCode, b)
		}
		ids = append(ids, created.ID)
	}
	if ids[0] == ids[1] {
		t.Errorf("got the same payment id %s twice, want two payments", ids[0])
	}
	if n := len(h.sim.PaymentRemittances("alice")) - before; n != 2 {
		t.Errorf("got %d new payments, want 2", n)
	}
}
