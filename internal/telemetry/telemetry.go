// Package telemetry is the BFF's OpenTelemetry tracing: set up from the
// standard OTEL_* environment variables, off (and free) when none asks for
// it.
//
// What it never records: a user id, a token, a cookie, a body, a query
// string. Spans carry route templates, statuses, the request id and where
// a session or token came from (local, store, mint). The exporter strips
// the query from every url.full attribute (otelhttp's client spans record
// the upstream URL whole) before a span leaves the process.
package telemetry

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"
)

// on is whether Setup turned tracing on; Start is free while it is not.
var on atomic.Bool

// On reports whether tracing is on.
func On() bool { return on.Load() }

// Requested reports whether the environment asks for tracing: an OTLP
// endpoint, or an exporter other than none, unless OTEL_SDK_DISABLED is
// true (which the Go SDK itself does not read).
func Requested(getenv func(string) string) bool {
	if v, _ := strconv.ParseBool(getenv("OTEL_SDK_DISABLED")); v {
		return false
	}
	switch strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")) {
	case "none":
		return false
	case "":
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	default:
		return true
	}
}

// Setup installs the tracer provider and the W3C trace-context propagator
// the environment asks for, and returns what flushes and stops it. The
// exporter is autoexport's (OTEL_TRACES_EXPORTER, OTEL_EXPORTER_OTLP_*);
// the sampler the SDK's own reading of OTEL_TRACES_SAMPLER (default:
// parent-based, always on); the resource OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES, "bff" when no name is set. The SDK's own log
// lines and export errors go to log, without the values the SDK would add.
func Setup(ctx context.Context, log *slog.Logger) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	otel.SetLogger(logr.New(sdkLogSink{log: log}))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("opentelemetry: " + err.Error())
	}))
	if !Requested(os.Getenv) {
		otel.SetTracerProvider(noop.NewTracerProvider())
		on.Store(false)
		return func(context.Context) error { return nil }, nil
	}
	exp, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, err
	}
	res, err := resource.New(ctx, resource.WithAttributes(semconv.ServiceName("bff")),
		resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil {
		return nil, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(Redacting(exp)), sdktrace.WithResource(res))
	otel.SetTracerProvider(SampledOnly(tp))
	on.Store(true)
	return func(ctx context.Context) error {
		on.Store(false)
		return tp.Shutdown(ctx)
	}, nil
}

// Enable turns Start on for a test's own provider (set with
// otel.SetTracerProvider); the returned func turns it off again.
func Enable() func() {
	on.Store(true)
	return func() { on.Store(false) }
}

// Tracer is the named tracer of a package of the BFF.
func Tracer(name string) trace.Tracer { return otel.Tracer("github.com/fintech-bff/bff/" + name) }

var none = trace.SpanFromContext(context.Background())

// Start starts a span under ctx's. While tracing is off it returns ctx as
// it is and a span that records nothing, with no allocation (under a span
// the sampler left out, the provider Setup installs, SampledOnly, does the
// same): the requests not traced pay nothing for the spans they would
// have.
func Start(ctx context.Context, t trace.Tracer, name string) (context.Context, trace.Span) {
	if !on.Load() {
		return ctx, none
	}
	return t.Start(ctx, name)
}

// leftOut reports whether ctx holds a span of this process that the
// sampler left out: under it every sampler leaves the children out too
// (the parent-based ones by their parent, the ratio ones by the same
// trace id), so making them only costs.
func leftOut(ctx context.Context) bool {
	sc := trace.SpanContextFromContext(ctx)
	return sc.IsValid() && !sc.IsSampled() && !sc.IsRemote()
}

// SampledOnly wraps a provider so that its tracers (ours, otelhttp's,
// redisotel's, otelpgx's) make no span under a span the sampler left out:
// at 1% sampling, the other 99% of requests then pay for one span (the
// server's, where the sampler decides), not for one per Redis command.
func SampledOnly(tp trace.TracerProvider) trace.TracerProvider { return sampledOnly{next: tp} }

type sampledOnly struct {
	embedded.TracerProvider
	next trace.TracerProvider
}

func (p sampledOnly) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return sampledOnlyTracer{next: p.next.Tracer(name, opts...)}
}

type sampledOnlyTracer struct {
	embedded.Tracer
	next trace.Tracer
}

func (t sampledOnlyTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if leftOut(ctx) {
		return ctx, none
	}
	return t.next.Start(ctx, name, opts...)
}

// Transport traces the calls through base while tracing is on: otelhttp's
// client span for a request being sampled, and for one left out only its
// trace context in the headers (what otelhttp would send, without the
// span it would make and drop).
func Transport(base http.RoundTripper) http.RoundTripper {
	return sampledTransport{traced: otelhttp.NewTransport(base), plain: base}
}

type sampledTransport struct{ traced, plain http.RoundTripper }

func (t sampledTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if !leftOut(r.Context()) {
		return t.traced.RoundTrip(r)
	}
	r2 := *r // a RoundTripper does not change the caller's request
	r2.Header = r.Header.Clone()
	otel.GetTextMapPropagator().Inject(r.Context(), propagation.HeaderCarrier(r2.Header))
	return t.plain.RoundTrip(&r2)
}

// Redacting wraps an exporter so that no url.full attribute leaves with
// its query string (which can hold account numbers or search terms).
func Redacting(exp sdktrace.SpanExporter) sdktrace.SpanExporter { return redacting{exp} }

type redacting struct{ sdktrace.SpanExporter }

type redactedSpan struct {
	sdktrace.ReadOnlySpan
	attrs []attribute.KeyValue
}

func (s redactedSpan) Attributes() []attribute.KeyValue { return s.attrs }

func (e redacting) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	out := make([]sdktrace.ReadOnlySpan, len(spans))
	for i, s := range spans {
		out[i] = s
		for j, kv := range s.Attributes() {
			if kv.Key != semconv.URLFullKey {
				continue
			}
			u, err := url.Parse(kv.Value.AsString())
			if err != nil || u.RawQuery != "" || u.User != nil || u.Fragment != "" {
				attrs := append([]attribute.KeyValue(nil), s.Attributes()...)
				clean := "(unparsable)"
				if err == nil {
					u.RawQuery, u.User, u.Fragment, u.RawFragment = "", nil, "", ""
					clean = u.String()
				}
				attrs[j] = semconv.URLFull(clean)
				out[i] = redactedSpan{s, attrs}
			}
			break
		}
	}
	return e.SpanExporter.ExportSpans(ctx, out)
}
