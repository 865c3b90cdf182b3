// Package problem is the BFF's one error type and its RFC 9457
// application/problem+json rendering. Every error the BFF returns, its own or
// the upstream's, becomes a *Problem and is written by Write, nowhere else.
//
// The package is plain Go: it imports no HTTP framework, so the edge, the
// proxy and the token manager all share it.
package problem

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ContentType is the media type of every error body (RFC 9457).
const ContentType = "application/problem+json"

// The BFF's codes (docs/errors.md, "Codes").
const (
	CodeSessionRequired          = "SESSION_REQUIRED"
	CodeCSRFRejected             = "CSRF_REJECTED"
	CodeRouteNotFound            = "ROUTE_NOT_FOUND"
	CodeMethodNotAllowed         = "METHOD_NOT_ALLOWED"
	CodeBadPath                  = "BAD_PATH"
	CodeBodyTooLarge             = "BODY_TOO_LARGE"
	CodeClientError              = "CLIENT_ERROR"
	CodeValidationError          = "VALIDATION_ERROR"
	CodeProviderUnavailable      = "PROVIDER_UNAVAILABLE"
	CodeInsufficientCredits      = "INSUFFICIENT_CREDITS"
	CodeNotAvailableOnPlan       = "NOT_AVAILABLE_ON_PLAN"
	CodeAccountLimitReached      = "ACCOUNT_LIMIT_REACHED"
	CodeMCPForbidden             = "MCP_FORBIDDEN"
	CodeMCPNoServiceOrg          = "MCP_NO_SERVICE_ORG"
	CodeMCPTemporarilyUnavail    = "MCP_TEMPORARILY_UNAVAILABLE"
	CodeForbidden                = "FORBIDDEN"
	CodeNoRefreshableConnections = "NO_REFRESHABLE_CONNECTIONS"
	CodeResourceLocked           = "RESOURCE_LOCKED"
	CodeUpstreamAuthFailed       = "UPSTREAM_AUTH_FAILED"
	CodeUpstreamError            = "UPSTREAM_ERROR"
	CodeUpstreamUnavailable      = "UPSTREAM_UNAVAILABLE"
	CodeUpstreamUnreachable      = "UPSTREAM_UNREACHABLE"
	CodeUpstreamTimeout          = "UPSTREAM_TIMEOUT"
	CodeSessionStoreUnavailable  = "SESSION_STORE_UNAVAILABLE"
	CodeBadRequest               = "BAD_REQUEST"
	CodeNotFound                 = "NOT_FOUND"
	CodeInternal                 = "INTERNAL"
	CodeClientClosedRequest      = "CLIENT_CLOSED_REQUEST"
	CodeLoginFailed              = "LOGIN_FAILED"
	CodeInvalidGrant             = "INVALID_GRANT"
	CodeIdempotencyKeyRequired   = "IDEMPOTENCY_KEY_REQUIRED"
	CodeIdempotencyKeyInvalid    = "IDEMPOTENCY_KEY_INVALID"
	CodeIdempotencyKeyReused     = "IDEMPOTENCY_KEY_REUSED"
	CodeIdempotencyInProgress    = "IDEMPOTENCY_IN_PROGRESS"
	CodePaymentOutcomeUnknown    = "PAYMENT_OUTCOME_UNKNOWN"
	CodeLedgerUnavailable        = "LEDGER_UNAVAILABLE"
	CodeAdminTokenRequired       = "ADMIN_TOKEN_REQUIRED"
	CodeRateLimited              = "RATE_LIMITED"
	CodeRefreshTooSoon           = "REFRESH_TOO_SOON"
	CodeStepUpRequired           = "STEP_UP_REQUIRED"
	CodeStepUpDeclined           = "STEP_UP_DECLINED"
	CodeDPoPProofInvalid         = "DPOP_PROOF_INVALID"
)

// Actions tell a frontend what to do next.
const (
	ActionLogin               = "login"
	ActionFixRequest          = "fix_request"
	ActionRetryLater          = "retry_later"
	ActionWaitForCredits      = "wait_for_credits"
	ActionUpgradePlan         = "upgrade_plan"
	ActionContactSupport      = "contact_support"
	ActionReconnectBank       = "reconnect_bank"
	ActionCheckStatus         = "check_status"
	ActionStepUp              = "step_up"
	ActionNone                = "none"
	StatusClientClosedRequest = 499
)

