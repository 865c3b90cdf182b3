package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/telemetry"
	"github.com/fintech-bff/bff/internal/tokens"
)

// TokenSource is what the proxy needs of the token manager.
type TokenSource interface {
	Token(ctx context.Context, userID string) (tokens.Token, error)
	// InvalidateToken drops the user's cached token if it is still token
	// (the one the upstream just refused).
	InvalidateToken(ctx context.Context, userID, token string) error
}

// Retry bounds the retries of idempotent calls.
type Retry struct {
	MaxAttempts int // attempts in all, the first included
	BaseDelay   time.Duration
	MaxDelay    time.Duration
}

// Options configures a Forwarder.
type Options struct {
	BaseURL      *url.URL
	Routes       *Routes
	Tokens       TokenSource
	Transport    http.RoundTripper // the upstream transport; NewTransport's when nil
	Timeout      time.Duration     // the whole upstream exchange, retries included
	MaxBodyBytes int64
	Retry        Retry
	Logger       *slog.Logger
	// Observe, when set, is told of every upstream attempt (metrics).
	Observe Observer
	// Sleep waits d between two attempts of a retried call, or until ctx
	// ends (then its error); a timer when nil. Tests record the waits.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Observer receives a Forwarder's events. Implementations must be cheap and
// safe for concurrent use.
type Observer interface {
	// Attempted reports one attempt of an upstream API call, retries each
	// on their own: route is the route template; status the upstream's, or
	// 0 when no reply came (a transport failure; a client that went away
	// is not reported); errType the type (or refresh status) of an error
	// reply, bounded; took the time to the reply's headers.
	Attempted(route string, status int, errType ErrorType, took time.Duration)
}

type nopObserver struct{}

func (nopObserver) Attempted(string, int, ErrorType, time.Duration) {}

// ErrorType is the type (or refresh status) of an upstream's error reply,
// bounded against cardinality: one the upstream documents
// (problem.KnownUpstreamType), ErrorTypeOther or ErrorTypeNone. It is the
// type label of bff_upstream_requests_total.
type ErrorType string

// The error types that are not the upstream's own words.
const (
	ErrorTypeNone  ErrorType = ""      // no error reply, or one with no type
	ErrorTypeOther ErrorType = "OTHER" // a type the upstream does not document
)

// errorType bounds an error body's type s ("" for none) to an ErrorType.
func errorType(s string) ErrorType {
	switch {
	case s == "":
		return ErrorTypeNone
	case problem.KnownUpstreamType(s):
		return ErrorType(s)
	}
	return ErrorTypeOther
}

// Forwarder forwards allowlisted calls. Safe for concurrent use.
type Forwarder struct {
	routes   *Routes
	rp       *httputil.ReverseProxy
	upstream *transport
	base     *url.URL
	timeout  time.Duration
	maxBody  int64
	log      *slog.Logger
}

// Call is what the edge knows of one API call.
type Call struct {
	UserID    string
	RequestID string
	// ClientIP is the caller's address as the edge believes it (from
	// X-Forwarded-For only when the peer is a trusted proxy); it is sent
	// upstream as X-Forwarded-For.
	ClientIP string
	// Path is the escaped upstream path: the request path less "/api".
	Path string
	// SessionRef names the caller's session in the payments ledger: a hash
	// of its id (session.Handle), never the id.
	SessionRef string
}

// Target is where an allowlisted call goes: its decoded, checked upstream
// path and the route template it matched.
type Target struct {
	Path  string
	Route string
}

type callKey struct{}

type callState struct {
	Call
	path  string // decoded, checked
	route string
	// once: the request is sent at most once (Exchange.Once): no retry, no
	// resend after a 401.
	once bool
	// beforeSend runs once the token is ready, before the request leaves.
	beforeSend func(context.Context) error
	// written, for a non-idempotent call, is set once the last attempt's
	// request was written whole (httptrace's WroteRequest without error);
	// nil for other calls. The callback runs on the transport's write
	// goroutine, possibly after RoundTrip returned: hence atomic, and a
	// fresh one per attempt, so a late callback of an earlier attempt
	// cannot speak for the last.
	written *atomic.Bool
	// upstreamStatus is the status of the last upstream attempt (0: none).
	upstreamStatus int
	// upstreamType is the "type" (or refresh "status") of the last
	// attempt's error body, bounded as in the metric; "" when it had none.
	upstreamType ErrorType
	// err is how the exchange failed, when it did: set by the
	// ReverseProxy's ErrorHandler, which writes nothing (the edge renders).
	err *problem.Problem
}

// failure is the call's error for Forward's caller; nil when it succeeded.
func (st *callState) failure() error {
	if st.err == nil {
		return nil
	}
	return st.err
}

// Result tells the edge what happened to a call, for its labels and log.
type Result struct {
	Route          string // the route template; "" when none matched
	UpstreamStatus int    // the last upstream attempt's status; 0 when none
	// Code is the error code of a stored answer written from the payments
	// ledger (a replayed refusal); "" otherwise. A failure of this request
	// is the returned error instead, rendered by the caller.
	Code string
}

func callFrom(ctx context.Context) *callState {
	c, _ := ctx.Value(callKey{}).(*callState)
	return c
}

// New returns a Forwarder.
func New(o Options) *Forwarder {
	if o.Transport == nil {
		o.Transport = NewTransport(o.Timeout)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Sleep == nil {
		o.Sleep = sleep
	}
	if o.Observe == nil {
		o.Observe = nopObserver{}
	}
	base := *o.BaseURL
	f := &Forwarder{routes: o.Routes, timeout: o.Timeout, maxBody: o.MaxBodyBytes, log: o.Logger, base: &base,
		upstream: &transport{base: o.Transport, tokens: o.Tokens, retry: o.Retry, observe: o.Observe, sleep: o.Sleep}}
	basePath := strings.TrimSuffix(base.Path, "/")
	f.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			c := callFrom(pr.In.Context())
			out := pr.Out
			out.URL.Scheme = base.Scheme
			out.URL.Host = base.Host
			out.URL.Path = basePath + c.path
			out.URL.RawPath = ""
			out.URL.RawQuery = pr.In.URL.RawQuery // forwarded as sent
			out.Host = base.Host
			out.Header = upstreamHeader(out.Header, c.Call)
		},
		Transport: f.upstream,
		// FlushInterval 0: the server's buffer sends as it fills (a large
		// reply streams in constant memory) and ReverseProxy flushes at once
		// for replies of unknown length and event streams.
		FlushInterval:  0,
		BufferPool:     copyBuffers,
		ModifyResponse: modifyResponse,
		ErrorHandler:   f.errorHandler,
		ErrorLog:       slog.NewLogLogger(o.Logger.Handler(), slog.LevelWarn),
	}
	return f
}

