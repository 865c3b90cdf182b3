package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/fintech-bff/bff/internal/idempotency"
	"github.com/fintech-bff/bff/internal/problem"
)

// moneyRoutes are the route templates whose POSTs move money: they accept
// (and may require) an Idempotency-Key.
var moneyRoutes = map[string]bool{"/v2/payments": true, "/v2/pay": true}

// maxReplayBytes bounds a response kept for replay; money-moving replies
// are a few hundred bytes.
const maxReplayBytes = 1 << 20

// replayHeaders are the response headers kept with a stored response.
var replayHeaders = []string{"Content-Type", "Location", "Retry-After", "Allow", "Cache-Control", "X-Request-Id"}

// releasable are answers that show the upstream did not act, so the key is
// given back and a retry with it runs again. Everything else (2xx, 4xx,
// and ambiguous 5xx or timeouts, after which the payment may exist) is
// kept and replayed: a retry never moves money twice.
var releasable = map[string]bool{
	problem.CodeProviderUnavailable: true, problem.CodeUpstreamAuthFailed: true,
	problem.CodeResourceLocked: true,
}

// forwardIdempotent runs a money-moving POST under its Idempotency-Key.
func (f *Forwarder) forwardIdempotent(w http.ResponseWriter, r *http.Request, st *callState, body []byte) {
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		if f.requireKey {
			problem.Write(w, problem.New(problem.CodeIdempotencyKeyRequired, "send an Idempotency-Key header with payments"), st.RequestID)
			return
		}
		f.serve(w, r, st, r.Context())
		return
	}
	fp := idempotency.Fingerprint(r.Method, st.path, r.URL.RawQuery, body)
	claim, stored, err := f.idem.Begin(r.Context(), st.UserID, key, fp)
	switch {
	case errors.Is(err, idempotency.ErrInvalidKey):
		problem.Write(w, problem.New(problem.CodeIdempotencyKeyInvalid, "the Idempotency-Key must be 1 to 255 printable ASCII characters"), st.RequestID)
		return
	case errors.Is(err, idempotency.ErrKeyReused):
		problem.Write(w, problem.New(problem.CodeIdempotencyKeyReused, "this Idempotency-Key was used for a different request"), st.RequestID)
		return
	case errors.Is(err, idempotency.ErrInProgress):
		p := problem.New(problem.CodeIdempotencyInProgress, "a request with this Idempotency-Key is still being processed; retry shortly")
		p.RetryAfter = "1"
		problem.Write(w, p, st.RequestID)
		return
	case err != nil:
		problem.Write(w, problem.Wrap(problem.CodeSessionStoreUnavailable, "idempotency keys cannot be checked right now", err), st.RequestID)
		return
	case stored != nil:
		f.log.LogAttrs(r.Context(), slog.LevelInfo, "idempotent replay", slog.String("requestId", st.RequestID), slog.String("route", st.route))
		replay(w, stored)
		return
	}
	// The payment call is detached from the client: a mobile app that loses
	// its connection mid-payment finds the outcome stored when it retries.
	rec := &recorder{header: http.Header{}}
	f.serve(rec, r, st, context.WithoutCancel(r.Context()))
	ctx := context.WithoutCancel(r.Context())
	switch {
	case rec.over:
		_ = f.idem.Release(ctx, claim)
		rec = &recorder{header: http.Header{}}
		problem.Write(rec, problem.New(problem.CodeUpstreamError, "the upstream reply is too large to keep for idempotent replay"), st.RequestID)
	case st.notSent || releasable[rec.code]:
		if err := f.idem.Release(ctx, claim); err != nil {
			f.log.Warn("an idempotency key could not be released", slog.String("requestId", st.RequestID), slog.String("error", err.Error()))
		}
	default:
		if err := f.idem.Finish(ctx, claim, rec.response()); err != nil {
			f.log.Error("an idempotent response could not be stored; a retry with the same key answers 409 until the claim expires",
				slog.String("requestId", st.RequestID), slog.String("error", err.Error()))
		}
	}
	rec.copyTo(w)
}

// replay writes a stored response, marked Idempotent-Replayed.
func replay(w http.ResponseWriter, s *idempotency.Response) {
	h := w.Header()
	for k, v := range s.Header {
		h[k] = v
	}
	h.Set("Idempotent-Replayed", "true")
	if s.Status >= 400 {
		var p struct {
			Code string `json:"code"`
		}
		if jsonCode(s.Body, &p) {
			problem.Record(w, p.Code)
		}
	}
	w.WriteHeader(s.Status)
	_, _ = w.Write(s.Body)
}

// recorder buffers a whole response (up to maxReplayBytes) so it can be
// stored before the client sees it.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
	code   string
	over   bool
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

// RecordProblem implements problem.Recorder.
func (r *recorder) RecordProblem(code string) { r.code = code }

func (r *recorder) response() idempotency.Response {
	h := http.Header{}
	for _, k := range replayHeaders {
		if v := r.header.Values(k); len(v) > 0 {
			h[k] = v
		}
	}
	return idempotency.Response{Status: r.status, Header: h, Body: r.body.Bytes()}
}

func (r *recorder) copyTo(w http.ResponseWriter) {
	h := w.Header()
	for k, v := range r.header {
		h[k] = v
	}
	if r.code != "" {
		problem.Record(w, r.code)
	}
	if r.status == 0 {
		r.status = http.StatusOK
	}
	w.WriteHeader(r.status)
	_, _ = w.Write(r.body.Bytes())
}

func jsonCode(b []byte, v any) bool { return json.Unmarshal(b, v) == nil }
