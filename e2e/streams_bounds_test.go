//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// Event streams are bounded per client address and per instance (issue
// 33): from one address past limits.streams_per_address, whatever the
// users, 429 RATE_LIMITED; past limits.streams_per_instance, from any
// address, 503 UPSTREAM_UNAVAILABLE; both with Retry-After. A client that
// closes its stream frees its places. The gauges and the refusals show it.
func TestEventStreamBounds(t *testing.T) {
	t.Parallel()
	e := start(t, options{extraYAML: `trusted_proxies: ["127.0.0.1/32"]`,
		limitsYAML: "limits: { requests_per_second: 0, auth_per_minute: 0, refresh_interval: 0s, sessions_per_user: 0, backchannel_per_minute: 0, pending_logins_per_address: 0, streams_per_address: 2, streams_per_instance: 3 }"})
	users := 0
	// open opens a stream of a user of its own from the address from
	// (X-Forwarded-For, believed from the loopback; "" for 127.0.0.1
	// itself) and returns what closes it, or checks the refusal.
	open := func(from string, want int, code string) (closeIt func()) {
		t.Helper()
		users++
		token := e.browser().login("bounded-" + strconv.Itoa(users))
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", e.public+"/bff/events", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		if from != "" {
			req.Header.Set("X-Forwarded-For", from)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		closeIt = func() { cancel(); resp.Body.Close() }
		t.Cleanup(closeIt)
		if resp.StatusCode != want {
			body, _ := io.ReadAll(resp.Body)
			t.Fatalf("stream %d from %q: got %d %s, want %d %s", users, from, resp.StatusCode, body, want, code)
		}
		if want == http.StatusOK {
			return closeIt
		}
		v := map[string]any{}
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || v["code"] != code || v["retryable"] != true {
			t.Fatalf("stream %d from %q: got %v (%v), want %s, retryable", users, from, v, err, code)
		}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 {
			t.Fatalf("stream %d from %q: Retry-After %q, want whole seconds", users, from, resp.Header.Get("Retry-After"))
		}
		return nil
	}
	// openStreams waits until the instance holds want streams: it sees a
	// client leave at its next look at the socket (every 2 s). The bound
	// only keeps a broken build from hanging the run.
	openStreams := func(want float64) {
		t.Helper()
		eventually(t, 30*time.Second, func() error {
			if got := metricValue(t, e, "bff_event_streams"); got != want {
				return fmt.Errorf("bff_event_streams is %v, want %v", got, want)
			}
			return nil
		})
	}

	a1 := open("", http.StatusOK, "")
	open("", http.StatusOK, "")
	open("", http.StatusTooManyRequests, "RATE_LIMITED") // a third user from the same address
	b1 := open("198.51.100.7", http.StatusOK, "")
	open("198.51.100.8", http.StatusServiceUnavailable, "UPSTREAM_UNAVAILABLE") // the instance holds 3
	openStreams(3)
	if got := metricValue(t, e, "bff_event_streams_limit"); got != 3 {
		t.Fatalf("bff_event_streams_limit is %v, want 3", got)
	}

	b1()
	openStreams(2)
	open("198.51.100.8", http.StatusOK, "")
	a1()
	openStreams(2)
	open("", http.StatusOK, "") // the loopback's freed place, and the instance's

	for limit, want := range map[string]float64{"streams_address": 1, "streams_instance": 1} {
		if got := metricValue(t, e, `bff_limit_refusals_total{limit="`+limit+`"}`); got != want {
			t.Errorf("bff_limit_refusals_total{limit=%q} = %v, want %v", limit, got, want)
		}
	}
}
