package telemetry_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/fintech-bff/bff/internal/telemetry"
)

func TestRequested(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{map[string]string{}, false},
		{map[string]string{"OTEL_SERVICE_NAME": "bff"}, false}, // a name alone exports nowhere
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "console"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, false},
		{map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, false},
	} {
		if got := telemetry.Requested(func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("Requested(%v) = %v, want %v", c.env, got, c.want)
		}
	}
}

// While tracing is off, Start hands back the caller's context itself and
// allocates nothing: the hot path pays nothing.
func TestStartIsFreeWhenOff(t *testing.T) {
	tr := telemetry.Tracer("test")
	ctx := context.Background()
	if got, span := telemetry.Start(ctx, tr, "x"); got != ctx || span.IsRecording() {
		t.Fatal("Start while off made a new context or a recording span")
	}
	if a := testing.AllocsPerRun(100, func() {
		_, span := telemetry.Start(ctx, tr, "x")
		span.End()
	}); a != 0 {
		t.Fatalf("Start while off allocates %.0f times", a)
	}
}

// No url.full leaves with its query, credentials or fragment.
func TestRedactingStripsTheQuery(t *testing.T) {
	mem := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(telemetry.Redacting(mem)))
	_, s := tp.Tracer("t").Start(context.Background(), "HTTP GET")
	s.SetAttributes(semconv.URLFull("https://user:pw@api.example.com/v2/accounts?iban=DE89370400440532013000#frag"))
	s.End()
	_, s = tp.Tracer("t").Start(context.Background(), "HTTP POST")
	s.SetAttributes(semconv.URLFull("https://api.example.com/oauth/token"))
	s.End()
	got := mem.GetSpans()
	if len(got) != 2 {
		t.Fatalf("%d spans exported, want 2", len(got))
	}
	want := []string{"https://api.example.com/v2/accounts", "https://api.example.com/oauth/token"}
	for i, s := range got {
		for _, kv := range s.Attributes {
			if kv.Key == semconv.URLFullKey && kv.Value.AsString() != want[i] {
				t.Errorf("url.full = %q, want %q", kv.Value.AsString(), want[i])
			}
		}
	}
}

// A line logged with a span's context carries its ids, through With too.
func TestLogHandlerAddsTheIDs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(telemetry.LogHandler{Next: slog.NewJSONHandler(&buf, nil)}).With("component", "x")
	tp := sdktrace.NewTracerProvider()
	ctx, s := tp.Tracer("t").Start(context.Background(), "op")
	log.InfoContext(ctx, "request")
	log.Info("no context")
	s.End()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	sc := s.SpanContext()
	if !strings.Contains(lines[0], `"trace_id":"`+sc.TraceID().String()+`"`) || !strings.Contains(lines[0], `"span_id":"`+sc.SpanID().String()+`"`) {
		t.Errorf("the line lacks the span's ids: %s", lines[0])
	}
	if strings.Contains(lines[1], "trace_id") {
		t.Errorf("a line without a span has a trace id: %s", lines[1])
	}
}

// Under a span the sampler left out, no tracer of the wrapped provider
// makes a span (nor allocates), and the left-out trace still propagates.
func TestSampledOnlySkipsTheLeftOut(t *testing.T) {
	tp := telemetry.SampledOnly(sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample())))
	tr := tp.Tracer("t")
	ctx, root := tr.Start(context.Background(), "server")
	if root.IsRecording() || !root.SpanContext().IsValid() {
		t.Fatal("the root was sampled, or has no trace id")
	}
	if got, child := tr.Start(ctx, "child"); got != ctx || child.IsRecording() {
		t.Fatal("a span was made under a left-out parent")
	}
	if a := testing.AllocsPerRun(100, func() {
		_, s := tr.Start(ctx, "child")
		s.End()
	}); a != 0 {
		t.Fatalf("a child of a left-out span allocates %.0f times", a)
	}
	sampled := telemetry.SampledOnly(sdktrace.NewTracerProvider()).Tracer("t")
	sctx, s := sampled.Start(context.Background(), "server")
	if _, c := sampled.Start(sctx, "child"); !c.IsRecording() || c.SpanContext().TraceID() != s.SpanContext().TraceID() {
		t.Fatal("the child of a sampled span was not made in its trace")
	}
}

// TestMalformedHeadersDoNotLeak: the SDK logs an OTEL_EXPORTER_OTLP_HEADERS
// entry it cannot parse next to its message. The API key in it must reach
// neither the BFF's log nor stderr (where the SDK's default logger wrote it
// whole), while the line still says what was wrong. Setup runs in a child
// process (this test binary again), so that its stderr is the one checked.
func TestMalformedHeadersDoNotLeak(t *testing.T) {
	const key1, key2 = "SEKRET-api-key-1", "SEKRET-api-key-2"
	if os.Getenv("BFF_TELEMETRY_CHILD") == "1" {
		shutdown, err := telemetry.Setup(context.Background(), slog.New(slog.NewJSONHandler(os.Stdout, nil)))
		if err != nil {
			t.Fatal(err)
		}
		_ = shutdown(context.Background())
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMalformedHeadersDoNotLeak$", "-test.count=1")
	cmd.Env = append(os.Environ(), "BFF_TELEMETRY_CHILD=1",
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1",
		"OTEL_EXPORTER_OTLP_HEADERS=api-key:"+key1+",x-key=%zz"+key2)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String() + stderr.String()
	for _, k := range []string{key1, key2, "zz"} {
		if strings.Contains(out, k) {
			t.Errorf("%q was logged:\n%s", k, out)
		}
	}
	for _, msg := range []string{"opentelemetry: parse headers", "opentelemetry: escape header value"} {
		if !strings.Contains(stdout.String(), msg) {
			t.Errorf("no line says %q:\n%s", msg, out)
		}
	}
}