var tracer = telemetry.Tracer("proxy")

// NewTransport returns an upstream transport tuned for keep-alive to one host.
func NewTransport(timeout time.Duration) *http.Transport {
	return &http.Transport{
		Proxy:                 nil, // never an environment proxy: the secret's path is fixed
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   128,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: timeout,
		ExpectContinueTimeout: time.Second,
	}
}

// copyBuffers recycles the 32 KiB buffers ReverseProxy copies replies
// with, instead of one allocation per request.
var copyBuffers = &bufferPool{p: sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}}

type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte  { return *b.p.Get().(*[]byte) }
func (b *bufferPool) Put(s []byte) { b.p.Put(&s) }

// Prefixes lists the route templates Forward reports, for the caller's labels.
func (f *Forwarder) Prefixes() []string { return f.routes.Prefixes() }

// Target checks an API call's path (CheckPath) and finds its route
// (Routes.Match) for method. The Target's Route is set also with a
// METHOD_NOT_ALLOWED problem, for the caller's labels.
func (f *Forwarder) Target(c Call, method string) (Target, *problem.Problem) {
	path, p := CheckPath(c.Path)
	if p != nil {
		return Target{}, p
	}
	route, p := f.routes.Match(path, method)
	return Target{Path: path, Route: route}, p
}

// Forward serves one API call to t (from Target). It writes to w only what
// the upstream answered; when the call fails it writes nothing and returns
// the failure, a *problem.Problem, for the caller to render.
func (f *Forwarder) Forward(w http.ResponseWriter, r *http.Request, c Call, t Target) (Result, error) {
	res := Result{Route: t.Route}
	if _, p := f.Body(r); p != nil {
		return res, p
	}
	st := &callState{Call: c, path: t.Path, route: t.Route}
	f.serve(w, r, st, r.Context())
	res.UpstreamStatus = st.upstreamStatus
	return res, st.failure()
}

