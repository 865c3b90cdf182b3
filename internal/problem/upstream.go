package problem

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// maxUpstreamBody is the most of an upstream body FromUpstream reads; the
// caller caps the body at this size, FromUpstream enforces it again.
const maxUpstreamBody = 64 << 10

// defaultLockedRetryAfter is the Retry-After sent with a 423 when the
// upstream gives none. A 423 always comes with Retry-After (docs/errors.md); the
// upstream documents no wait, and a connection lock lasts minutes (the
// BigQuery lock is 90 minutes from creation), so a minute is a polite poll.
const defaultLockedRetryAfter = "60"

// reCode is a well-formed upstream error code.
var reCode = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,63}$`)

// reservedCodes are the BFF's own codes, which describe the BFF's state
// (its session, its routing, its link to the upstream). An upstream type
// with one of these names is not passed through: a frontend that saw
// SESSION_REQUIRED would send the user to log in again for nothing.
var reservedCodes = map[string]bool{
	CodeSessionRequired:         true,
	CodeCSRFRejected:            true,
	CodeRouteNotFound:           true,
	CodeMethodNotAllowed:        true,
	CodeBadPath:                 true,
	CodeBodyTooLarge:            true,
	CodeUpstreamAuthFailed:      true,
	CodeUpstreamUnavailable:     true,
	CodeUpstreamUnreachable:     true,
	CodeUpstreamTimeout:         true,
	CodeSessionStoreUnavailable: true,
	CodeInternal:                true,
	CodeClientClosedRequest:     true,
}

// upstreamTypes are the upstream's documented error types. One of them
// alone in message, with no type, is read as the type (the upstream sends
// a plan refusal as 403 {"message":"NOT_AVAILABLE_ON_PLAN"}).
var upstreamTypes = map[string]bool{
	CodeClientError:           true,
	CodeValidationError:       true,
	CodeProviderUnavailable:   true,
	CodeNotAvailableOnPlan:    true,
	CodeAccountLimitReached:   true,
	CodeMCPForbidden:          true,
	CodeMCPNoServiceOrg:       true,
	CodeMCPTemporarilyUnavail: true,
	"INTERNAL_ERROR":          true,
	"INTERNAL_SERVER_ERROR":   true,
}

// The extension members FromUpstream writes, for INSUFFICIENT_CREDITS
// only: the credits the call needs and those the organization has left,
// as numbers.
const (
	memberCost    = "cost"
	memberBalance = "balance"
)

// statusTypes are the values of the upstream's status field (402 and 409
// refresh bodies carry no type) that name an error.
var statusTypes = map[string]string{
	"insufficient_credits":       CodeInsufficientCredits,
	"no_refreshable_connections": CodeNoRefreshableConnections,
}

// KnownUpstreamType reports whether s is one of the upstream's documented
// error types or error statuses: the one list that bounds metric labels
// and that the normaliser reads.
func KnownUpstreamType(s string) bool {
	_, status := statusTypes[s]
	return upstreamTypes[s] || status
}

// UpstreamError is the internal cause FromUpstream attaches to a Problem
// (Problem.Err): the upstream status and its type when well formed. It
// holds nothing from the body beyond that, so it is safe to log.
type UpstreamError struct {
	Status int
	Type   string
	// message is the upstream's message as it came (control characters
	// out, at most maxRawMessage bytes), before Clean: for a developer's
	// eyes only (WithUpstreamMessage), never in Error, a log or production.
	message string
}

// maxRawMessage bounds the upstream message kept for development.
const maxRawMessage = 1000

// memberUpstreamMessage is the extension member WithUpstreamMessage adds.
const memberUpstreamMessage = "upstreamMessage"

// WithUpstreamMessage is p with the upstream's own message as the
// extension member "upstreamMessage", when p came from an upstream answer
// whose URLs Clean took out of the detail. Only for development (env:
// development): there the path the upstream refused (a redirect URL not on
// its allow-list) is what a developer needs. The member keeps the URLs'
// paths, never their scheme, userinfo, host, port, query or fragment (no
// upstream address in a body: docs/errors.md), and is cleaned like the detail of
// everything else that looks like a credential (a Bearer value, a JWT, a
// secret's value).
func WithUpstreamMessage(p *Problem) *Problem {
	var ue *UpstreamError
	if !errors.As(p.Err, &ue) || ue.message == "" {
		return p
	}
	msg := cleanKeepingURLs(ue.message)
	if msg == Clean(ue.message) {
		return p // the URLs were all it could add, and there are none
	}
	q := *p
	q.Ext = append(slices.Clone(p.Ext), Member{memberUpstreamMessage, msg})
	return &q
}

func (e *UpstreamError) Error() string {
	if e.Type == "" {
		return fmt.Sprintf("upstream replied %d", e.Status)
	}
	return fmt.Sprintf("upstream replied %d %s", e.Status, e.Type)
}

// upstreamBody is every field of an upstream error body FromUpstream reads.
// Values stay raw: any of them may be a string, a number, an object, an
// array or null.
type upstreamBody struct {
	Type             json.RawMessage `json:"type"`
	Code             json.RawMessage `json:"code"`
	Status           json.RawMessage `json:"status"`
	Message          json.RawMessage `json:"message"`
	ErrorDescription json.RawMessage `json:"error_description"`
	Detail           json.RawMessage `json:"detail"`
	Error            json.RawMessage `json:"error"`
	Title            json.RawMessage `json:"title"`
	Cost             json.RawMessage `json:"cost"`
	Balance          json.RawMessage `json:"balance"`
}

// reply is what FromUpstream learnt from an upstream body.
type reply struct {
	typ     string   // the upstream error code, well formed, or ""
	message string   // the message text, uncleaned
	detail  string   // the message made safe to show
	list    bool     // message is a list of strings
	entries []string // its entries, cleaned, when list
	cost    *float64 // 402
	balance *float64 // 402
}

// FromUpstream turns an upstream error reply into the error envelope
// (docs/errors.md). status is the upstream status, expected
// to be 400 or more; a status outside 400–599 is the upstream misbehaving
// and becomes 502 UPSTREAM_ERROR. header may be nil; only Retry-After (and
// Date, to read it) are read from it, and a Retry-After is passed on as
// RelayRetryAfter makes it: seconds, at most MaxRetryAfter. body is the start of the reply (at most 64 KiB is read) and
// may be anything: a JSON object in any of the upstream's shapes, a JSON
// array or scalar, plain text, HTML from a gateway, invalid UTF-8, or empty.
//
// The detail is the upstream message passed through Clean (for HTML, the
// page's title or nothing), so the result never carries a URL, token or
// secret from the body. FromUpstream never returns nil and never panics;
// the returned Problem's Err is an *UpstreamError.
func FromUpstream(status int, header http.Header, body []byte) *Problem {
	r := parseReply(body)
	retryAfter := RelayRetryAfter(header, time.Now())

	var p *Problem
	switch {
	case status < 400 || status > 599:
		p = New(CodeUpstreamError, "")
	case status == http.StatusUnauthorized:
		// The proxy calls FromUpstream for a 401 only after its one retry
		// with a new token failed: the BFF's credentials are at fault, not
		// the user's session, so this must not read as 401 to the browser.
		p = New(CodeUpstreamAuthFailed, r.detail)
	case status == http.StatusPaymentRequired:
		p = New(CodeInsufficientCredits, r.detail)
		// The condition's own members (api/openapi.yaml), when the
		// upstream gave them: cost, then balance.
		if r.cost != nil {
			p.Ext = append(p.Ext, Member{memberCost, *r.cost})
		}
		if r.balance != nil {
			p.Ext = append(p.Ext, Member{memberBalance, *r.balance})
		}
	case status == http.StatusForbidden:
		p = forbidden(r)
	case status == http.StatusConflict && r.typ == CodeNoRefreshableConnections:
		p = New(CodeNoRefreshableConnections, r.detail)
	case status == http.StatusLocked:
		p = New(CodeResourceLocked, r.detail)
		p.RetryAfter = retryAfter
		if p.RetryAfter == "" {
			p.RetryAfter = defaultLockedRetryAfter
		}
	case r.typ == CodeProviderUnavailable && (status == http.StatusBadRequest || status == http.StatusServiceUnavailable):
		p = New(CodeProviderUnavailable, r.detail)
	case status == http.StatusInternalServerError, status == http.StatusBadGateway:
		p = New(CodeUpstreamError, r.detail)
	case status == http.StatusGatewayTimeout:
		p = New(CodeUpstreamTimeout, r.detail)
	case status == http.StatusServiceUnavailable && r.typ == CodeMCPTemporarilyUnavail:
		p = New(CodeMCPTemporarilyUnavail, r.detail)
	case status == http.StatusServiceUnavailable:
		p = New(CodeUpstreamUnavailable, r.detail)
	default:
		p = generic(status, r)
	}
	if p.Retryable && p.RetryAfter == "" {
		p.RetryAfter = retryAfter
	}
	if status >= 400 && status <= 599 && (p.Code == CodeClientError || p.Code == CodeValidationError) {
		if r.list {
			p.Fields = fieldsOf(r.entries)
		} else {
			p.Fields = ParseFields(r.message)
		}
	}
	raw := stripControl(r.message)
	if len(raw) > maxRawMessage {
		// Cut at white space, as capInput does: a URL cut short (no dot
		// left in its host) would no longer read as one.
		raw = raw[:maxRawMessage]
		if i := strings.LastIndexAny(raw, " \t\r\n"); i >= 0 {
			raw = raw[:i]
		} else {
			raw = ""
		}
	}
	p.Err = &UpstreamError{Status: status, Type: r.typ, message: raw}
	return p
}

// forbidden maps a 403. Every 403 without a usable type, an empty body
// included, is FORBIDDEN with contact_support: a gateway refusing a scope
// gives nothing to fix in the request.
func forbidden(r reply) *Problem {
	switch r.typ {
	case CodeNotAvailableOnPlan, CodeAccountLimitReached, CodeMCPForbidden, CodeMCPNoServiceOrg:
		return New(r.typ, r.detail)
	case "":
		return New(CodeForbidden, r.detail)
	}
	return generic(http.StatusForbidden, r)
}

// generic maps any other upstream error: the upstream status and type,
// action and retryability by status.
func generic(status int, r reply) *Problem {
	code := r.typ
	if code == "" {
		code = CodeUpstreamError
	}
	title := http.StatusText(status)
	if s, ok := specs[code]; ok {
		title = s.title
	}
	if title == "" {
		title = "Upstream error"
	}
	p := &Problem{
		Type:   TypeURI(code),
		Title:  title,
		Status: status,
		Detail: r.detail,
		Code:   code,
		Action: ActionFixRequest,
	}
	// 408 is here with 429 and 5xx: the upstream timed out waiting for the
	// BFF, and RFC 9110 (15.5.9) lets the request be repeated.
	if status == http.StatusTooManyRequests || status == http.StatusRequestTimeout || status >= 500 {
		p.Action, p.Retryable = ActionRetryLater, true
	}
	return p
}

// parseReply reads an upstream body in any shape.
func parseReply(body []byte) reply {
	if len(body) > maxUpstreamBody {
		body = body[:maxUpstreamBody]
	}
	b := bytes.TrimSpace(bytes.TrimPrefix(bytes.TrimSpace(body), []byte("\xef\xbb\xbf")))
	if len(b) == 0 {
		return reply{}
	}
	var r reply
	switch b[0] {
	case '{':
		var ub upstreamBody
		if json.Unmarshal(b, &ub) != nil {
			return r // truncated or broken JSON: nothing is safe to show
		}
		r.typ = wellFormedType(rawString(ub.Type))
		if r.typ == "" {
			r.typ = wellFormedType(rawString(ub.Code))
		}
		if r.typ == "" {
			r.typ = statusTypes[rawString(ub.Status)]
		}
		for _, m := range []json.RawMessage{ub.Message, ub.ErrorDescription, ub.Detail, ub.Error, ub.Title} {
			if r.message = rawText(m, 2); r.message != "" {
				break
			}
		}
		r.cost, r.balance = rawNumber(ub.Cost), rawNumber(ub.Balance)
	case '[':
		if json.Valid(b) {
			r.message = string(b)
		}
	case '<':
		r.message = htmlTitle(b)
	default:
		if json.Valid(b) { // a bare string, number or literal
			r.message = rawText(b, 2)
		} else {
			r.message = stripTags(string(b))
		}
	}
	if t := strings.TrimSpace(r.message); r.typ == "" && upstreamTypes[t] {
		r.typ, r.message = t, ""
	}
	var entries []string
	if entries, r.list = listEntries(r.message); r.list {
		r.entries = cleanEntries(entries)
		r.detail = joinEntries(r.entries)
	} else {
		r.detail = Clean(r.message)
	}
	return r
}

// wellFormedType returns t when it is a code the BFF may pass on.
func wellFormedType(t string) string {
	if !reCode.MatchString(t) || reservedCodes[t] || Clean(t) != t {
		return ""
	}
	return t
}

// rawString is a JSON string's value, or "" for anything else.
func rawString(raw json.RawMessage) string {
	// Fast path: raw comes from a successful Unmarshal, so a quoted run
	// with no escapes is the value itself.
	if n := len(raw); n >= 2 && raw[0] == '"' && raw[n-1] == '"' && bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw[1 : n-1])
	}
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// rawText renders any JSON value as message text: a string as itself (or,
// when the string is itself a JSON object, as that object's text, which is
// how the upstream wraps an OAuth error in a 401); a number or boolean as
// its literal; an object as its message-like field, else compact JSON; an
// array as compact JSON (ParseFields reads it as a list); null as "".
func rawText(raw json.RawMessage, depth int) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '"':
		s := rawString(raw)
		if t := strings.TrimSpace(s); depth > 0 && strings.HasPrefix(t, "{") && json.Valid([]byte(t)) {
			if inner := rawText(json.RawMessage(t), depth-1); inner != "" {
				return inner
			}
		}
		return s
	case '{':
		var ub upstreamBody
		if depth > 0 && json.Unmarshal(raw, &ub) == nil {
			for _, m := range []json.RawMessage{ub.ErrorDescription, ub.Message, ub.Detail, ub.Error, ub.Title} {
				if s := rawText(m, depth-1); s != "" {
					return s
				}
			}
		}
		return compact(raw)
	case '[':
		return compact(raw)
	case 'n':
		return ""
	}
	return string(raw)
}

func compact(raw []byte) string {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return ""
	}
	return buf.String()
}

// rawNumber reads a finite number given as a JSON number or a numeric
// string; anything else is nil.
func rawNumber(raw json.RawMessage) *float64 {
	s := string(bytes.TrimSpace(raw))
	if s == "" || s == "null" {
		return nil
	}
	if s[0] == '"' {
		s = strings.TrimSpace(rawString(raw))
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	return &f
}

// htmlTitle is the text of an HTML page's <title>, or "": markup, scripts
// and a gateway's page body are never shown.
func htmlTitle(b []byte) string {
	lower := bytes.ToLower(b)
	i := bytes.Index(lower, []byte("<title"))
	if i < 0 {
		return ""
	}
	j := bytes.IndexByte(lower[i:], '>')
	if j < 0 {
		return ""
	}
	start := i + j + 1
	end := bytes.Index(lower[start:], []byte("</title"))
	if end < 0 || end > 512 {
		return ""
	}
	return html.UnescapeString(stripTags(string(b[start : start+end])))
}

// stripTags removes anything that looks like markup from plain text.
var reTag = regexp.MustCompile(`<[!/?]?[A-Za-z][^<>]*>|<!--.*?-->`)

func stripTags(s string) string {
	if !strings.Contains(s, "<") {
		return s
	}
	return reTag.ReplaceAllString(s, " ")
}

// joinEntries is the detail of a list message: its cleaned entries joined
// by "; ", not the list's source text.
func joinEntries(entries []string) string {
	var b strings.Builder
	for _, e := range entries {
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString(e)
		if b.Len() > 4*maxDetailRunes {
			break
		}
	}
	return truncateRunes(b.String(), maxDetailRunes)
}
