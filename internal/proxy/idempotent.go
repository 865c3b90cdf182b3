package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/problem"
)

// Ledger is what the proxy needs of the ledger of money-moving requests
// (ledger.Postgres, or ledger.Memory in development); see package ledger
// for the protocol.
type Ledger interface {
	Claim(ctx context.Context, req ledger.Request, bound time.Duration) (*ledger.Claim, *ledger.Record, error)
	Finish(ctx context.Context, c *ledger.Claim, o ledger.Outcome) (bool, error)
	Release(ctx context.Context, c *ledger.Claim, o ledger.Outcome) (bool, error)
	Unknown(ctx context.Context, c *ledger.Claim, o ledger.Outcome) (bool, error)
	Abandon(ctx context.Context, id int64) (bool, error)
	Settle(ctx context.Context, id int64, o ledger.Outcome) (bool, error)
	Neighbours(ctx context.Context, req ledger.Request, except int64, since time.Time) (ledger.Neighbours, error)
	Event(ctx context.Context, id int64, req ledger.Request, what string) error
}

var (
	_ Ledger = (*ledger.Postgres)(nil)
	_ Ledger = (*ledger.Memory)(nil)
)

// MaxKeyLen bounds an Idempotency-Key.
const MaxKeyLen = 255

// ownerMargin is how long after its upstream deadline the owner of a claim
// may still be storing its outcome. A claim's deadline is the upstream
// timeout plus this: past it, the owner can no longer reach the upstream,
// so another request may call the outcome unknown (never run it again).
const ownerMargin = 5 * time.Second

// ledgerTimeout bounds each ledger call: a database that does not answer
// fails the payment with a clear 503 before anything is sent. storeTimeout
// bounds the credit guard's give-back to Redis the same way.
const (
	ledgerTimeout = 3 * time.Second
	storeTimeout  = 3 * time.Second
)

// maxReplayBytes bounds a response kept for replay; money-moving replies
// are a few hundred bytes.
const maxReplayBytes = 1 << 20

// replayHeaders are the response headers kept with a stored response.
var replayHeaders = []string{"Content-Type", "Location", "Retry-After", "Allow", "Cache-Control", "X-Request-Id"}

// refused are answers that show the upstream did not act: the key is given
// back and a repeat with it runs again.
var refused = map[string]bool{
	problem.CodeProviderUnavailable: true, problem.CodeUpstreamAuthFailed: true,
	problem.CodeResourceLocked: true,
}

// ValidKey reports whether an Idempotency-Key is acceptable: 1 to 255
// printable ASCII characters.
func ValidKey(k string) bool {
	if len(k) == 0 || len(k) > MaxKeyLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// fingerprint identifies a request: method, path, query and body.
func fingerprint(method, path, query string, body []byte) []byte {
	h := sha256.New()
	for _, s := range []string{method, path, query} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	h.Write(body)
	return h.Sum(nil)
}

// forwardMoney runs a money-moving POST at most once per key: claimed in
// the ledger before the upstream call, never sent again after an end the
// BFF cannot read. It returns the code of a stored refusal it replayed, or
// this request's failure.
func (f *Forwarder) forwardMoney(w http.ResponseWriter, r *http.Request, st *callState, body []byte, moneyRoute string) (string, error) {
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		f.metrics.money("key_required")
		return "", problem.New(problem.CodeIdempotencyKeyRequired, "send an Idempotency-Key header (a fresh random value per payment, kept across its retries)")
	}
	if !ValidKey(key) {
		f.metrics.money("key_invalid")
		return "", problem.New(problem.CodeIdempotencyKeyInvalid, "the Idempotency-Key must be 1 to 255 printable ASCII characters")
	}
	req := ledger.Request{
		UserID: st.UserID, Route: moneyRoute, Key: key, Fingerprint: fingerprint(r.Method, st.path, r.URL.RawQuery, body),
		Match: matchKey(body), SessionRef: st.SessionRef, ClientIP: st.ClientIP, RequestID: st.RequestID,
	}
	// The payment call is detached from the client: a mobile app that loses
	// its connection mid-payment finds the outcome stored when it retries.
	// Its deadline starts before the claim, so the claim's deadline (the
	// same timeout plus ownerMargin, on the database's clock) comes later.
	detached := context.WithoutCancel(r.Context())
	ctx, cancel := context.WithTimeout(detached, f.timeout)
	defer cancel()
	lctx, lcancel := context.WithTimeout(detached, ledgerTimeout)
	claim, rec, err := f.ledger.Claim(lctx, req, f.timeout+ownerMargin)
	lcancel()
	switch {
	case err != nil:
		return "", f.ledgerFailed(st, err)
	case rec != nil:
		return f.repeat(w, r, st, req, rec, body)
	}
	out := &recorder{header: http.Header{}}
	f.serve(out, r, st, ctx)
	answer, err := f.conclude(detached, st, req, claim, body, out)
	if err != nil {
		return "", err
	}
	answer.copyTo(w)
	return "", nil
}

