package payments

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/fintech-bff/bff/internal/limits"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
)

// refresher runs the on-demand refresh.
type refresher struct {
	base
	guard Guard         // nil: no credit guard
	every time.Duration // the guard's interval; 0: no credit guard
}

// underRefresh reports a path under the refresh route: sent once, and
// under the credit guard when it is on.
func underRefresh(path string) bool {
	return strings.HasPrefix(path, RefreshPath) && (len(path) == len(RefreshPath) || path[len(RefreshPath)] == '/')
}

// serve runs the on-demand refresh (20 credits) under the credit
// guard: one per user per interval, for every path under the refresh
// route. The hold is taken before the call and given back only when the
// upstream surely did not start a refresh: the request never left, or the
// upstream answered that it did not (already_running, 402, 409). A lost
// answer (the client went away, a timeout, a 5xx, a 401 after the call)
// keeps it, as the credits may be spent. The call is sent once (a 401 is
// not resent) and detached from the client's connection, so a client that
// hangs up cannot cut it and free the hold.
func (s *refresher) serve(w http.ResponseWriter, r *http.Request, c proxy.Call, t proxy.Target) (int, *problem.Problem) {
	detached := context.WithoutCancel(r.Context())
	guarded := s.guard != nil && s.every > 0
	key := "refresh:" + userKey(c.UserID)
	var d limits.Decision
	if guarded {
		hctx, cancel := context.WithTimeout(detached, storeTimeout)
		var err error
		d, err = s.guard.Hold(hctx, key, s.every)
		cancel()
		if err != nil {
			return 0, problem.Wrap(problem.CodeSessionStoreUnavailable, "the refresh allowance cannot be checked right now", err)
		}
		if !d.Allowed {
			s.observe.Refused(limits.KindRefresh)
			return 0, problem.Later(problem.CodeRefreshTooSoon, d.RetryAfter, "data was refreshed less than %s ago; the next refresh is allowed in %d s", s.every)
		}
	}
	body, p := s.up.Body(r)
	var rep proxy.Reply
	if p == nil {
		rep, p = s.up.Exchange(detached, proxy.Exchange{
			Call: c, Target: t, Method: r.Method, RawQuery: r.URL.RawQuery, Header: r.Header, Body: body, Once: true,
		})
	}
	if guarded && (!rep.Sent || notStarted(rep)) {
		ctx, cancel := context.WithTimeout(detached, storeTimeout)
		defer cancel()
		if err := s.guard.Release(ctx, key, d.Token); err != nil {
			s.log.Warn("a refresh that did not start could not give its allowance back", slog.String("requestId", c.RequestID), slog.String("error", err.Error()))
		}
	}
	if p != nil {
		if rep.Status == http.StatusUnauthorized {
			p.Detail = "the upstream refused the BFF's credentials after receiving the refresh; it may have started, so the next refresh waits for the interval"
		}
		return rep.Status, p
	}
	h := w.Header()
	for k, v := range rep.Header {
		h[k] = v
	}
	w.WriteHeader(rep.Status)
	_, _ = w.Write(rep.Body)
	return rep.Status, nil
}

// notStarted reports an upstream answer that says no refresh was started
// (so none charged): 402 insufficient credits, 409 no refreshable
// connection, or 200 already_running.
func notStarted(rep proxy.Reply) bool {
	if !rep.Answered() {
		return false
	}
	switch {
	case rep.Status == http.StatusPaymentRequired || rep.Status == http.StatusConflict:
		return true
	case rep.Status >= 200 && rep.Status < 300:
		var v struct {
			Status string `json:"status"`
		}
		return json.Unmarshal(rep.Body, &v) == nil && v.Status == "already_running"
	}
	return false
}

// userKey names a user in a shared store without their id.
func userKey(userID string) string {
	sum := sha256.Sum256([]byte("bff-limit:" + userID))
	return base64.RawURLEncoding.EncodeToString(sum[:18])
}
