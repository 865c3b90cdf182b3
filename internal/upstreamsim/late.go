package upstreamsim

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// lateRun is one generation of late acts (ActLate faults): Reset and Close
// end it, cancelling the acts still waiting, and Reset starts another.
type lateRun struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newLateRun() *lateRun {
	ctx, cancel := context.WithCancel(context.Background())
	return &lateRun{ctx: ctx, cancel: cancel}
}

// lateActs owns the goroutines of late acts, which outlive the request
// that started them, so that none outlives the Server's Close (the
// package's tests check for leaks) and none acts on the state Reset
// makes. It is safe for concurrent use.
type lateActs struct {
	mu     sync.Mutex
	run    *lateRun
	closed bool
}

func newLateActs() *lateActs { return &lateActs{run: newLateRun()} }

// start runs act on a goroutine of the current run, with the run's
// context, and reports whether it did: after Close nothing starts.
func (l *lateActs) start(act func(ctx context.Context)) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	run := l.run
	run.wg.Add(1)
	go func() {
		defer run.wg.Done()
		act(run.ctx)
	}()
	return true
}

// stop ends the current run, waits for its goroutines (an act that has
// begun finishes; one still waiting returns without acting) and, unless
// closing, starts a new empty one.
func (l *lateActs) stop(closing bool) {
	l.mu.Lock()
	old := l.run
	l.run = newLateRun()
	l.closed = l.closed || closing
	l.mu.Unlock()
	old.cancel()
	old.wg.Wait()
}

// actLate carries out the ActLate fault f on r, whose body was read into
// body, the request having been taken at taken: it waits for the client
// to go away or for f.Delay (not at all with HangUp), closes the
// connection without a reply, and leaves the request to a late act that
// serves it f.Delay after taken. The act waits for the hang-up first, so
// the upstream never acts while the client still waits, even with no
// delay.
func (s *Server) actLate(w http.ResponseWriter, r *http.Request, body []byte, f Fault, taken time.Time) {
	due := taken.Add(max(f.Delay, 0))
	// A copy that outlives r: r's context ends when this handler returns,
	// and r is the server's once it has.
	late := r.Clone(context.Background())
	gone := make(chan struct{})
	s.late.start(func(ctx context.Context) {
		select {
		case <-gone:
		case <-ctx.Done():
			return
		}
		t := time.NewTimer(time.Until(due))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		s.serveLate(late.WithContext(ctx), body)
	})
	defer close(gone) // deferred: hangUp panics on a connection it cannot hijack (HTTP/2)
	if !f.HangUp {
		t := time.NewTimer(time.Until(due))
		select {
		case <-t.C:
		case <-r.Context().Done():
		}
		t.Stop()
	}
	hangUp(w) // also when the client has gone: net/http would answer 200 for a handler that writes nothing
}

// serveLate serves a late act's request as the API would have, and throws
// the reply away: its client is gone. It logs the status, as ServeHTTP
// logs a request's.
func (s *Server) serveLate(r *http.Request, body []byte) {
	start := time.Now()
	buf := &bufferedReply{header: http.Header{}}
	if len(body) > maxBody {
		writeAPIError(buf, newError(http.StatusRequestEntityTooLarge, typeClientError, "request entity too large"))
	} else {
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.api.ServeHTTP(buf, r)
	}
	if buf.status == 0 {
		buf.status = http.StatusOK
	}
	s.opts.Logger.LogAttrs(r.Context(), slog.LevelDebug, "upstream-sim late act",
		slog.String("method", r.Method), slog.String("path", r.URL.Path),
		slog.Int("status", buf.status), slog.Duration("took", time.Since(start)))
}