// conclude records how the owner's request ended and returns the answer
// the client gets: a response to write, or the failure.
func (f *Forwarder) conclude(ctx context.Context, st *callState, req ledger.Request, claim *ledger.Claim, body []byte, out *recorder) (*recorder, error) {
	o := ledger.Outcome{UpstreamStatus: st.upstreamStatus}
	release := func(ending string) (*recorder, error) {
		o.Ending = ending
		f.record(ctx, st, "released", func(ctx context.Context) (bool, error) { return f.ledger.Release(ctx, claim, o) })
		return out, st.failure()
	}
	answered := !out.over && st.upstreamStatus > 0
	code := ""
	if st.err != nil {
		code = st.err.Code
	}
	switch {
	case st.notSent:
		return release(ledger.EndNotSent)
	case answered && refused[code]:
		return release(ledger.EndRefused)
	case answered && st.upstreamStatus < 500:
		if st.err != nil {
			// The upstream's refusal, kept as the client will see it (the
			// caller renders the same problem for this request id) so that
			// a repeat replays it.
			problem.Write(out, st.err, st.RequestID)
		}
		o.Ending, o.Response = ledger.EndAnswered, out.response()
		if st.upstreamStatus < 300 {
			o.PaymentID = paymentID(out.body.Bytes())
		}
		f.record(ctx, st, "answered", func(ctx context.Context) (bool, error) { return f.ledger.Finish(ctx, claim, o) })
		return out, st.failure()
	}
	// Sent, and the answer does not show a payment: ask the upstream
	// whether one exists before anything else.
	if settled, ok := f.settle(ctx, st, req, claim.ID, time.Now(), body); ok {
		settled.UpstreamStatus = st.upstreamStatus
		f.record(ctx, st, "settled", func(ctx context.Context) (bool, error) { return f.ledger.Finish(ctx, claim, settled) })
		return fromResponse(settled.Response), nil
	}
	if answered && st.upstreamType != "" {
		// The upstream's own error body (a typed 5xx): by its
		// specification an HTTP error means the request failed, and no
		// payment was found. The client may run it again.
		return release(ledger.EndFailed)
	}
	// A timeout, a hang-up, a gateway's 5xx, a reply too large to keep:
	// the outcome is unknown and the key is never sent again.
	o.Ending = ledger.EndAmbiguous
	f.record(ctx, st, "unknown", func(ctx context.Context) (bool, error) { return f.ledger.Unknown(ctx, claim, o) })
	return nil, outcomeUnknown(code, st.upstreamStatus)
}

// record stores an owner's outcome, trying again while the ledger does not
// answer within ownerMargin. Should it never land, the claim stays in
// flight, turns unknown at its deadline and is settled from the upstream:
// never run twice.
func (f *Forwarder) record(ctx context.Context, st *callState, result string, write func(context.Context) (bool, error)) {
	f.metrics.money(result)
	ctx, cancel := context.WithTimeout(ctx, ownerMargin)
	defer cancel()
	delay := 100 * time.Millisecond
	for {
		wctx, wcancel := context.WithTimeout(ctx, ledgerTimeout)
		_, err := write(wctx)
		wcancel()
		if err == nil {
			return
		}
		if sleep(ctx, delay) != nil {
			f.log.Error("a payment's outcome could not be written to the ledger; it turns unknown at its deadline and is settled from the upstream",
				slog.String("requestId", st.RequestID), slog.String("outcome", result), slog.String("error", err.Error()))
			return
		}
		delay *= 2
	}
}

