package upstreamsim

import (
	"bytes"
	"context"
	"crypto/hmac"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Payment-status webhooks (docs/upstream-sim-control.md). The upstream documents no events; the
// simulator can post them so the BFF's live status can be built and tested:
// with a webhookUrl set, every change of a payment's status posts
//
//	{"type":"payment.status_changed","timestamp":"<RFC 3339>",
//	 "data":{"id":"<paymentId>","status":"ACSC","updatedAt":"<RFC 3339>"}}
//
// signed as Standard Webhooks (https://www.standardwebhooks.com) asks:
// webhook-id, webhook-timestamp (unix seconds) and webhook-signature
// "v1,<base64 HMAC-SHA256(key, id.timestamp.body)>". The signer here is
// the simulator's own, not internal/webhooks', so that the tests that
// verify one with the other check two implementations.

// DefaultWebhookSecret signs webhooks when no secret is configured. Like
// the default client secret it is for development only: it is public, and
// a BFF with env: production refuses it (internal/webhooks lists it with
// every other secret printed in the repository).
const DefaultWebhookSecret = "whsec_dXBzdHJlYW0tc2ltIGRldmVsb3BtZW50IHdlYmhvb2tzIQ=="

// Delivery limits, as Standard Webhooks senders do it: retries with
// growing pauses, each try signed afresh under the same webhook-id.
const (
	webhookTries   = 5                      // then the delivery is given up
	webhookBackoff = 500 * time.Millisecond // before the second try, doubling after
	// webhookTimeout bounds one try: a receiver that hangs must not hold
	// the payment's later webhooks back for long.
	webhookTimeout = 5 * time.Second
	// maxDeliveries bounds the list GET /_sim/webhooks shows, as maxSeen
	// bounds the request log; the oldest go first.
	maxDeliveries = 1000
)

// decodeWebhookSecret reads "whsec_" and the base64 of 24 to 64 bytes (the
// lengths Standard Webhooks allows). Its error never quotes the secret.
func decodeWebhookSecret(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, "whsec_")
	key, err := base64.StdEncoding.DecodeString(b64)
	if !ok || err != nil || len(key) < 24 || len(key) > 64 {
		return nil, errors.New(`must be "whsec_" followed by the standard base64 of 24 to 64 random bytes`)
	}
	return key, nil
}

// validWebhookURL accepts "" (webhooks off) or an absolute http(s) URL with
// no user info (it would be a password shown by GET /_sim/settings) and
// no fragment.
func validWebhookURL(raw string) bool {
	if raw == "" {
		return true
	}
	u, err := url.Parse(raw)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.User == nil && u.Fragment == ""
}