// Field is one entry of a validation error.
type Field struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Problem is the one error type of the BFF: the status, a message safe to
// show, and the internal cause (never rendered). It implements error.
//
// The tagged fields are the standard members, written in this order;
// requestId is always last. Ext holds the members of one condition only.
type Problem struct {
	Type      string  `json:"type"`
	Title     string  `json:"title"`
	Status    int     `json:"status"`
	Detail    string  `json:"detail,omitempty"`
	Code      string  `json:"code"`
	Action    string  `json:"action"`
	Retryable bool    `json:"retryable"`
	Fields    []Field `json:"fields,omitempty"`
	RequestID string  `json:"requestId"`

	// Ext are extension members (RFC 9457, section 3.2), set where the
	// condition they belong to is made (FromUpstream's 402: cost and
	// balance). They are written in their order after the standard
	// members, before requestId. A member whose name is not of the form
	// RFC 9457 asks (a letter, then letters, digits and "_", three or more
	// in all), is a standard member's name in any case, or repeats an
	// earlier one, is not written: an extension never replaces a standard
	// member.
	Ext []Member `json:"-"`

	// RetryAfter, when set, is sent as the Retry-After header.
	RetryAfter string `json:"-"`
	// Allow, when set, is sent as the Allow header (405).
	Allow string `json:"-"`
	// WWWAuthenticate, when set, is sent as the WWW-Authenticate header (a
	// 401 that names what authentication would succeed).
	WWWAuthenticate string `json:"-"`
	// Err is the internal cause: logged, never rendered.
	Err error `json:"-"`
}

// Error implements error with the code and detail; never the cause's text,
// which may hold upstream details.
func (p *Problem) Error() string {
	if p.Detail != "" {
		return p.Code + ": " + p.Detail
	}
	return p.Code
}

// Unwrap returns the internal cause.
func (p *Problem) Unwrap() error { return p.Err }

// Member is an extension member of a problem: a name and a value that
// encoding/json can write (a value it cannot, such as NaN, makes Write
// send 500 INTERNAL instead).
type Member struct {
	Name  string
	Value any
}

// standardMembers are the members the package writes or that RFC 9457
// defines (instance), and errors, which the RFC's example gives a meaning
// and clients read: no extension member may take one of their names, in
// any case (encoding/json, among other clients, matches names without
// regard to case).
var standardMembers = []string{"type", "title", "status", "detail", "instance", "code", "action", "retryable",
	"fields", "errors", "requestId"}

