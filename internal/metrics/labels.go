package metrics

import (
	"net/http"
	"strconv"

	"github.com/fintech-bff/bff/internal/dpop"
	"github.com/fintech-bff/bff/internal/problem"
)

// The label values this package decides itself, named once here; the
// others are the typed words of the packages it observes (tokens.Lookup,
// payments.MoneyResult, dpop.Reason, ...). Their strings are those of
// docs/operations.md ("Metrics reference"), which dashboards read: change
// none.

// result is the result label of an event that succeeds or fails:
// resultOK, resultError, or a kind of failure of the event's own (a mint's
// tokens.Kind, a proof's dpop.Reason).
type result string

// The results with no kind of their own.
const (
	resultOK    result = "ok"
	resultError result = "error"
)

// errorResult is resultOK when err is nil, else resultError.
func errorResult(err error) result {
	if err != nil {
		return resultError
	}
	return resultOK
}

// proofResult is a DPoP proof's result: resultOK when accepted (refused is
// ""), else why it was refused.
func proofResult(refused dpop.Reason) result {
	if refused == "" {
		return resultOK
	}
	return result(refused)
}

// lookup is the result label of bff_token_cache_requests_total.
type lookup string

// The token cache's lookups.
const (
	lookupHit  lookup = "hit"  // either layer (bff_token_cache_layer_hits_total says which)
	lookupMiss lookup = "miss" // neither: a mint follows
)

// upstreamStatus is the status label of bff_upstream_requests_total: the
// upstream's status code, or statusNoReply.
type upstreamStatus string

// statusNoReply is the status of an attempt that got no reply (a transport
// failure).
const statusNoReply upstreamStatus = "error"

// upstreamStatusOf is the status label of an attempt answered with status,
// 0 for none.
func upstreamStatusOf(status int) upstreamStatus {
	if status <= 0 {
		return statusNoReply
	}
	return upstreamStatus(strconv.Itoa(status))
}

// httpMethod is the method label of bff_http_requests_total and
// bff_http_request_duration_seconds: a method the BFF serves, or
// methodOther.
type httpMethod string

// methodOther is every method the BFF does not serve, so a client cannot
// grow the label's cardinality.
const methodOther httpMethod = "OTHER"

// methodOf bounds a request's method m to the method label.
func methodOf(m string) httpMethod {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return httpMethod(m)
	}
	return methodOther
}

// errorCode is the code label of bff_errors_total: one of the BFF's own
// codes (problem.Known), or codeUpstreamOther.
type errorCode string

// codeUpstreamOther is every code that is not the BFF's own (an upstream's
// error type, passed on), so an upstream cannot grow the label's
// cardinality.
const codeUpstreamOther errorCode = "UPSTREAM_OTHER"

// errorCodeOf bounds an error envelope's code to the code label.
func errorCodeOf(code string) errorCode {
	if !problem.Known(code) {
		return codeUpstreamOther
	}
	return errorCode(code)
}