// webhookSignature is the webhook-signature value of body sent as id at
// the unix second ts under key.
func webhookSignature(key []byte, id string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s.%d.", id, ts)
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// Delivery is one webhook as GET /_sim/webhooks lists it.
type Delivery struct {
	ID        string `json:"id"` // the webhook-id, the same on every try
	PaymentID string `json:"paymentId"`
	Status    string `json:"status"` // the payment status it announces
	Attempts  int    `json:"attempts"`
	// LastHTTPStatus is the receiver's answer to the last try; 0 before
	// the first or when the last got no answer (see LastError).
	LastHTTPStatus int    `json:"lastHttpStatus"`
	LastError      string `json:"lastError,omitempty"`
	Delivered      bool   `json:"delivered"` // a try got a 2xx
}

// delivery is a webhook and its progress. Its fixed fields are set before
// it is queued; the rest are guarded by webhookSender.mu.
type delivery struct {
	Delivery
	url  string
	key  []byte
	body []byte
	// firstTS and firstSig are the first try's, for redeliver; "" before
	// the first try.
	firstTS, firstSig string
}

// webhookRun is one generation of deliveries: Reset and Close end it
// (cancelling what is in flight) and Reset starts another.
type webhookRun struct {
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	list      []*delivery            // oldest first
	queues    map[string][]*delivery // per payment; the head is being sent
	scheduled bool                   // the settlement timer runs
	wake      chan struct{}          // pokes the settlement timer
}

func newWebhookRun() *webhookRun {
	ctx, cancel := context.WithCancel(context.Background())
	return &webhookRun{ctx: ctx, cancel: cancel, queues: map[string][]*delivery{}, wake: make(chan struct{}, 1)}
}

// webhookSender posts webhooks, one payment's in the order they were
// queued, each on its own goroutine per payment and outside every lock
// but its own (held only to read and record state). It is safe for
// concurrent use.
type webhookSender struct {
	client  *http.Client
	now     func() time.Time // the webhook-timestamp's clock
	log     *slog.Logger
	backoff time.Duration // set before the first delivery; tests shorten it
	mu      sync.Mutex
	run     *webhookRun
	closed  bool
}

func newWebhookSender(now func() time.Time, log *slog.Logger) *webhookSender {
	return &webhookSender{
		client: &http.Client{
			// A 3xx is an answer, not a 2xx: senders do not follow
			// redirects, so a moved receiver shows as failed deliveries.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		now: now, log: log, backoff: webhookBackoff, run: newWebhookRun(),
	}
}

// enqueue records d and starts delivering it after the payment's earlier
// webhooks. Callers hold the payment owner's mu, so a payment's webhooks
// are queued in the order its changes happened.
func (w *webhookSender) enqueue(d *delivery) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	run := w.run
	if len(run.list) == maxDeliveries {
		run.list = slices.Delete(run.list, 0, 1)
	}
	run.list = append(run.list, d)
	q := run.queues[d.PaymentID]
	run.queues[d.PaymentID] = append(q, d)
	if len(q) == 0 { // no goroutine is sending this payment's webhooks
		run.wg.Add(1)
		go w.drain(run, d.PaymentID)
	}
}

// drain sends the payment's queued webhooks in order until none is left
// or the run ends.
func (w *webhookSender) drain(run *webhookRun, paymentID string) {
	defer run.wg.Done()
	for {
		w.mu.Lock()
		q := run.queues[paymentID]
		if len(q) == 0 || run.ctx.Err() != nil {
			delete(run.queues, paymentID)
			w.mu.Unlock()
			return
		}
		d := q[0]
		w.mu.Unlock()
		w.deliver(run.ctx, d)
		w.mu.Lock()
		run.queues[paymentID] = run.queues[paymentID][1:]
		w.mu.Unlock()
	}
}

// deliver tries d until a 2xx, webhookTries tries, or ctx ends. Every try
// has the same webhook-id and a fresh timestamp and signature, so a
// receiver that checks the timestamp accepts a late retry and drops a
// duplicate by its id.
func (w *webhookSender) deliver(ctx context.Context, d *delivery) {
	pause := w.backoff
	for try := 1; try <= webhookTries; try++ {
		if try > 1 {
			t := time.NewTimer(pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			pause *= 2
		}
		secs := w.now().Unix()
		ts, sig := strconv.FormatInt(secs, 10), webhookSignature(d.key, d.ID, secs, d.body)
		w.mu.Lock()
		if d.firstSig == "" {
			d.firstTS, d.firstSig = ts, sig
		}
		w.mu.Unlock()
		status, err := w.post(ctx, d.url, d.ID, ts, sig, d.body)
		w.mu.Lock()
		d.Attempts, d.LastHTTPStatus, d.LastError = d.Attempts+1, status, ""
		if err != nil {
			d.LastError = err.Error()
		}
		d.Delivered = status >= 200 && status < 300
		w.mu.Unlock()
		w.log.LogAttrs(ctx, slog.LevelDebug, "upstream-sim webhook",
			slog.String("id", d.ID), slog.String("paymentId", d.PaymentID), slog.String("status", d.Status),
			slog.Int("try", try), slog.Int("httpStatus", status), slog.Any("error", err))
		if d.Delivered || ctx.Err() != nil {
			return
		}
	}
}

// post sends one try and returns the receiver's status (0 with no answer).
func (w *webhookSender) post(ctx context.Context, target, id, ts, sig string, body []byte) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, webhookTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "upstream-sim")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", ts)
	req.Header.Set("webhook-signature", sig)
	res, err := w.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10)) // so the connection is reused; the answer is not read
	_ = res.Body.Close()
	return res.StatusCode, nil
}

// list returns the deliveries of the current run, oldest first.
func (w *webhookSender) list() []Delivery {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Delivery, len(w.run.list))
	for i, d := range w.run.list {
		out[i] = d.Delivery
	}
	return out
}

// find returns the delivery id of the current run and its first try's
// timestamp and signature ("" before that try).
func (w *webhookSender) find(id string) (d *delivery, ts, sig string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, d := range w.run.list {
		if d.ID == id {
			return d, d.firstTS, d.firstSig
		}
	}
	return nil, "", ""
}

// stop ends the current run, waits for its goroutines, and, unless
// closing, starts a new empty one.
func (w *webhookSender) stop(closing bool) {
	w.mu.Lock()
	old := w.run
	w.run = newWebhookRun()
	w.closed = w.closed || closing
	w.mu.Unlock()
	old.cancel()
	old.wg.Wait()
}

// paymentChanged queues the webhook of p's status when it is not before
// (the status p had when the caller began) and a webhookUrl is set. The
// caller holds the owner's mu.
func (s *Server) paymentChanged(p *payment, before string) {
	k := s.knobs.Load()
	if p.Status == before || k.webhookURL == "" {
		return
	}
	type data struct {
		ID        string `json:"id"`
		Status    string `json:"status"`
		UpdatedAt string `json:"updatedAt"`
	}
	body, _ := json.Marshal(struct { // cannot fail: strings only
		Type      string `json:"type"`
		Timestamp string `json:"timestamp"`
		Data      data   `json:"data"`
	}{"payment.status_changed", p.UpdatedAt.UTC().Format(time.RFC3339),
		data{p.ID, p.Status, p.UpdatedAt.UTC().Format(time.RFC3339Nano)}})
	s.hooks.enqueue(&delivery{
		Delivery: Delivery{ID: "msg_" + crand.Text(), PaymentID: p.ID, Status: p.Status},
		url:      k.webhookURL, key: k.webhookKey, body: body,
	})
}

