//go:build integration

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// spanOfRequest waits for the server span whose bff.request_id is id.
func (s *otlpSink) spanOfRequest(t *testing.T, id string) span {
	t.Helper()
	var found span
	eventually(t, 15*time.Second, func() error {
		all, _ := s.read(t)
		for _, sp := range all {
			if sp.attr("bff.request_id") == id {
				found = sp
				return nil
			}
		}
		return fmt.Errorf("no server span with bff.request_id %s", id)
	})
	return found
}

// spansOfTrace is every span received so far in trace id.
func (s *otlpSink) spansOfTrace(t *testing.T, id string) []string {
	t.Helper()
	all, _ := s.read(t)
	var names []string
	for _, sp := range all {
		if sp.TraceID == id {
			names = append(names, sp.Name)
		}
	}
	return names
}

// A client cannot choose its trace. The BFF believes
// trace headers only from traceparent_from, never because a peer is in
// trusted_proxies (a load balancer passes its clients' headers through);
// with tracing off, a client's traceparent does not reach the upstream
// either; and the shipped HAProxy configuration strips a client's trace
// headers, so even an operator who lists the load balancer in
// traceparent_from does not let clients in.
func TestAClientCannotChooseItsTrace(t *testing.T) {
	sink := startOTLPSink(t)
	const forged = "0af7651916cd43dd8448eb211c80319c"
	forgedParent := "00-" + forged + "-b7ad6b7169203331-01" // sampled flag on

	t.Run("a trusted proxy's traceparent is not believed", func(t *testing.T) {
		e := start(t, options{extraYAML: `trusted_proxies: ["127.0.0.1/32"]`,
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": sink.url, "OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_TRACES_SAMPLER": "always_on"}})
		b := e.browser()
		b.login("trace-trust-1")
		r := b.do("GET", "/api/v2/providers", "", "traceparent", forgedParent, "baggage", "userId=someone-else")
		if r.status != 200 {
			t.Fatalf("GET providers: %d %s", r.status, r.body)
		}
		server := sink.spanOfRequest(t, r.header.Get("X-Request-Id"))
		if server.TraceID == forged || server.ParentSpanID != "" {
			t.Fatalf("the server span is in trace %s under parent %q: the client's traceparent from a trusted_proxies peer was continued", server.TraceID, server.ParentSpanID)
		}
		for _, tp := range e.bearers.traceparents() {
			if strings.Contains(tp, forged) {
				t.Fatalf("the upstream got the client's trace id: %s", tp)
			}
		}
	})

	t.Run("tracing off: the client's trace headers stay behind", func(t *testing.T) {
		e := start(t, options{extraYAML: `trusted_proxies: ["127.0.0.1/32"]`})
		b := e.browser()
		b.login("trace-trust-2")
		before := len(e.bearers.traceparents())
		if r := b.do("GET", "/api/v2/providers", "", "traceparent", forgedParent); r.status != 200 {
			t.Fatalf("GET providers: %d %s", r.status, r.body)
		}
		if got := e.bearers.traceparents()[before:]; len(got) != 0 {
			t.Fatalf("the upstream got traceparents %q from a client, want none", got)
		}
	})

	t.Run("behind the shipped HAProxy configuration", func(t *testing.T) {
		// The operator's mistake: the load balancer's address in
		// traceparent_from. The sampler records nothing of its own, so a
		// span exists only where a believed traceparent said "sampled".
		e := start(t, options{extraYAML: `trusted_proxies: ["127.0.0.1/32"]` + "\ntraceparent_from: [\"127.0.0.1/32\"]",
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": sink.url, "OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_TRACES_SAMPLER": "parentbased_always_off"}})
		l := startLB(t, []*env{e})
		front := l.through(e).browser()
		front.login("trace-trust-3")
		if r := front.do("GET", "/api/v2/providers", "", "traceparent", forgedParent, "tracestate", "vendor=x"); r.status != 200 {
			t.Fatalf("GET providers through HAProxy: %d %s", r.status, r.body)
		}
		// The confirmation that the exporter has sent everything up to
		// here: a later request straight from a believed peer (this
		// test, on 127.0.0.1) whose trace the BFF records. Spans leave in
		// the order they end, so once its spans are in, the earlier
		// request's would be too.
		const marker = "9a0b3c4d5e6f708192a3b4c5d6e7f801"
		direct := e.browser()
		direct.login("trace-trust-4")
		if r := direct.do("GET", "/api/v2/providers", "", "traceparent", "00-"+marker+"-1122334455667788-01"); r.status != 200 {
			t.Fatalf("GET providers: %d %s", r.status, r.body)
		}
		sink.trace(t, marker, "GET /api/v2/providers")
		if names := sink.spansOfTrace(t, forged); len(names) != 0 {
			t.Fatalf("%d spans were recorded in the client's trace through HAProxy: %v", len(names), names)
		}
	})
}