// reMemberName is the form RFC 9457 (section 3.2) asks of extension
// member names: a letter, then letters, digits and "_", three or more in all.
var reMemberName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{2,}$`)

// extensible reports whether name may be an extension member's: of the
// form RFC 9457 asks, and not a standard member's name in any case.
func extensible(name string) bool {
	if !reMemberName.MatchString(name) {
		return false
	}
	for _, s := range standardMembers {
		if strings.EqualFold(name, s) {
			return false
		}
	}
	return true
}

// MarshalJSON writes p's standard members in their order, then its
// extension members in theirs (see Ext for those left out), then
// requestId. Its receiver is a value so that a Problem marshalled by
// value keeps its extension members too.
func (p Problem) MarshalJSON() ([]byte, error) {
	type standard Problem // the same fields and tags, without this method
	if len(p.Ext) == 0 {
		return json.Marshal(standard(p))
	}
	s := standard(p)
	s.RequestID = ""
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	// requestId is the last field and never omitted: the standard members
	// end with it, and the extension members go in front of it.
	const emptyID = `,"requestId":""}`
	if !bytes.HasSuffix(b, []byte(emptyID)) {
		return nil, errors.New("problem: the standard members do not end with requestId")
	}
	b = b[:len(b)-len(emptyID)]
	written := make([]string, 0, len(p.Ext))
	for _, m := range p.Ext {
		if !extensible(m.Name) || slices.ContainsFunc(written, func(n string) bool { return strings.EqualFold(n, m.Name) }) {
			continue
		}
		written = append(written, m.Name)
		v, err := json.Marshal(m.Value)
		if err != nil {
			return nil, fmt.Errorf("problem: extension member %s: %w", m.Name, err)
		}
		b = append(b, ',', '"')
		b = append(b, m.Name...) // letters, digits and _ only: nothing to escape
		b = append(b, '"', ':')
		b = append(b, v...)
	}
	id, _ := json.Marshal(p.RequestID) // a string always marshals
	b = append(b, `,"requestId":`...)
	b = append(b, id...)
	return append(b, '}'), nil
}

// TypeURI is the stable type URI of a code.
func TypeURI(code string) string { return "urn:bff:problem:" + code }

type spec struct {
	status    int
	title     string
	action    string
	retryable bool
}

// specs holds the BFF's own codes (those not derived from an upstream
// status) with their fixed status, title, action and retryability.
var specs = map[string]spec{
	CodeSessionRequired:          {http.StatusUnauthorized, "Session required", ActionLogin, false},
	CodeCSRFRejected:             {http.StatusForbidden, "Cross-site request rejected", ActionFixRequest, false},
	CodeRouteNotFound:            {http.StatusNotFound, "Route not found", ActionFixRequest, false},
	CodeMethodNotAllowed:         {http.StatusMethodNotAllowed, "Method not allowed", ActionFixRequest, false},
	CodeBadPath:                  {http.StatusBadRequest, "Malformed path", ActionFixRequest, false},
	CodeBodyTooLarge:             {http.StatusRequestEntityTooLarge, "Request body too large", ActionFixRequest, false},
	CodeClientError:              {http.StatusBadRequest, "Invalid request", ActionFixRequest, false},
	CodeValidationError:          {http.StatusBadRequest, "Validation failed", ActionFixRequest, false},
	CodeProviderUnavailable:      {http.StatusServiceUnavailable, "Bank provider temporarily unavailable", ActionRetryLater, true},
	CodeInsufficientCredits:      {http.StatusPaymentRequired, "Not enough credits", ActionWaitForCredits, false},
	CodeNotAvailableOnPlan:       {http.StatusForbidden, "Not available on your plan", ActionUpgradePlan, false},
	CodeAccountLimitReached:      {http.StatusForbidden, "Account limit reached", ActionContactSupport, false},
	CodeMCPForbidden:             {http.StatusForbidden, "Connector scope missing", ActionContactSupport, false},
	CodeMCPNoServiceOrg:          {http.StatusForbidden, "Connector has no linked account", ActionContactSupport, false},
	CodeMCPTemporarilyUnavail:    {http.StatusServiceUnavailable, "Connector verification temporarily unavailable", ActionRetryLater, true},
	CodeForbidden:                {http.StatusForbidden, "Forbidden", ActionContactSupport, false},
	CodeNoRefreshableConnections: {http.StatusConflict, "No refreshable bank connection", ActionReconnectBank, false},
	CodeResourceLocked:           {http.StatusLocked, "Resource locked", ActionRetryLater, true},
	CodeUpstreamAuthFailed:       {http.StatusBadGateway, "Upstream authentication failed", ActionContactSupport, false},
	CodeUpstreamError:            {http.StatusBadGateway, "Upstream error", ActionRetryLater, true},
	CodeUpstreamUnavailable:      {http.StatusServiceUnavailable, "Upstream temporarily unavailable", ActionRetryLater, true},
	CodeUpstreamUnreachable:      {http.StatusBadGateway, "Upstream unreachable", ActionRetryLater, true},
	CodeUpstreamTimeout:          {http.StatusGatewayTimeout, "Upstream timed out", ActionRetryLater, true},
	CodeSessionStoreUnavailable:  {http.StatusServiceUnavailable, "Session store unavailable", ActionRetryLater, true},
	CodeBadRequest:               {http.StatusBadRequest, "Bad request", ActionFixRequest, false},
	CodeNotFound:                 {http.StatusNotFound, "Not found", ActionFixRequest, false},
	CodeInternal:                 {http.StatusInternalServerError, "Internal error", ActionRetryLater, true},
	CodeClientClosedRequest:      {StatusClientClosedRequest, "Client closed request", ActionNone, false},
	CodeLoginFailed:              {http.StatusBadRequest, "Login failed", ActionLogin, false},
	CodeInvalidGrant:             {http.StatusBadRequest, "Invalid, used or expired login code", ActionLogin, false},
	CodeIdempotencyKeyRequired:   {http.StatusBadRequest, "Idempotency-Key required", ActionFixRequest, false},
	CodeIdempotencyKeyInvalid:    {http.StatusBadRequest, "Invalid Idempotency-Key", ActionFixRequest, false},
	CodeIdempotencyKeyReused:     {http.StatusUnprocessableEntity, "Idempotency-Key reused for another request", ActionFixRequest, false},
	CodeIdempotencyInProgress:    {http.StatusConflict, "A request with this Idempotency-Key is in progress", ActionRetryLater, true},
	CodePaymentOutcomeUnknown:    {http.StatusBadGateway, "Payment outcome unknown", ActionCheckStatus, false},
	CodeLedgerUnavailable:        {http.StatusServiceUnavailable, "Payments ledger unavailable", ActionRetryLater, true},
	CodeAdminTokenRequired:       {http.StatusUnauthorized, "Admin token required", ActionFixRequest, false},
	CodeRateLimited:              {http.StatusTooManyRequests, "Too many requests", ActionRetryLater, true},
	CodeRefreshTooSoon:           {http.StatusTooManyRequests, "Refreshed too recently", ActionRetryLater, true},
	CodeStepUpRequired:           {http.StatusUnauthorized, "Approval required", ActionStepUp, false},
	CodeStepUpDeclined:           {http.StatusForbidden, "Payment not approved", ActionFixRequest, false},
	CodeDPoPProofInvalid:         {http.StatusUnauthorized, "DPoP proof refused", ActionFixRequest, false},
}

// Known reports whether code is one of the BFF's own codes (metric labels
// carry only these, so an upstream cannot grow their cardinality).
func Known(code string) bool {
	_, ok := specs[code]
	return ok
}

// New returns the Problem for one of the BFF's own codes, with a detail safe
// to show. An unknown code yields a 500 INTERNAL problem.
func New(code, detail string) *Problem {
	s, ok := specs[code]
	if !ok {
		code, s = CodeInternal, specs[CodeInternal]
	}
	return &Problem{
		Type:      TypeURI(code),
		Title:     s.title,
		Status:    s.status,
		Detail:    detail,
		Code:      code,
		Action:    s.action,
		Retryable: s.retryable,
	}
}

// Later returns the Problem for a refusal that lifts after wait: the
// detail's %d is the whole seconds to wait (rounded up), also sent as
// Retry-After.
func Later(code string, wait time.Duration, detailf string, args ...any) *Problem {
	secs := max(int64((wait+time.Second-1)/time.Second), 1)
	p := Newf(code, detailf, append(args, secs)...)
	p.RetryAfter = strconv.FormatInt(secs, 10)
	return p
}

// Wrap is New with an internal cause attached.
func Wrap(code, detail string, cause error) *Problem {
	p := New(code, detail)
	p.Err = cause
	return p
}

// Newf is New with a formatted detail.
func Newf(code, format string, args ...any) *Problem {
	return New(code, fmt.Sprintf(format, args...))
}

// Write renders p as application/problem+json with requestID in both the
// body and the X-Request-Id header. It is the only place errors are rendered.
//
// A nil p is written as INTERNAL, and a status outside 100–999 (which
// http.ResponseWriter.WriteHeader would panic on) as 500.
func Write(w http.ResponseWriter, p *Problem, requestID string) {
	if p == nil {
		p = New(CodeInternal, "")
	}
	out := *p
	out.RequestID = requestID
	if out.Code == "" {
		out.Code = CodeInternal
	}
	if out.Type == "" {
		out.Type = TypeURI(out.Code)
	}
	if out.Status < 100 || out.Status > 999 {
		out.Status = http.StatusInternalServerError
	}
	body, err := json.Marshal(&out)
	if err != nil { // an extension member's value that does not marshal (NaN); keep the envelope and the request id
		out = *New(CodeInternal, "")
		out.RequestID = requestID
		body, _ = json.Marshal(&out)
	}
	h := w.Header()
	h.Set("Content-Type", ContentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if requestID != "" {
		h.Set("X-Request-Id", requestID)
	}
	if out.RetryAfter != "" {
		h.Set("Retry-After", out.RetryAfter)
	}
	if out.Allow != "" {
		h.Set("Allow", out.Allow)
	}
	if out.WWWAuthenticate != "" {
		h.Set("WWW-Authenticate", out.WWWAuthenticate)
	}
	w.WriteHeader(out.Status)
	_, _ = w.Write(body)
}

// CauseText is an internal cause's text for a log line, with any URL taken
// out (a *url.Error names the address and query it failed on); "" for nil.
func CauseText(err error) string {
	if err == nil {
		return ""
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Op + ": " + uerr.Err.Error()
	}
	return err.Error()
}
