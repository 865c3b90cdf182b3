//go:build integration

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// otlpSink is a real OpenTelemetry Collector (tools/otelsink: the OTLP
// receiver and the file exporter) on 127.0.0.1, and the spans it received.
type otlpSink struct {
	url   string // for OTEL_EXPORTER_OTLP_ENDPOINT
	spans string // the file the collector writes, OTLP JSON lines
}

var (
	otelsinkOnce sync.Once
	otelsinkBin  string
	otelsinkErr  error
)

// startOTLPSink builds the collector (once per run) and starts it.
func startOTLPSink(t *testing.T) *otlpSink {
	t.Helper()
	otelsinkOnce.Do(func() {
		dir, err := os.MkdirTemp("", "otelsink-")
		if err != nil {
			otelsinkErr = err
			return
		}
		otelsinkBin = filepath.Join(dir, "otelsink")
		build := exec.Command("go", "build", "-mod=readonly", "-o", otelsinkBin, ".")
		build.Dir = "../tools/otelsink"
		if out, err := build.CombinedOutput(); err != nil {
			otelsinkErr = fmt.Errorf("building tools/otelsink: %v\n%s", err, out)
		}
	})
	if otelsinkErr != nil {
		t.Fatal(otelsinkErr)
	}
	addr := freeAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	s := &otlpSink{url: "http://" + addr, spans: filepath.Join(t.TempDir(), "spans.jsonl")}
	cmd := exec.Command(otelsinkBin, "--config", "../tools/otelsink/config.yaml")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "OTLP_HTTP_PORT=" + port, "SPANS_FILE=" + s.spans}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// Ready when an empty export is accepted (it writes no line).
	if err := poll(20*time.Second, func() error {
		resp, err := http.Post(s.url+"/v1/traces", "application/json", strings.NewReader("{}"))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("an empty export: got %d, want 200", resp.StatusCode)
		}
		return nil
	}); err != nil {
		t.Fatalf("the collector did not start: %v\n%s", err, logs.String())
	}
	return s
}

// span is one exported span, as OTLP JSON has it.
type span struct {
	TraceID      string `json:"traceId"`
	SpanID       string `json:"spanId"`
	ParentSpanID string `json:"parentSpanId"`
	Name         string `json:"name"`
	Start        string `json:"startTimeUnixNano"`
	End          string `json:"endTimeUnixNano"`
	Attributes   []struct {
		Key   string         `json:"key"`
		Value map[string]any `json:"value"`
	} `json:"attributes"`
	service string
}

func (s span) attr(key string) any {
	for _, a := range s.Attributes {
		if a.Key == key {
			for _, v := range a.Value {
				return v
			}
		}
	}
	return nil
}

func (s span) duration() time.Duration {
	var a, b int64
	fmt.Sscan(s.Start, &a)
	fmt.Sscan(s.End, &b)
	return time.Duration(b - a)
}

