package telemetry

import (
	"context"
	"log/slog"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"
)

// LogHandler adds trace_id and span_id to every line logged with a
// context that holds a sampled span (the access log's, the request's), so
// that a line and its trace find each other. A request the sampler left
// out has no trace to find, and its line no ids.
type LogHandler struct{ Next slog.Handler }

// Enabled implements slog.Handler.
func (h LogHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.Next.Enabled(ctx, l) }

// Handle implements slog.Handler.
func (h LogHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() && sc.IsSampled() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Next.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h LogHandler) WithAttrs(a []slog.Attr) slog.Handler { return LogHandler{h.Next.WithAttrs(a)} }

// WithGroup implements slog.Handler.
func (h LogHandler) WithGroup(n string) slog.Handler { return LogHandler{h.Next.WithGroup(n)} }

// sdkLogSink is the OpenTelemetry SDK's own logger (otel.SetLogger). The SDK
// logs, next to its message, the value it could not use: a malformed
// OTEL_EXPORTER_OTLP_HEADERS entry, which holds the collector's API key,
// went to stderr whole with the SDK's default logger. Here a line keeps the
// SDK's message and level, never its key-value pairs or its error's text.
type sdkLogSink struct {
	log  *slog.Logger
	name string
}

const sdkRemoved = "the SDK's details are left out: they may hold a configuration value"

func (s sdkLogSink) Init(logr.RuntimeInfo) {}

// Enabled keeps the SDK's errors and warnings (logr levels 0 and 1); its
// info and debug lines describe every export.
func (s sdkLogSink) Enabled(level int) bool { return level <= 1 }

func (s sdkLogSink) Info(level int, msg string, _ ...any) {
	s.log.Warn("opentelemetry: "+msg, "logger", s.name, "detail", sdkRemoved)
}

func (s sdkLogSink) Error(_ error, msg string, _ ...any) {
	s.log.Error("opentelemetry: "+msg, "logger", s.name, "detail", sdkRemoved)
}

func (s sdkLogSink) WithValues(...any) logr.LogSink { return s }

func (s sdkLogSink) WithName(name string) logr.LogSink {
	if s.name != "" {
		name = s.name + "/" + name
	}
	return sdkLogSink{s.log, name}
}
