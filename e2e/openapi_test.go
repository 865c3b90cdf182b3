//go:build integration

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/fintech-bff/bff/api"
)

// Every answer the suite gets from the BFF's public surface (/auth and
// /api, on a BFF's public listener or a load balancer in front of it) is
// checked against api/openapi.yaml: its status must be documented for the
// operation, and its content type, body and documented headers must match.
// Answers from anything else (the admin listener, the OpenID provider, the
// simulator) are not checked.
//
// An answer to a path or method the document does not describe must be the
// error envelope (a 4xx or 5xx application/problem+json that matches the
// Problem schema): the BFF refuses it (ROUTE_NOT_FOUND, METHOD_NOT_ALLOWED,
// BAD_PATH, ...) or the upstream does. A success there means the document
// lacks an operation. CORS preflights are answered before routing and are
// described in docs/endpoints.md; they are checked for 204 and X-Request-Id.

// spec is api/openapi.yaml, loaded and routed once per process.
var spec = sync.OnceValues(func() (*openAPISpec, error) {
	doc, err := api.Load()
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, err
	}
	// The document names no server: its paths are relative to whatever
	// origin serves the BFF, and the router is to match any host.
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, err
	}
	problem := doc.Components.Schemas["Problem"]
	if problem == nil || problem.Value == nil {
		return nil, errors.New("api/openapi.yaml has no components.schemas.Problem")
	}
	return &openAPISpec{doc: doc, router: router, problem: problem.Value}, nil
})

type openAPISpec struct {
	doc     *openapi3.T
	router  routers.Router
	problem *openapi3.Schema
}

// bffFronts holds the host:port of every BFF public listener and load
// balancer front the suite started: the answers that are checked.
var bffFronts sync.Map

// registerFront marks rawURL's host as the BFF's public surface until t
// ends: the kernel hands its port out again afterwards, to an OpenID
// provider or a simulator of a later test, whose own /auth answers are
// not the BFF's.
func registerFront(t testing.TB, rawURL string) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return
	}
	bffFronts.Store(u.Host, true)
	t.Cleanup(func() { bffFronts.Delete(u.Host) })
}

// strays are mismatches found with no test to report them to (a request
// through http.DefaultClient, or after its test ended); TestMain fails the
// run on them.
var strays struct {
	sync.Mutex
	list []string
}

// checked counts the answers checked, those whose body was checked too,
// and those to paths or methods the document does not describe; reached
// holds the operations ("GET /auth/session") some answer matched.
var checked struct {
	answers, bodies, undocumented atomic.Int64
	reached                       sync.Map
}

// reportStrays prints what was checked and every stray mismatch, and
// returns 1 when there was one.
func reportStrays() int {
	fmt.Fprintf(os.Stderr, "api/openapi.yaml: %d answers checked, %d with their body, %d to paths or methods it does not describe\n",
		checked.answers.Load(), checked.bodies.Load(), checked.undocumented.Load())
	if s, err := spec(); err == nil && testing.Verbose() {
		var missed []string
		for _, path := range s.doc.Paths.InMatchingOrder() {
			for method := range s.doc.Paths.Value(path).Operations() {
				if _, ok := checked.reached.Load(method + " " + path); !ok {
					missed = append(missed, method+" "+path)
				}
			}
		}
		slices.Sort(missed)
		if len(missed) == 0 {
			missed = []string{"none"}
		}
		fmt.Fprintf(os.Stderr, "api/openapi.yaml: operations no answer reached: %s\n", strings.Join(missed, ", "))
	}
	strays.Lock()
	defer strays.Unlock()
	for _, s := range strays.list {
		fmt.Fprintln(os.Stderr, "FAIL:", s)
	}
	if len(strays.list) > 0 {
		return 1
	}
	return 0
}

// baseTransport is http.DefaultTransport as the process started, before
// TestMain wrapped it.
var baseTransport = http.DefaultTransport

// validate returns a RoundTripper that sends through next (baseTransport
// when nil) and checks every answer from the BFF's public surface against
// the document, reporting a mismatch to t (to strays when t is nil).
func validate(t testing.TB, next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = baseTransport
	}
	return &validatingTransport{t: t, next: next}
}

type validatingTransport struct {
	t    testing.TB
	next http.RoundTripper
}

func (v *validatingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := v.next.RoundTrip(req)
	if err != nil || !onPublicSurface(req.URL) {
		return resp, err
	}
	// The body is checked when the test has read it to the end, not here:
	// a test may read the headers of an answer before the rest arrives.
	resp.Body = &checkedBody{rc: resp.Body, done: func(body []byte, whole bool) { v.check(req, resp, body, whole) }}
	return resp, nil
}

func onPublicSurface(u *url.URL) bool {
	if _, ok := bffFronts.Load(u.Host); !ok {
		return false
	}
	p := u.Path
	return p == "/api" || strings.HasPrefix(p, "/api/") || p == "/auth" || strings.HasPrefix(p, "/auth/")
}

// maxCheckedBody is the largest body whose content is checked. A test that
// streams a larger one through the BFF (50 MiB, to measure the BFF's
// memory) gets its status and headers checked only, and the suite does not
// hold the whole body in memory.
const maxCheckedBody = 8 << 20