// serve forwards one call within the upstream timeout, under parent.
func (f *Forwarder) serve(w http.ResponseWriter, r *http.Request, st *callState, parent context.Context) {
	ctx, cancel := context.WithTimeout(parent, f.timeout)
	defer cancel()
	// The upstream call: a client span per attempt below this one (the
	// token's, the retries') when tracing is on.
	ctx, span := telemetry.Start(ctx, tracer, "proxy.forward")
	defer func() {
		if span.IsRecording() {
			span.SetAttributes(semconv.HTTPRoute(st.route), attribute.Int("bff.upstream.status", st.upstreamStatus))
		}
		span.End()
	}()
	f.rp.ServeHTTP(w, r.WithContext(context.WithValue(ctx, callKey{}, st)))
}

// Body reads the request body, at most MaxBodyBytes, so that it can be
// replayed on the 401 retry and the idempotent retries; a larger body, with
// or without Content-Length, is 413 BODY_TOO_LARGE. It leaves the buffered
// body on r. Call it once per request.
func (f *Forwarder) Body(r *http.Request) ([]byte, *problem.Problem) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	if r.ContentLength > f.maxBody {
		return nil, problem.Newf(problem.CodeBodyTooLarge, "the request body is over %d bytes", f.maxBody)
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, f.maxBody+1))
	if err != nil {
		return nil, problem.Wrap(problem.CodeBadRequest, "the request body could not be read", err)
	}
	if int64(len(b)) > f.maxBody {
		return nil, problem.Newf(problem.CodeBodyTooLarge, "the request body is over %d bytes", f.maxBody)
	}
	r.ContentLength = int64(len(b))
	if len(b) == 0 {
		r.Body = http.NoBody
		r.GetBody = func() (io.ReadCloser, error) { return http.NoBody, nil }
		return b, nil
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	return b, nil
}

// upstreamHeader is the header of an upstream request: the client's
// headers by allowlist (content negotiation, conditional requests, body
// framing, trace context), and the BFF's own. The client's credentials,
// cookies, CSRF marker, method overrides, forwarding claims and
// idempotency key stay here (the key because net/http's Transport treats a
// request carrying one as safe to send again on a new connection, which for
// a payment is a second payment; the BFF's ledger enforces it instead). The
// transport adds the user's upstream token.
func upstreamHeader(in http.Header, c Call) http.Header {
	h := make(http.Header, 8)
	for _, k := range requestHeaders {
		if v := in[k]; len(v) > 0 {
			h[k] = v
		}
	}
	h["User-Agent"] = noUserAgent // no client User-Agent, and not Go's default either
	h.Set("X-Request-Id", c.RequestID)
	if c.ClientIP != "" {
		h.Set("X-Forwarded-For", c.ClientIP)
	}
	return h
}

// upstreamError carries a normalised upstream error from ModifyResponse to
// the ErrorHandler.
type upstreamError struct{ p *problem.Problem }

func (e upstreamError) Error() string { return e.p.Error() }

// errorBodyLimit caps how much of an upstream error body is read.
const errorBodyLimit = 64 << 10

// noUserAgent is shared by every request (never appended to).
var noUserAgent = []string{""}

// requestHeaders are the only client headers sent upstream (canonical
// form), besides those the BFF sets itself (Authorization, X-Request-Id,
// X-Forwarded-For).
var requestHeaders = []string{
	"Accept", "Accept-Charset", "Accept-Encoding", "Accept-Language",
	"Content-Type", "Content-Encoding", "Content-Language",
	"If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since", "If-Range", "Range",
	"Traceparent", "Tracestate",
}

// responseHeaders are the only upstream headers passed to the client:
// representation metadata, conditional-request validators, redirects and
// Retry-After (as modifyResponse bounds it). Cookies, Server, X-Powered-By, WWW-Authenticate, HSTS,
// Clear-Site-Data, CORS and caching headers never pass (the edge sets
// Cache-Control: no-store and nosniff itself).
var responseHeaders = map[string]bool{
	"Content-Type": true, "Content-Length": true, "Content-Encoding": true, "Content-Language": true,
	"Content-Disposition": true, "Content-Range": true, "Accept-Ranges": true,
	"Etag": true, "Last-Modified": true, "Location": true, "Retry-After": true, "Allow": true,
	"Vary": true, "Link": true,
}