// repeat answers a request whose key another request already claimed: the
// stored answer written to w (and its code, when a refusal), or the failure.
func (f *Forwarder) repeat(w http.ResponseWriter, r *http.Request, st *callState, req ledger.Request, rec *ledger.Record, body []byte) (string, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), f.timeout)
	defer cancel()
	event := func(what string) {
		f.metrics.money(what)
		ectx, ecancel := context.WithTimeout(ctx, ledgerTimeout)
		defer ecancel()
		if err := f.ledger.Event(ectx, rec.ID, req, what); err != nil {
			f.log.Warn("a payment's audit event could not be written", slog.String("requestId", st.RequestID), slog.String("error", err.Error()))
		}
	}
	switch {
	case !bytes.Equal(rec.Fingerprint, req.Fingerprint):
		event(ledger.EventReused)
		return "", problem.New(problem.CodeIdempotencyKeyReused, "this Idempotency-Key was used for a different request")
	case rec.State == ledger.StateDone:
		event(ledger.EventReplayed)
		return replay(w, rec.Response), nil
	case rec.State == ledger.StateInFlight && rec.Expired:
		// The owner is past its deadline: it died or hung, and can no
		// longer reach the upstream.
		if _, err := f.ledger.Abandon(ctx, rec.ID); err != nil {
			return "", f.ledgerFailed(st, err)
		}
	case rec.State != ledger.StateUnknown: // in flight (or released, for a moment)
		event(ledger.EventInProgress)
		p := problem.New(problem.CodeIdempotencyInProgress, "a request with this Idempotency-Key is still being processed; retry shortly")
		p.RetryAfter = "1"
		return "", p
	}
	if o, ok := f.settle(ctx, st, req, rec.ID, rec.ClaimedAt, body); ok {
		applied, err := f.ledger.Settle(ctx, rec.ID, o)
		if err != nil {
			return "", f.ledgerFailed(st, err)
		}
		if !applied { // settled by another request meanwhile: replay what it stored
			lctx, lcancel := context.WithTimeout(ctx, ledgerTimeout)
			_, rec, err = f.ledger.Claim(lctx, req, f.timeout+ownerMargin)
			lcancel()
			if err != nil || rec == nil || rec.State != ledger.StateDone {
				return "", f.ledgerFailed(st, errors.Join(err, errors.New("the settled record could not be read back")))
			}
			o.Response = rec.Response
		}
		event(ledger.EventSettled)
		return replay(w, o.Response), nil
	}
	event(ledger.EventUnknown)
	return "", outcomeUnknown("", rec.UpstreamStatus)
}

// ledgerFailed is 503 LEDGER_UNAVAILABLE: nothing was sent upstream.
func (f *Forwarder) ledgerFailed(st *callState, err error) *problem.Problem {
	f.metrics.money("ledger_unavailable")
	f.log.Error("the payments ledger failed; the payment was not sent", slog.String("requestId", st.RequestID), slog.String("error", err.Error()))
	detail := "payments cannot be recorded right now; nothing was sent, retry with the same Idempotency-Key"
	if errors.Is(err, ledger.ErrUnreadable) {
		detail = "this payment's stored answer cannot be read right now; nothing was sent again"
	}
	return problem.Wrap(problem.CodeLedgerUnavailable, detail, err)
}

// outcomeUnknown is the answer when the upstream may or may not have acted.
func outcomeUnknown(code string, status int) *problem.Problem {
	detail := "the upstream may or may not have made this payment and it could not be confirmed; it will not be sent again. Check the payment list before making a new payment"
	switch {
	case code == problem.CodeUpstreamTimeout:
		detail = "the upstream did not answer in time; " + detail
	case status >= 500:
		detail = "the upstream failed while handling this payment; " + detail
	}
	return problem.New(problem.CodePaymentOutcomeUnknown, detail)
}

// paymentID reads the id a 2xx money-moving reply names, for the audit.
func paymentID(body []byte) string {
	var v struct {
		ID        string `json:"id"`
		PaymentID string `json:"paymentId"`
	}
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	if v.ID != "" {
		return v.ID
	}
	return v.PaymentID
}

// replay writes a stored response, marked Idempotent-Replayed, and returns
// its error code when it is a stored refusal.
func replay(w http.ResponseWriter, s *ledger.Response) string {
	h := w.Header()
	for k, v := range s.Header {
		h[k] = v
	}
	h.Set("Idempotent-Replayed", "true")
	code := ""
	if s.Status >= 400 {
		var p struct {
			Code string `json:"code"`
		}
		if json.Unmarshal(s.Body, &p) == nil {
			code = p.Code
		}
	}
	w.WriteHeader(s.Status)
	_, _ = w.Write(s.Body)
	return code
}

// recorder buffers a whole response (up to maxReplayBytes) so it can be
// stored before the client sees it.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
	over   bool
}

func fromResponse(r *ledger.Response) *recorder {
	rec := &recorder{header: r.Header.Clone(), status: r.Status}
	rec.body.Write(r.Body)
	return rec
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.body.Len()+len(b) > maxReplayBytes {
		r.over = true
		return 0, errors.New("proxy: reply too large to keep")
	}
	return r.body.Write(b)
}

func (r *recorder) Flush() {}

func (r *recorder) response() *ledger.Response {
	h := http.Header{}
	for _, k := range replayHeaders {
		if v := r.header.Values(k); len(v) > 0 {
			h[k] = v
		}
	}
	return &ledger.Response{Status: r.status, Header: h, Body: bytes.Clone(r.body.Bytes())}
}

func (r *recorder) copyTo(w http.ResponseWriter) {
	h := w.Header()
	for k, v := range r.header {
		h[k] = v
	}
	if r.status == 0 {
		r.status = http.StatusOK
	}
	w.WriteHeader(r.status)
	_, _ = w.Write(r.body.Bytes())
}