// checkedBody keeps what is read of a body and calls done once: at EOF with
// the whole body, or at Close with what was read before it. whole is false
// too when the body outgrew maxCheckedBody.
type checkedBody struct {
	rc       io.ReadCloser
	buf      bytes.Buffer
	overflow bool
	once     sync.Once
	done     func(body []byte, whole bool)
}

func (b *checkedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if !b.overflow {
		if b.buf.Len()+n > maxCheckedBody {
			b.overflow = true
			b.buf = bytes.Buffer{}
		} else {
			b.buf.Write(p[:n])
		}
	}
	if errors.Is(err, io.EOF) {
		b.once.Do(func() { b.done(b.buf.Bytes(), !b.overflow) })
	}
	return n, err
}

func (b *checkedBody) Close() error {
	err := b.rc.Close()
	b.once.Do(func() { b.done(b.buf.Bytes(), false) })
	return err
}

// check validates one answer and reports a mismatch with the method, path,
// status and the validator's message.
func (v *validatingTransport) check(req *http.Request, resp *http.Response, body []byte, whole bool) {
	checked.answers.Add(1)
	if whole {
		checked.bodies.Add(1)
	}
	if err := checkAnswer(req, resp, body, whole); err != nil {
		v.report(fmt.Sprintf("api/openapi.yaml: %s %s answered %d, which the document does not allow: %v\nbody: %.600s",
			req.Method, req.URL.EscapedPath(), resp.StatusCode, err, body))
	}
}

func (v *validatingTransport) report(msg string) {
	if v.t != nil {
		// A test that has ended cannot take an error (t.Errorf panics);
		// the run still fails through strays.
		defer func() {
			if recover() != nil {
				addStray(msg)
			}
		}()
		v.t.Errorf("%s", msg)
		return
	}
	addStray(msg)
}

func addStray(msg string) {
	strays.Lock()
	strays.list = append(strays.list, msg)
	strays.Unlock()
}

// checkAnswer is nil when the answer matches the document. whole says body
// is all of it; else only the status and headers are checked.
func checkAnswer(req *http.Request, resp *http.Response, body []byte, whole bool) error {
	s, err := spec()
	if err != nil {
		return fmt.Errorf("the document cannot be used: %w", err)
	}
	if resp.Header.Get("X-Request-Id") == "" {
		return errors.New("no X-Request-Id header")
	}
	if req.Method == http.MethodOptions && req.Header.Get("Origin") != "" && req.Header.Get("Access-Control-Request-Method") != "" {
		if resp.StatusCode != http.StatusNoContent {
			return fmt.Errorf("a CORS preflight answered %d, want 204", resp.StatusCode)
		}
		return nil
	}
	// HEAD is answered wherever GET is (RFC 9110 section 9.3.2), as the
	// document says once rather than per operation: it is checked as the
	// GET's answer, without a body.
	head := req.Method == http.MethodHead
	if head {
		asGet := req.Clone(req.Context())
		asGet.Method = http.MethodGet
		req = asGet
		if len(body) != 0 {
			return fmt.Errorf("HEAD answered with %d body bytes", len(body))
		}
		whole = false
	}
	route, params, err := s.router.FindRoute(req)
	if err != nil {
		checked.undocumented.Add(1)
		return checkUndocumented(s, resp, body, whole, err)
	}
	checked.reached.Store(route.Method+" "+route.Path, true)
	opts := &openapi3filter.Options{
		IncludeResponseStatus: true, // a status the operation does not list is a mismatch
		ExcludeResponseBody:   !whole,
	}
	opts.WithCustomSchemaErrorFunc(schemaErrorText)
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Options:                opts,
	}
	in.SetBodyBytes(body)
	return openapi3filter.ValidateResponse(req.Context(), in)
}

// checkUndocumented checks an answer to a path or method the document does
// not describe: it must be the error envelope.
func checkUndocumented(s *openAPISpec, resp *http.Response, body []byte, whole bool, routeErr error) error {
	if resp.StatusCode < 400 {
		return fmt.Errorf("a success for an operation the document does not describe (%v)", routeErr)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/problem+json" {
		return fmt.Errorf("an error that is not application/problem+json (Content-Type %q) for an operation the document does not describe", resp.Header.Get("Content-Type"))
	}
	if !whole {
		return nil
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("the error body is not JSON: %w", err)
	}
	if err := s.problem.VisitJSON(v, openapi3.EnableJSONSchema2020(), openapi3.VisitAsResponse(), openapi3.SetSchemaErrorMessageCustomizer(schemaErrorText)); err != nil {
		return fmt.Errorf("the error body does not match the Problem schema: %w", err)
	}
	return nil
}

// schemaErrorText is a schema mismatch in one line: where and why, without
// kin-openapi's dump of the whole schema and value (a page of 500
// transactions would fill the log).
func schemaErrorText(err *openapi3.SchemaError) string {
	return fmt.Sprintf("at %q: %s", "/"+strings.Join(err.JSONPointer(), "/"), err.Reason)
}
