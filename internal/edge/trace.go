package edge

import (
	"net/http"
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

// traceMiddleware makes each request a server span while tracing is on.
// It continues the trace of a W3C traceparent (with its tracestate and
// baggage) only from a peer in traceFrom, or from any client when
// fromClients is set. That list is apart from trusted_proxies on purpose:
// a load balancer believed for X-Forwarded-For passes its client's trace
// headers through, so believing it for traces too would let any client
// choose its trace id and force sampling. Anyone else's trace headers are
// dropped before anything reads them, with tracing off too (the upstream
// then gets none; with tracing on, the BFF's own from the transport).
//
// The span is named by the method and the route template and carries the
// status, the error code and the request id (which the error envelope
// and the access log show, so either finds the other); never the path's
// values, the query, the user or a header.
func traceMiddleware(traceFrom []netip.Prefix, fromClients bool) echo.MiddlewareFunc {
	tracer := telemetry.Tracer("edge")
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			believed := fromClients || trusted(traceFrom, r.RemoteAddr)
			if !telemetry.On() {
				if !believed {
					dropTraceHeaders(r.Header)
				}
				return next(c)
			}
			ctx := r.Context()
			if believed {
				ctx = otel.GetTextMapPropagator().Extract(ctx, propagation.HeaderCarrier(r.Header))
			}
			dropTraceHeaders(r.Header)
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

// dropTraceHeaders removes the W3C trace context and baggage headers.
func dropTraceHeaders(h http.Header) {
	h.Del("Traceparent")
	h.Del("Tracestate")
	h.Del("Baggage")
}
