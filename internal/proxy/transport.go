package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"github.com/fintech-bff/bff/internal/problem"
)

// transport adds the user's upstream token to each attempt and owns the
// retry policy (docs/endpoints.md, "The API"): one retry after a 401 with a
// freshly minted token; for idempotent methods, retries on 500, 503 and
// PROVIDER_UNAVAILABLE with exponential backoff and full jitter, or after
// the upstream's Retry-After when the reply has one, within the attempt
// budget and the request's deadline. Nothing else is retried.
type transport struct {
	base    http.RoundTripper
	tokens  TokenSource
	retry   Retry
	observe Observer
	sleep   func(ctx context.Context, d time.Duration) error // between attempts
}

func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPut, http.MethodDelete, http.MethodTrace:
		return true
	}
	return false
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	c := callFrom(ctx)
	retryable := idempotent(req.Method) && !c.once
	// getBody re-reads the buffered body for this transport's own retries,
	// which follow that policy. The outgoing request of a non-idempotent
	// call carries no GetBody: with one, net/http's Transport itself may
	// send it again on a new connection when a reused one closes without
	// an answer, which for a payment is a second payment.
	getBody := req.GetBody
	upstreamCtx := hiddenTrace{ctx}
	authRetried := false
	for attempt := 1; ; {
		tok, err := t.tokens.Token(ctx, c.UserID)
		if err != nil {
			return nil, err
		}
		out := req.WithContext(upstreamCtx)
		if attempt > 1 || authRetried {
			out = req.Clone(upstreamCtx)
			if getBody != nil {
				if out.Body, err = getBody(); err != nil {
					return nil, err
				}
			}
		}
		if !retryable {
			out.GetBody = nil
			// Whether the request was written whole tells a failure before
			// the upstream could act (the deadline passed while connecting,
			// a frozen process woke up too late) from one after: only the
			// first frees a payment's key. Reads skip the trace's cost.
			written := &atomic.Bool{}
			c.written = written
			out = out.WithContext(httptrace.WithClientTrace(out.Context(), &httptrace.ClientTrace{
				WroteRequest: func(i httptrace.WroteRequestInfo) { written.Store(i.Err == nil) },
			}))
		}
		if c.beforeSend != nil && attempt == 1 && !authRetried {
			if err := c.beforeSend(ctx); err != nil {
				return nil, beforeSendError{err}
			}
		}
		out.Header.Set("Authorization", "Bearer "+tok.Value)
		start := time.Now()
		resp, err := t.base.RoundTrip(out)
		if err != nil {
			if !errors.Is(ctx.Err(), context.Canceled) { // a client that left is not an upstream failure
				t.observe.Attempted(c.route, 0, ErrorTypeNone, time.Since(start))
			}
			return nil, err
		}
		typ := ErrorTypeNone
		if resp.StatusCode >= 400 {
			typ = peekType(resp)
		}
		t.observe.Attempted(c.route, resp.StatusCode, typ, time.Since(start))
		c.upstreamStatus, c.upstreamType = resp.StatusCode, typ

		if resp.StatusCode == http.StatusUnauthorized && !authRetried {
			if c.once {
				// Sent at most once: the token is dropped (the next call
				// mints anew), and the 401 goes back to the caller, which
				// must settle before anything is sent again: an upstream
				// (or a gateway in front of it) may act and still answer 401.
				// The 401 is returned whatever happens to the drop: the
				// request reached the upstream, and a failure here must not
				// read as "never sent".
				_ = t.tokens.InvalidateToken(ctx, c.UserID, tok.Value)
				return resp, nil
			}
			discard(resp)
			if err := t.tokens.InvalidateToken(ctx, c.UserID, tok.Value); err != nil {
				return nil, err
			}
			authRetried = true
			continue
		}
		if retryable && attempt < t.retry.MaxAttempts && transient(resp.StatusCode, typ) {
			if delay, ok := t.delay(ctx, resp.Header, attempt); ok {
				discard(resp)
				if err := t.sleep(ctx, delay); err != nil {
					return nil, err
				}
				attempt++
				continue
			}
		}
		return resp, nil
	}
}

// beforeSendError is a failure of Exchange.BeforeSend: nothing was sent.
type beforeSendError struct{ err error }

func (e beforeSendError) Error() string { return e.err.Error() }
func (e beforeSendError) Unwrap() error { return e.err }

// hiddenTrace is a request's context without the httptrace hooks set above
// the transport: ReverseProxy's Got1xxResponse passes an upstream's 1xx
// informational answer (a 103 Early Hints carrying a Set-Cookie, say)
// straight to the client, past every header rule. Deadline, cancellation
// and every other value are the context's own, so context.WithCancel on it
// still finds the parent's cancelCtx (no extra goroutine).
type hiddenTrace struct{ context.Context }

func (c hiddenTrace) Value(key any) any {
	v := c.Context.Value(key)
	if _, ok := v.(*httptrace.ClientTrace); ok {
		return nil
	}
	return v
}

// transient reports the failures an idempotent call retries.
func transient(status int, typ ErrorType) bool {
	return status == http.StatusInternalServerError || status == http.StatusServiceUnavailable ||
		(status == http.StatusBadRequest && typ == "PROVIDER_UNAVAILABLE")
}

// delay is the wait before the next attempt, and whether to make one: the
// upstream's Retry-After when its reply carries one (it knows when it will
// answer), but never less than the backoff (a Retry-After of 0
// or a date gone by must not make every instance retry at the same
// moment), else the backoff. A Retry-After is waited for only when at
// least as much of the request's deadline remains after it for the
// attempt itself: one that would leave the attempt no time is not waited
// for, and the reply goes back with it, for the client to honour. The
// backoff is waited for when it ends before the deadline. Without a
// deadline (Forward and Exchange always set one) a Retry-After over
// MaxDelay is not waited for either.
func (t *transport) delay(ctx context.Context, h http.Header, attempt int) (time.Duration, bool) {
	backoff := t.backoff(attempt)
	d, upstream := problem.RetryAfter(h, time.Now())
	if !upstream {
		d = backoff
	}
	d = max(d, backoff)
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		if upstream {
			return d, left-d >= d && left > d
		}
		return d, left > d
	}
	return d, !upstream || d <= t.retry.MaxDelay
}

// backoff is full jitter: uniform in [0, min(MaxDelay, BaseDelay·2^(attempt-1))].
func (t *transport) backoff(attempt int) time.Duration {
	d := t.retry.BaseDelay << (attempt - 1)
	if d > t.retry.MaxDelay || d <= 0 {
		d = t.retry.MaxDelay
	}
	if d <= 0 {
		return 0
	}
	return rand.N(d + 1)
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

func discard(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, errorBodyLimit))
	_ = resp.Body.Close()
}

// peekType reads the (small) error body to learn its type, and puts the
// bytes back so the response can still be normalised or passed on.
func peekType(resp *http.Response) ErrorType {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyLimit))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(b), resp.Body), resp.Body}
	var v struct {
		Type   any `json:"type"`
		Status any `json:"status"`
	}
	if json.Unmarshal(b, &v) != nil {
		return ErrorTypeNone
	}
	for _, f := range [...]any{v.Type, v.Status} {
		if s, ok := f.(string); ok && s != "" {
			return errorType(s)
		}
	}
	return ErrorTypeNone
}
