package edge

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/metrics"
	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/webhooks"
)

// The answers a webhook sender sees (docs/payments.md, "Webhooks"): a verified webhook is 204,
// also a webhook-id taken already (the sender's retry after a lost 2xx)
// and a type the BFF does not read, and neither changes anything; a forged
// signature is 403 and a stale timestamp 400, as before. Senders retry
// what is not 2xx and disable an endpoint that keeps failing.
func TestWebhookAnswers(t *testing.T) {
	ctx := context.Background()
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("a-webhook-signing-key-of-32-bytes"))
	other := "whsec_" + base64.StdEncoding.EncodeToString([]byte("another-signing-key-of-32-bytes!!"))
	v, err := webhooks.NewVerifier([]string{secret}, webhooks.DefaultTolerance)
	if err != nil {
		t.Fatal(err)
	}
	led, err := ledger.NewMemory(nil, make([]byte, 32), nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	obs := metrics.New(reg)
	pay := payments.New(payments.Options{Ledger: led, Observe: obs.Payments})
	const user, pid = "hooked", "01JWEBHOOKPAYMENT"
	fp := make([]byte, 32)
	c, _, err := led.Claim(ctx, ledger.Request{UserID: user, Route: "/v2/payments", Key: "hook-1", Fingerprint: fp, RequestID: "r1"}, time.Hour)
	if err != nil || c == nil {
		t.Fatalf("claim: %v", err)
	}
	if ok, err := led.Finish(ctx, c, ledger.Outcome{Ending: ledger.EndAnswered, UpstreamStatus: 201, PaymentID: pid,
		Response: &ledger.Response{Status: 201, Body: []byte(`{"id":"` + pid + `"}`)}}); !ok || err != nil {
		t.Fatalf("finish: %v %v", ok, err)
	}

	e := echo.New()
	e.HTTPErrorHandler = errorHandler(slog.New(slog.DiscardHandler), false)
	e.Use(requestIDMiddleware(nil))
	e.POST("/webhooks/payments", receiveWebhook(Webhooks{Path: "/webhooks/payments", Verifier: v, Payments: pay}, obs.Edge))
	post := func(id string, ts time.Time, signWith, body string) *httptest.ResponseRecorder {
		t.Helper()
		sig, err := webhooks.Sign(signWith, id, ts, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("POST", "/webhooks/payments", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("webhook-id", id)
		r.Header.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
		r.Header.Set("webhook-signature", sig)
		w := httptest.NewRecorder()
		e.ServeHTTP(w, r)
		return w
	}
	status := func(st string, at time.Time) string {
		return fmt.Sprintf(`{"type":"payment.status_changed","timestamp":%q,"data":{"id":%q,"status":%q,"updatedAt":%q}}`,
			at.UTC().Format(time.RFC3339), pid, st, at.UTC().Format(time.RFC3339))
	}
	stored := func() string {
		t.Helper()
		ch, err := pay.Changes(ctx, user, 0)
		if err != nil || len(ch) != 1 || ch[0].Record.PaymentStatus == nil {
			t.Fatalf("changes: %+v, %v", ch, err)
		}
		return *ch[0].Record.PaymentStatus
	}
	wantAnswer := func(what string, w *httptest.ResponseRecorder, code int, problemCode string) {
		t.Helper()
		if w.Code != code {
			t.Fatalf("%s: got %d %s, want %d", what, w.Code, w.Body, code)
		}
		if problemCode == "" {
			if w.Body.Len() != 0 {
				t.Fatalf("%s: a body %q, want none", what, w.Body)
			}
			return
		}
		var p problem.Problem
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Code != problemCode || w.Header().Get("Content-Type") != "application/problem+json" {
			t.Fatalf("%s: got %s %s, want the envelope with %s", what, w.Header().Get("Content-Type"), w.Body, problemCode)
		}
	}

	now := time.Now()
	wantAnswer("the first delivery", post("msg_1", now, secret, status("ACSP", now.Add(-time.Minute))), 204, "")
	if got := stored(); got != "ACSP" {
		t.Fatalf("after the first delivery: %s, want ACSP", got)
	}
	wantAnswer("the sender's retry", post("msg_1", now, secret, status("ACSP", now.Add(-time.Minute))), 204, "")
	// The same id with another (later) status: a replay all the same.
	wantAnswer("the id again, another body", post("msg_1", now.Add(time.Second), secret, status("RJCT", now)), 204, "")
	if got := stored(); got != "ACSP" {
		t.Fatalf("after the replays: %s, want ACSP (nothing changed)", got)
	}

	unknown := fmt.Sprintf(`{"type":"payment.refunded","timestamp":%q,"data":{"id":%q,"status":"RJCT"}}`, now.UTC().Format(time.RFC3339), pid)
	wantAnswer("an unknown type", post("msg_2", now, secret, unknown), 204, "")
	if got := stored(); got != "ACSP" {
		t.Fatalf("after an unknown type: %s, want ACSP (nothing changed)", got)
	}
	// A status the upstream added is acknowledged and changes nothing.
	wantAnswer("an unknown status", post("msg_7", now, secret, status("DONE", now.Add(time.Minute))), 204, "")
	if got := stored(); got != "ACSP" {
		t.Fatalf("after an unknown status: %s, want ACSP (nothing changed)", got)
	}
	// The ignored message's id was not taken: a status under it is news.
	wantAnswer("a status under the ignored id", post("msg_2", now, secret, status("ACSC", now)), 204, "")
	if got := stored(); got != "ACSC" {
		t.Fatalf("a status under the ignored message's id: %s, want ACSC", got)
	}

	// What a sender cannot have sent keeps its refusal, and changes nothing.
	wantAnswer("a forged signature", post("msg_3", now, other, status("RJCT", now.Add(time.Minute))), 403, problem.CodeForbidden)
	wantAnswer("a forged unknown type", post("msg_4", now, other, unknown), 403, problem.CodeForbidden)
	wantAnswer("a stale timestamp", post("msg_5", now.Add(-webhooks.DefaultTolerance-time.Minute), secret, status("RJCT", now.Add(time.Minute))), 400, problem.CodeBadRequest)
	wantAnswer("a stale unknown type", post("msg_6", now.Add(-webhooks.DefaultTolerance-time.Minute), secret, unknown), 400, problem.CodeBadRequest)
	noTime := fmt.Sprintf(`{"type":"payment.status_changed","data":{"id":%q,"status":"RJCT"}}`, pid)
	wantAnswer("a status without updatedAt", post("msg_8", now, secret, noTime), 400, problem.CodeBadRequest)
	if got := stored(); got != "ACSC" {
		t.Fatalf("after the refusals: %s, want ACSC", got)
	}

	m, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range m {
		if f.GetName() == "bff_payment_follow_total" {
			for _, s := range f.GetMetric() {
				got[s.GetLabel()[0].GetValue()] = s.GetCounter().GetValue()
			}
		}
	}
	want := map[string]float64{"webhook_applied": 2, "webhook_replayed": 2, "webhook_ignored": 2, "webhook_forged": 2, "webhook_stale": 2, "webhook_malformed": 1}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("bff_payment_follow_total{result=%q} = %v, want %v (all: %v)", k, got[k], n, got)
		}
	}
}
