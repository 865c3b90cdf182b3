package upstreamsim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fintech-bff/bff/internal/testing/poll"
)

// sendAs posts body to path with tok and X-Request-Id reqID on a
// connection of its own, giving up after timeout, and returns the
// client's error (nil if a reply came).
func (h *harness) sendAs(path, tok, reqID string, body any, timeout time.Duration) error {
	h.t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", h.url+path, bytes.NewReader(b))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("X-Request-Id", reqID)
	tr := &http.Transport{DisableKeepAlives: true}
	if h.tr != nil {
		tr = h.tr.Clone()
		tr.DisableKeepAlives = true
	}
	client := &http.Client{Transport: tr}
	defer client.CloseIdleConnections()
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	res.Body.Close()
	return nil
}

// paymentOf returns the id of user's payment made by the request reqID.
func paymentOf(s *Server, user, reqID string) (string, bool) {
	for id, origin := range s.PaymentOrigins(user) {
		if origin == reqID {
			return id, true
		}
	}
	return "", false
}

// initBody is an open-banking-init body that creates a payment.
func initBody(remittance string) map[string]any {
	b := paymentBody(remittance)
	return map[string]any{"providerId": ProviderSandbox, "paymentInformation": b["paymentInformation"], "redirectUrl": b["redirectUrl"]}
}

// TestActLateActsAfterTheClientGaveUp is the fault the history checker
// uses to find a BFF that concludes "not made" too early: the client
// times out with no reply, and the upstream makes the payment anyway,
// later, as the request's. It runs on a synctest bubble's clock, which
// a loaded machine does not slow: the delay is measured exactly.
func TestActLateActsAfterTheClientGaveUp(t *testing.T) {
	const delay = 1500 * time.Millisecond
	tests := []struct {
		name, path string
		body       map[string]any
	}{
		{"POST /v2/payments", "/v2/payments", paymentBody("Order late")},
		{"POST /v2/pay/open-banking-init", "/v2/pay/open-banking-init", initBody("Order late init")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newBubbleHarness(t, Options{Control: true})
				tok := h.token("alice")
				if r := h.do("POST", "/_sim/faults", "", map[string]any{"method": "POST", "pathPrefix": tt.path, "actLate": true, "delay": delay.String(), "times": 1}); r.status != http.StatusCreated || r.json(t)["actLate"] != true {
					t.Fatalf("POST /_sim/faults: got %d %s, want 201 with actLate", r.status, r.body)
				}
				sent := time.Now()
				err := h.sendAs(tt.path, tok, "req-late-1", tt.body, 100*time.Millisecond)
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("got %v, want the client's own timeout: the upstream does not answer", err)
				}
				synctest.Wait() // whatever acts at once has acted
				if _, made := paymentOf(h.sim, "alice", "req-late-1"); made {
					t.Fatalf("the payment exists when the client gives up (%s after the request), want it made only after the delay", time.Since(sent))
				}
				if n := countPath(h.sim, tt.path); n != 1 {
					t.Errorf("got %d requests to %s in the log, want 1: the upstream took it", n, tt.path)
				}
				var id string
				poll.Until(t, 10*time.Second, "the late payment", func() bool {
					var made bool
					id, made = paymentOf(h.sim, "alice", "req-late-1")
					return made
				})
				if time.Since(sent) < delay {
					t.Errorf("the payment was made %s after the request, want at least the delay %s", time.Since(sent), delay)
				}
				if r := h.do("GET", "/v2/payments/"+id, tok, nil); r.status != http.StatusOK {
					t.Errorf("GET the late payment: got %d %s, want 200", r.status, r.body)
				}
				if n := len(h.sim.PaymentRemittances("alice")); n != 8 {
					t.Errorf("got %d payments, want the 7 seeded and the late one", n)
				}
			})
		})
	}
}

