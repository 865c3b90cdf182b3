package edge

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	eventhub "github.com/fintech-bff/bff/internal/events"
	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/session"
)

// PaymentChanges is what the edge needs of payments.Service to stream a
// user's payment changes (GET /bff/events).
type PaymentChanges interface {
	Changes(ctx context.Context, userID string, after int64) ([]payments.Change, error)
	Position(ctx context.Context, userID string) (int64, error)
}

var _ PaymentChanges = (*payments.Service)(nil)

// Streams configures GET /bff/events.
type Streams struct {
	Hub     *eventhub.Hub
	Changes PaymentChanges
	// Heartbeat is the longest silence on a stream (at most 15 s: proxies
	// and mobile networks close an idle connection after 30 to 60 s); 0:
	// 15 s.
	Heartbeat time.Duration
}

const (
	// maxHeartbeat is the contract's bound on a stream's silence.
	maxHeartbeat = 15 * time.Second
	// streamWriteTimeout bounds each write: a client that reads nothing
	// loses its stream instead of holding a goroutine and buffers.
	streamWriteTimeout = 10 * time.Second
	// clientRetry is the reconnection wait a stream asks for when it opens;
	// at shutdown it asks for shutdownRetry plus a jitter, so the clients of
	// a draining instance do not all land on one other at once.
	clientRetry   = 2 * time.Second
	shutdownRetry = 500 * time.Millisecond
	shutdownJit   = 2 * time.Second
	// streamRetryAfter is the Retry-After of a refused stream (the cap).
	streamRetryAfter = 5 * time.Second
)

// streamEvents is GET /bff/events: the caller's payment changes as
// server-sent events. Last-Event-ID resumes after that position, from the
// ledger; without it the stream starts now. The stream ends when its
// session ends (closed before the revocation is acknowledged), when the
// instance drains (after a retry: hint), or when a write stalls.
func streamEvents(a *authn, st Streams, budget SessionBudget, observe Observer) echo.HandlerFunc {
	heartbeat := st.Heartbeat
	if heartbeat <= 0 || heartbeat > maxHeartbeat {
		heartbeat = maxHeartbeat
	}
	return func(c echo.Context) error {
		p, err := authorized(c, a, budget, observe)
		if err != nil {
			return err
		}
		r := c.Request()
		ctx := r.Context()
		after, err := lastEventID(r)
		if err != nil {
			return err
		}
		s, err := st.Hub.Open(p.rec.UserID, session.Handle(p.id))
		switch {
		case errors.Is(err, eventhub.ErrTooMany):
			observe.Refused("streams")
			return problem.Later(problem.CodeRateLimited, streamRetryAfter, "this user has too many open event streams on this instance; close one, or retry in %d s")
		case err != nil:
			return problem.Later(problem.CodeUpstreamUnavailable, time.Second, "this instance is shutting down; retry in %d s")
		}
		defer st.Hub.Close(s)
		// Registered before the position is read: a change after it wakes
		// the stream, one before it is in the catch-up.
		if after < 0 {
			if after, err = st.Changes.Position(ctx, p.rec.UserID); err != nil {
				return err
			}
		}
		out := &sse{w: c.Response(), rc: http.NewResponseController(c.Response())}
		h := c.Response().Header()
		h.Set(echo.HeaderContentType, "text/event-stream")
		h.Set("X-Accel-Buffering", "no") // nginx and its kin: pass each event on at once
		c.Response().WriteHeader(http.StatusOK)
		out.retry(clientRetry)
		if after, err = out.changes(ctx, st.Changes, p.rec.UserID, after); err != nil {
			return nil // the status is sent: the client reconnects and resumes
		}
		beat := time.NewTicker(heartbeat)
		defer beat.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-s.Ended:
				if s.Why() == eventhub.EndShutdown {
					out.retry(shutdownRetry + rand.N(shutdownJit))
				}
				return nil
			case <-beat.C:
				// The heartbeat also checks the session: one that timed out
				// idle, or whose end this instance missed, ends its stream.
				if !alive(ctx, a, p.id) {
					return nil
				}
				if out.comment("keep-alive") != nil {
					return nil
				}
			case <-s.Wake:
				if s.Recheck() && !alive(ctx, a, p.id) {
					return nil
				}
				if after, err = out.changes(ctx, st.Changes, p.rec.UserID, after); err != nil {
					return nil
				}
			}
		}
	}
}

// alive reports whether the stream's session is live (without sliding its
// idle timeout). A store that does not answer ends the stream: the client
// reconnects and is checked afresh.
func alive(ctx context.Context, a *authn, id string) bool {
	ok, err := a.sessions.Alive(ctx, id)
	return err == nil && ok
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

// sse writes server-sent events, each flushed at once, each write bounded.
type sse struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf []byte
}

func (s *sse) send(b []byte) error {
	// The server's WriteTimeout is for answers; a stream sets its own
	// deadline per write. ErrNotSupported (a test recorder) leaves none.
	_ = s.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.rc.Flush()
}

func (s *sse) retry(d time.Duration) {
	_ = s.send(append(strconv.AppendInt([]byte("retry: "), d.Milliseconds(), 10), "\n\n"...))
}

func (s *sse) comment(text string) error { return s.send([]byte(": " + text + "\n\n")) }

// changes sends every change of the user's after position, and returns
// the new position.
func (s *sse) changes(ctx context.Context, ch PaymentChanges, userID string, after int64) (int64, error) {
	for {
		list, err := ch.Changes(ctx, userID, after)
		if err != nil {
			return after, err
		}
		for _, c := range list {
			data, err := json.Marshal(c.Record)
			if err != nil {
				return after, err
			}
			s.buf = strconv.AppendInt(append(s.buf[:0], "id: "...), c.Seq, 10)
			s.buf = append(append(append(s.buf, "\nevent: payment\ndata: "...), data...), "\n\n"...)
			if err := s.send(s.buf); err != nil {
				return after, err
			}
			after = c.Seq
		}
		if len(list) < payments.ChangesPage {
			return after, nil
		}
	}
}
