package edge

import (
	"net/netip"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/fintech-bff/bff/internal/telemetry"
)

// traceMiddleware makes each request a server span while tracing is on
// (it does nothing otherwise, and the client's traceparent then passes to
// the upstream as any allowed header does). It continues the trace of a
// W3C traceparent from a trusted proxy, or from any client when
// fromClients is set; a traceparent from anyone else starts no trace of
// theirs. Either way the client's trace headers are dropped: the upstream
// gets the BFF's own (the transport's client span injects it).
//
// The span is named by the method and the route template and carries the
// status, the error code and the request id (which the error envelope
// and the access log show, so either finds the other); never the path's
// values, the query, the user or a header.
func traceMiddleware(proxies []netip.Prefix, fromClients bool) echo.MiddlewareFunc {
	tracer := telemetry.Tracer("edge")
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if !telemetry.On() {
				return next(c)
			}
			r := c.Request()
			ctx := r.Context()
			if fromClients || trusted(proxies, r.RemoteAddr) {
				ctx = otel.GetTextMapPropagator().Extract(ctx, propagation.HeaderCarrier(r.Header))
			}
			r.Header.Del("Traceparent")
			r.Header.Del("Tracestate")
			ctx, span := tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer))
			defer span.End()
			c.SetRequest(r.WithContext(ctx))
			err := next(c)
			s := state(c)
			route := routeOf(c)
			status := c.Response().Status
			span.SetName(r.Method + " " + route)
			span.SetAttributes(semconv.HTTPRequestMethodKey.String(r.Method), semconv.HTTPRoute(route),
				semconv.HTTPResponseStatusCode(status), attribute.String("bff.request_id", s.requestID))
			if s.errCode != "" {
				span.SetAttributes(attribute.String("bff.error_code", s.errCode))
			}
			if status >= 500 {
				span.SetStatus(codes.Error, s.errCode)
			}
			return err
		}
	}
}