// With no client timeout the simulator stops the wait itself: it hangs
// up when the delay ends (or at once with hangUp), and only then acts.
func TestActLateHangsUpOnAWaitingClient(t *testing.T) {
	for name, f := range map[string]Fault{
		"delay ends":           {Method: "POST", PathPrefix: "/v2/payments", ActLate: true, Delay: 200 * time.Millisecond},
		"hangUp, act at delay": {Method: "POST", PathPrefix: "/v2/payments", ActLate: true, HangUp: true, Delay: 200 * time.Millisecond},
		"no delay":             {Method: "POST", PathPrefix: "/v2/payments", ActLate: true}, // hangs up and acts at once
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newBubbleHarness(t, Options{})
				tok := h.token("alice")
				h.sim.InjectFault(f)
				err := h.sendAs("/v2/payments", tok, "req-wait", paymentBody("Order wait"), 10*time.Second)
				if err == nil || errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("got %v, want the connection closed without a reply", err)
				}
				poll.Until(t, 10*time.Second, "the late payment", func() bool {
					_, made := paymentOf(h.sim, "alice", "req-wait")
					return made
				})
			})
		})
	}
}

// Close and Reset cancel a late act that has not acted: nothing is made
// afterwards, and no goroutine is left (TestMain checks for leaks).
func TestActLateCancelledByCloseAndReset(t *testing.T) {
	for _, end := range []string{"Close", "Reset"} {
		t.Run(end, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newBubbleHarness(t, Options{})
				tok := h.token("alice")
				h.sim.InjectFault(Fault{PathPrefix: "/v2/payments", ActLate: true, HangUp: true, Delay: 300 * time.Millisecond})
				if err := h.sendAs("/v2/payments", tok, "req-cancelled", paymentBody("Order cancelled"), 10*time.Second); err == nil {
					t.Fatal("got a reply, want the connection closed")
				}
				if end == "Close" {
					h.sim.Close()
				} else {
					h.sim.Reset()
				}
				// Close and Reset have waited for the act's goroutine: it can
				// only have returned without acting. The bubble's clock runs past
				// the delay in case it did not.
				time.Sleep(600 * time.Millisecond)
				synctest.Wait()
				if _, made := paymentOf(h.sim, "alice", "req-cancelled"); made {
					t.Errorf("a late act acted after %s", end)
				}
				if end == "Close" {
					h.sim.ClearFaults()
					h.sim.InjectFault(Fault{PathPrefix: "/v2/payments", ActLate: true, HangUp: true})
					if err := h.sendAs("/v2/payments", tok, "req-closed", paymentBody("Order after close"), 10*time.Second); err == nil {
						t.Fatal("after Close: got a reply, want the connection closed")
					}
					time.Sleep(300 * time.Millisecond)
					synctest.Wait()
					if _, made := paymentOf(h.sim, "alice", "req-closed"); made {
						t.Error("after Close, a late act acted")
					}
				}
			})
		})
	}
}

// The delay of a late act is bounded by what the BFF documents, and a
// fault that would answer cannot act late.
func TestActLateRefusals(t *testing.T) {
	h := newHarness(t, Options{Control: true})
	for _, body := range []map[string]any{
		{"actLate": true, "delay": "5001ms"},
		{"actLate": true, "status": 500},
		{"actLate": true, "afterActing": true, "hangUp": true},
	} {
		r := h.do("POST", "/_sim/faults", "", body)
		wantError(t, r, http.StatusBadRequest, typeClientError, "")
		if msg := r.json(t)["message"].(string); !strings.Contains(msg, "actLate") {
			t.Errorf("%v: got message %q, want it to name actLate", body, msg)
		}
	}
	if r := h.do("POST", "/_sim/faults", "", map[string]any{"actLate": true, "delay": "5s"}); r.status != http.StatusCreated {
		t.Errorf("delay 5s: got %d %s, want 201", r.status, r.body)
	}
	if r := h.do("POST", "/_sim/faults", "", map[string]any{"actLate": true}); r.status != http.StatusCreated {
		t.Errorf("actLate alone: got %d %s, want 201 (hang up, then act at once)", r.status, r.body)
	}
	defer func() {
		if recover() == nil {
			t.Error("InjectFault of an actLate fault with a 6s delay: want a panic")
		}
	}()
	h.sim.InjectFault(Fault{ActLate: true, Delay: 6 * time.Second})
}