// settle is p.settle with its webhook. The caller holds the owner's mu.
func (s *Server) settle(p *payment, now time.Time) {
	before := p.Status
	p.settle(now)
	s.paymentChanged(p, before)
}

// settleDue settles, with their webhooks, the payments whose settlement
// time has come, and returns the earliest settlement still ahead (zero
// if none). Reads settle lazily and get the same result; this is for
// webhooks, which must go out at the settlement's time even if nobody
// reads. It does nothing while webhooks are off.
func (s *Server) settleDue() time.Time {
	if s.knobs.Load().webhookURL == "" {
		return time.Time{}
	}
	now := s.clock.now()
	s.users.mu.Lock()
	all := slices.Collect(maps.Values(s.users.users))
	s.users.mu.Unlock()
	var next time.Time
	for _, u := range all {
		u.mu.Lock()
		for _, p := range u.payments {
			if p.Status != statusPending || p.initiatedAt.IsZero() {
				continue
			}
			if s.settle(p, now); p.Status == statusPending {
				if due := p.initiatedAt.Add(settleAfter); next.IsZero() || due.Before(next) {
					next = due
				}
			}
		}
		u.mu.Unlock()
	}
	return next
}

// wakeSettler has the settlement timer look again (a payment was
// initiated, the clock moved, webhooks were turned on), starting it if
// webhooks are on and it does not run.
func (s *Server) wakeSettler() {
	w := s.hooks
	w.mu.Lock()
	defer w.mu.Unlock()
	run := w.run
	if w.closed || (s.knobs.Load().webhookURL == "" && !run.scheduled) {
		return
	}
	if !run.scheduled {
		run.scheduled = true
		run.wg.Add(1)
		go s.settler(run)
	}
	select {
	case run.wake <- struct{}{}:
	default: // already poked
	}
}

// settler settles payments as their time comes, by the simulator's clock.
// The clock can be moved (Advance) or be an injected one that does not
// follow the host's, so a wait is only a guess: it looks again after it,
// when poked, and Advance settles at once itself.
func (s *Server) settler(run *webhookRun) {
	defer run.wg.Done()
	for {
		var timer *time.Timer
		var fired <-chan time.Time
		if next := s.settleDue(); !next.IsZero() {
			// At least a little: the clock reads in whole seconds, so a
			// settlement can be due a moment after it reads as not yet.
			timer = time.NewTimer(max(next.Sub(s.clock.now()), 100*time.Millisecond))
			fired = timer.C
		}
		select {
		case <-run.ctx.Done():
		case <-run.wake:
		case <-fired:
		}
		if timer != nil {
			timer.Stop()
		}
		if run.ctx.Err() != nil {
			return
		}
	}
}

// Webhooks returns the webhooks posted (or being posted) since the last
// Reset, oldest first, at most the last 1000.
func (s *Server) Webhooks() []Delivery { return s.hooks.list() }

// Close stops posting webhooks and the settlement timer, cancelling tries
// in flight, and cancels the late acts of ActLate faults that have not
// acted yet; it waits for all of them to end. The simulator still serves;
// it posts no webhook after Close, and an ActLate fault then hangs up
// without acting.
func (s *Server) Close() {
	s.late.stop(true) // first: a late act may queue a webhook
	s.hooks.stop(true)
}

// webhookControl adds the webhook control calls to mux:
//
//	GET  /_sim/webhooks                  the deliveries, oldest first: [Delivery]
//	POST /_sim/webhooks/{id}/redeliver   replay one: 200 {"id","httpStatus","error"?}
//
// Redeliver is a replay tool: it posts the stored body with its first
// try's webhook-timestamp and webhook-signature, byte for byte, once,
// and waits for the answer; it changes nothing the list shows. A receiver
// that checks timestamps refuses it once they are older than its
// tolerance, and one that remembers ids drops it as a duplicate: that is
// what it is for. A delivery not tried yet is 409.
func (s *Server) webhookControl(mux *http.ServeMux) {
	mux.HandleFunc("GET /_sim/webhooks", func(w http.ResponseWriter, r *http.Request) {
		if !noBody(w, r) {
			return
		}
		writeJSON(w, http.StatusOK, s.Webhooks())
	})
	mux.HandleFunc("POST /_sim/webhooks/{id}/redeliver", func(w http.ResponseWriter, r *http.Request) {
		if !noBody(w, r) {
			return
		}
		id := r.PathValue("id")
		d, ts, sig := s.hooks.find(id)
		switch {
		case d == nil:
			writeAPIError(w, notFound("No webhook %q", id))
			return
		case sig == "":
			writeAPIError(w, newError(http.StatusConflict, typeClientError, "Webhook %s has not been sent yet", id))
			return
		}
		status, err := s.hooks.post(r.Context(), d.url, d.ID, ts, sig, d.body)
		out := struct {
			ID         string `json:"id"`
			HTTPStatus int    `json:"httpStatus"`
			Error      string `json:"error,omitempty"`
		}{ID: d.ID, HTTPStatus: status}
		if err != nil {
			out.Error = err.Error()
		}
		writeJSON(w, http.StatusOK, out)
	})
}
