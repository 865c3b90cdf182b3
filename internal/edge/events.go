package edge

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/fintech-bff/bff/internal/events"
	"github.com/fintech-bff/bff/internal/limits"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/session"
)

// StreamOpener is what the edge needs of events.Pusher to serve GET
// /bff/events: it opens a stream, and the pusher writes it from then on.
type StreamOpener interface {
	Open(ctx context.Context, o events.Opening, connect func() events.Out) error
	Limits() events.Limits
}

var _ StreamOpener = (*events.Pusher)(nil)

const (
	// streamHeaderTimeout bounds the write of a taken connection's status
	// line and headers.
	streamHeaderTimeout = 5 * time.Second
	// streamRetryAfter is the Retry-After of a stream refused by the
	// user's or the address's bound; one refused by the instance's bound
	// waits as long plus up to fullJitter, so that the clients refused
	// together by a full instance do not come back together (and the load
	// balancer may send them elsewhere).
	streamRetryAfter = 5 * time.Second
	fullJitter       = 5 * time.Second
	// fullLogEvery: at most one line a minute says the instance is full.
	fullLogEvery = time.Minute
)

// streamEvents is GET /bff/events: the caller's payment changes as
// server-sent events. Last-Event-ID resumes after that position, from the
// ledger; without it the stream starts now. The stream ends when its
// session ends (closed before the revocation is acknowledged), when the
// instance drains (after a retry: hint), or when a write stalls.
//
// The handler opens the stream (events.Pusher.Open): once it is
// registered and its session checked, the connection is taken from the
// HTTP server (hijacked) and handed to the pusher, which writes it from
// then on. Where the connection cannot be taken (HTTP/2, a test recorder),
// the handler's goroutine holds the stream until it ends. v6Bits names an
// IPv6 client by its prefix in the per-address bound (limits.ipv6_prefix,
// as the other per-address limits).
func streamEvents(a *authn, streams StreamOpener, v6Bits int, budget SessionBudget, observe Observer, log *slog.Logger) echo.HandlerFunc {
	full := newSparseLog(log, slog.LevelWarn, "event streams refused: this instance holds as many as limits.streams_per_instance allows (docs/operations.md, Event streams)", fullLogEvery)
	return func(c echo.Context) error {
		p, err := authorized(c, a, budget, observe)
		if err != nil {
			return err
		}
		r := c.Request()
		after, err := lastEventID(r)
		if err != nil {
			return err
		}
		err = streams.Open(r.Context(), events.Opening{
			UserID: p.rec.UserID, SessionID: p.id, Handle: session.Handle(p.id), Client: clientKey(c.RealIP(), v6Bits),
			LiveUntil: a.sessions.ExpiresAt(p.rec), After: after,
		}, func() events.Out {
			h := c.Response().Header()
			h.Set(echo.HeaderContentType, "text/event-stream")
			h.Set("X-Accel-Buffering", "no") // nginx and its kin: pass each event on at once
			if conn, err := hijack(c); err == nil {
				return events.Conn(conn)
			}
			// Held by this goroutine: the headers go through the server.
			c.Response().WriteHeader(http.StatusOK)
			return events.Held(c.Response())
		})
		switch {
		case err == nil:
			return nil // the status is sent: a stream that fails ends, and the client resumes
		case errors.Is(err, events.ErrSessionEnded):
			return sessionRequired("the session has ended; log in again")
		case errors.Is(err, events.ErrSessionUnchecked):
			return problem.Wrap(problem.CodeSessionStoreUnavailable, "sessions cannot be checked right now", err)
		case errors.Is(err, events.ErrTooMany), errors.Is(err, events.ErrTooManyFromAddress),
			errors.Is(err, events.ErrFull), errors.Is(err, events.ErrClosing):
			return refuseStream(r.Context(), err, streams, observe, full)
		}
		return err // the ledger's position: LEDGER_UNAVAILABLE
	}
}

// refuseStream is the answer to a stream the hub did not take (err). The
// instance's bound is 503 UPSTREAM_UNAVAILABLE, the code a client already
// gets when no instance can take its request (docs/errors.md): the BFF,
// not the client, is short of room, and another instance may have it.
func refuseStream(ctx context.Context, err error, streams StreamOpener, observe Observer, full *sparseLog) error {
	switch {
	case errors.Is(err, events.ErrTooMany):
		observe.Refused(limits.KindStreams)
		return problem.Later(problem.CodeRateLimited, streamRetryAfter, "this user has too many open event streams on this instance; close one, or retry in %d s")
	case errors.Is(err, events.ErrTooManyFromAddress):
		observe.Refused(limits.KindStreamsAddress)
		return problem.Later(problem.CodeRateLimited, streamRetryAfter, "too many open event streams from this address on this instance; close one, or retry in %d s")
	case errors.Is(err, events.ErrFull):
		observe.Refused(limits.KindStreamsInstance)
		full.write(ctx, slog.Int("bound", streams.Limits().PerInstance))
		return problem.Later(problem.CodeUpstreamUnavailable, streamRetryAfter+rand.N(fullJitter), "this instance holds as many event streams as it can; retry in %d s")
	}
	return problem.Later(problem.CodeUpstreamUnavailable, time.Second, "this instance is shutting down; retry in %d s")
}

// hijack takes the connection from the HTTP server and writes the status
// line and the headers the middleware set: the stream is the pusher's
// from here. The access log records it as a 200 when it starts.
func hijack(c echo.Context) (net.Conn, error) {
	conn, rw, err := http.NewResponseController(c.Response()).Hijack()
	if err != nil {
		return nil, err
	}
	h := c.Response().Header()
	h.Set("Connection", "close") // the body ends when the connection does
	_ = conn.SetWriteDeadline(time.Now().Add(streamHeaderTimeout))
	_, _ = rw.WriteString("HTTP/1.1 200 OK\r\n")
	_ = h.Write(rw)
	_, _ = rw.WriteString("\r\n")
	// A failed flush is the stream's first failed write: it ends there.
	_ = rw.Flush()
	c.Response().Status, c.Response().Committed = http.StatusOK, true
	return conn, nil
}

// lastEventID is the position the stream resumes after: Last-Event-ID, a
// position this endpoint sent; -1 when absent (start now).
func lastEventID(r *http.Request) (int64, error) {
	v, ok := r.Header["Last-Event-Id"]
	if !ok || (len(v) == 1 && v[0] == "") {
		return -1, nil
	}
	n, err := strconv.ParseInt(v[0], 10, 64)
	if len(v) > 1 || err != nil || n < 0 {
		p := problem.New(problem.CodeValidationError, "Last-Event-ID must be an id this stream sent (a non-negative integer)")
		p.Fields = []problem.Field{{Field: "Last-Event-ID", Message: "not a non-negative integer"}}
		return 0, p
	}
	return n, nil
}
