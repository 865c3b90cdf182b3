package telemetry

import (
	"context"
	"log/slog"

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