func modifyResponse(resp *http.Response) error {
	// The upstream's Retry-After goes on as seconds of at most an hour
	// (docs/errors.md, "Headers"), read against the reply's Date before that is dropped.
	retryAfter := problem.RelayRetryAfter(resp.Header, time.Now())
	for k := range resp.Header {
		if !responseHeaders[k] {
			delete(resp.Header, k)
		}
	}
	if retryAfter != "" {
		resp.Header.Set("Retry-After", retryAfter)
	} else {
		resp.Header.Del("Retry-After")
	}
	// A reply without a Content-Type would be sniffed by the server (and a
	// 200 served as text/html on the app's origin).
	if resp.Header.Get("Content-Type") == "" && resp.ContentLength != 0 && resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusNotModified {
		resp.Header.Set("Content-Type", "application/octet-stream")
	}
	if resp.StatusCode < 400 {
		return nil // 2xx (whatever the payment status inside) passes through unchanged
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyLimit))
	return upstreamError{problem.FromUpstream(resp.StatusCode, resp.Header, body)}
}

// errorHandler keeps a failed exchange's problem for Forward to return; it
// writes nothing (ReverseProxy calls it before any header is written).
func (f *Forwarder) errorHandler(_ http.ResponseWriter, r *http.Request, err error) {
	c := callFrom(r.Context())
	c.err = f.classify(r.Context(), err)
}

// classify maps a failed exchange to its problem.
func (f *Forwarder) classify(ctx context.Context, err error) *problem.Problem {
	var ue upstreamError
	var me *tokens.MintError
	var ne net.Error
	var bs beforeSendError
	switch {
	case errors.As(err, &ue):
		return ue.p
	case errors.As(err, &bs):
		var p *problem.Problem
		if errors.As(bs.err, &p) {
			return p
		}
		return problem.Wrap(problem.CodeUpstreamError, "the request could not be sent", bs.err)
	case errors.As(err, &me):
		return mintProblem(me)
	case errors.Is(err, tokens.ErrStoreUnavailable):
		return problem.Wrap(problem.CodeSessionStoreUnavailable, "the token store is not answering", err)
	case errors.Is(err, tokens.ErrLockTimeout):
		return problem.Wrap(problem.CodeUpstreamTimeout, "the upstream token endpoint did not answer in time", err)
	case errors.Is(ctx.Err(), context.Canceled): // the client went away, not our timeout
		return problem.Wrap(problem.CodeClientClosedRequest, "the client closed the request", err)
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return problem.Wrap(problem.CodeUpstreamTimeout, "the upstream did not answer in time", err)
	default:
		return problem.Wrap(problem.CodeUpstreamUnreachable, "the upstream could not be reached", err)
	}
}

// mintProblem maps a failed token mint to the client's answer.
func mintProblem(me *tokens.MintError) *problem.Problem {
	switch me.Kind {
	case tokens.KindAuth:
		return problem.Wrap(problem.CodeUpstreamAuthFailed, "the upstream refused the BFF's credentials", me)
	case tokens.KindTimeout:
		return problem.Wrap(problem.CodeUpstreamTimeout, "the upstream token endpoint did not answer in time", me)
	case tokens.KindUnreachable:
		return problem.Wrap(problem.CodeUpstreamUnreachable, "the upstream token endpoint could not be reached", me)
	case tokens.KindRejected:
		p := problem.Wrap(problem.CodeUpstreamError, "the upstream refused a token for this user", me)
		p.Retryable = false
		p.Action = problem.ActionContactSupport
		return p
	default:
		return problem.Wrap(problem.CodeUpstreamError, "the upstream token endpoint failed", me)
	}
}

// notSent reports failures that happened before the request could reach
// the upstream: no token (mint failed, store down) or no connection.
func notSent(err error) bool {
	var me *tokens.MintError
	var op *net.OpError
	var bs beforeSendError
	return errors.As(err, &me) || errors.As(err, &bs) || errors.Is(err, tokens.ErrStoreUnavailable) || errors.Is(err, tokens.ErrLockTimeout) ||
		(errors.As(err, &op) && op.Op == "dial")
}