// read returns the spans received so far, and the raw lines.
func (s *otlpSink) read(t *testing.T) ([]span, string) {
	t.Helper()
	raw, err := os.ReadFile(s.spans)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	// The collector may be writing its next line as it is read: only the
	// lines it has ended are whole.
	raw = raw[:bytes.LastIndexByte(raw, '\n')+1]
	var out []span
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var doc struct {
			ResourceSpans []struct {
				Resource struct {
					Attributes []struct {
						Key   string         `json:"key"`
						Value map[string]any `json:"value"`
					} `json:"attributes"`
				} `json:"resource"`
				ScopeSpans []struct {
					Spans []span `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		}
		if err := json.Unmarshal(sc.Bytes(), &doc); err != nil {
			t.Fatalf("the collector wrote a line that is not OTLP JSON: %v", err)
		}
		for _, rs := range doc.ResourceSpans {
			service := ""
			for _, a := range rs.Resource.Attributes {
				if a.Key == "service.name" {
					service, _ = a.Value["stringValue"].(string)
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					sp.service = service
					out = append(out, sp)
				}
			}
		}
	}
	return out, string(raw)
}

// trace waits for the spans of one trace until those named have all come.
func (s *otlpSink) trace(t *testing.T, traceID string, names ...string) ([]span, string) {
	t.Helper()
	var got []span
	var raw string
	eventually(t, 15*time.Second, func() error {
		var all []span
		all, raw = s.read(t)
		got = got[:0]
		have := map[string]bool{}
		for _, sp := range all {
			if sp.TraceID == traceID {
				got = append(got, sp)
				have[sp.Name] = true
			}
		}
		missing := []string{}
		for _, n := range names {
			if !have[n] {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("trace %s: spans %v never arrived; got %v", traceID, missing, spanNames(got))
		}
		return nil
	})
	return got, raw
}

func spanNames(spans []span) []string {
	var n []string
	for _, s := range spans {
		n = append(n, s.Name)
	}
	sort.Strings(n)
	return n
}

// tree renders a trace as its parent links, with durations.
func tree(spans []span) string {
	kids := map[string][]span{}
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.SpanID] = true
	}
	var roots []span
	for _, s := range spans {
		if ids[s.ParentSpanID] {
			kids[s.ParentSpanID] = append(kids[s.ParentSpanID], s)
		} else {
			roots = append(roots, s)
		}
	}
	var b strings.Builder
	var walk func(s span, depth int)
	walk = func(s span, depth int) {
		fmt.Fprintf(&b, "%s%s  %v\n", strings.Repeat("  ", depth), s.Name, s.duration().Round(time.Microsecond))
		k := kids[s.SpanID]
		sort.Slice(k, func(i, j int) bool { return k[i].Start < k[j].Start })
		for _, c := range k {
			walk(c, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	return b.String()
}

// One browser-like request, tracing on (an OTLP endpoint in the
// environment), makes one trace in a real collector: the server span
// continues the app's traceparent (trust_client_traceparent), and below
// it the session lookup, the token's get, single-flight, lock and mint
// (with the token endpoint's client span), the upstream call's span and
// its client span, and Redis commands, each under its parent. The upstream
// gets the BFF's traceparent, in the same trace. The access log line holds
// the trace and span ids, and the server span the request id the client
// got. No attribute, and no byte the collector received, holds the user
// id, the session cookie, the upstream token, the client secret or the
// query's value.
func TestOneRequestIsOneTrace(t *testing.T) {
	sink := startOTLPSink(t)
	e := start(t, options{
		extraYAML: "trust_client_traceparent: true",
		env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": sink.url, "OTEL_SERVICE_NAME": "bff-e2e",
			"OTEL_BSP_SCHEDULE_DELAY": "100"},
	})
	const user = "trace-user-5Rk2"
	b := e.browser()
	b.login(user)
	cookies := b.http.Jar.Cookies(&url.URL{Scheme: "http", Host: strings.TrimPrefix(e.public, "http://")})
	if len(cookies) == 0 {
		t.Fatal("the login set no cookie")
	}

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	const parent = "00f067aa0ba902b7"
	const secretQuery = "iban-DE89370400440532013000"
	r := b.do("GET", "/api/v2/data/accounts?q="+secretQuery, "", "traceparent", "00-"+traceID+"-"+parent+"-01")
	if r.status != 200 {
		t.Fatalf("GET accounts: %d %s", r.status, r.body)
	}
	requestID := r.header.Get("X-Request-Id")

	spans, raw := sink.trace(t, traceID, "GET /api/v2/data/accounts", "session.lookup", "tokens.get", "tokens.singleflight",
		"tokens.lock", "tokens.mint", "proxy.forward")
	t.Logf("the trace of one request:\n%s", tree(spans))

	byName := map[string]span{}
	for _, s := range spans {
		if s.service != "bff-e2e" {
			t.Errorf("span %s has service.name %q, want bff-e2e (OTEL_SERVICE_NAME)", s.Name, s.service)
		}
		if _, dup := byName[s.Name]; !dup {
			byName[s.Name] = s
		}
	}
	server := byName["GET /api/v2/data/accounts"]
	if server.ParentSpanID != parent {
		t.Errorf("the server span's parent is %q, want the app's %s", server.ParentSpanID, parent)
	}
	if got := server.attr("bff.request_id"); got != requestID {
		t.Errorf("the server span's bff.request_id is %v, want the X-Request-Id the client got (%s)", got, requestID)
	}
	parentOf := func(child, want string) {
		t.Helper()
		c, p := byName[child], byName[want]
		if c.ParentSpanID != p.SpanID {
			t.Errorf("%s's parent is %s, want %s (%s)", child, c.ParentSpanID, want, p.SpanID)
		}
	}
	parentOf("session.lookup", "GET /api/v2/data/accounts")
	parentOf("proxy.forward", "GET /api/v2/data/accounts")
	parentOf("tokens.get", "proxy.forward")
	parentOf("tokens.singleflight", "tokens.get")
	parentOf("tokens.lock", "tokens.singleflight")
	parentOf("tokens.mint", "tokens.singleflight")
	var clients, redis int
	for _, s := range spans {
		switch {
		case strings.HasPrefix(s.Name, "HTTP "):
			clients++
			if p := s.attr("url.full"); p != nil && strings.Contains(fmt.Sprint(p), "?") {
				t.Errorf("client span %s has url.full %v with its query", s.Name, p)
			}
		case s.attr("db.system") == "redis" || s.attr("db.system.name") == "redis":
			redis++
		}
	}
	if clients < 2 {
		t.Errorf("%d HTTP client spans, want the token endpoint's and the upstream call's", clients)
	}
	if redis == 0 {
		t.Error("no Redis command span")
	}

	// The upstream got a traceparent of this trace: the BFF's, not the app's.
	sent := e.bearers.traceparents()
	if len(sent) == 0 || !strings.Contains(sent[len(sent)-1], traceID) || strings.Contains(sent[len(sent)-1], parent) {
		t.Errorf("the upstream got traceparents %q, want one of trace %s from a BFF span", sent, traceID)
	}

	// The access log line and the trace find each other.
	found := false
	for _, line := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(line, `"msg":"request"`) && strings.Contains(line, requestID) {
			found = true
			if !strings.Contains(line, `"trace_id":"`+traceID+`"`) || !strings.Contains(line, `"span_id":"`+server.SpanID+`"`) {
				t.Errorf("the access log line lacks the trace and server span ids: %s", line)
			}
		}
	}
	if !found {
		t.Errorf("no access log line with request id %s", requestID)
	}

	// Nothing secret reached the collector.
	secrets := map[string]string{"the user id": user, "the client secret": clientSecret, "the query's value": secretQuery}
	for _, c := range cookies {
		secrets["cookie "+c.Name] = c.Value
	}
	for i, tok := range e.bearers.seen() {
		secrets[fmt.Sprintf("upstream token %d", i)] = tok
	}
	for what, v := range secrets {
		if v != "" && strings.Contains(raw, v) {
			t.Errorf("the collector received %s", what)
		}
	}

	// Without a traceparent, or with one from an app when the switch is
	// off, a request starts a trace of its own.
	plain := start(t, options{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": sink.url, "OTEL_BSP_SCHEDULE_DELAY": "100"}})
	pb := plain.browser()
	pb.login(user)
	const otherTrace = "0af7651916cd43dd8448eb211c80319c"
	r = pb.do("GET", "/api/v2/data/accounts", "", "traceparent", "00-"+otherTrace+"-b7ad6b7169203331-01")
	if r.status != 200 {
		t.Fatalf("GET accounts: %d %s", r.status, r.body)
	}
	// Its server span is the request's last to end: once it is exported,
	// every span the request made is.
	if server := sink.spanOfRequest(t, r.header.Get("X-Request-Id")); server.TraceID == otherTrace {
		t.Fatalf("the server span continued an untrusted client's trace")
	}
	all, _ := sink.read(t)
	for _, s := range all {
		if s.TraceID == otherTrace {
			t.Fatalf("span %s continued an untrusted client's trace", s.Name)
		}
	}
}
