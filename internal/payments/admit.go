package payments

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/money"
	"github.com/fintech-bff/bff/internal/mutant"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
)

// Admission: a money-moving request is read once, here, and refused
// before anything is claimed when the BFF and the upstream could read it
// two ways (docs/payments.md, "Requests read one way"). What it lets in is
// a moneyCall: what will be claimed, held and sent.

// admit reads a money-moving request with its body: a POST under a money
// route (route is its prefix), or with change set a change of a merchant.
// A refusal comes with the result the Observer is told.
func admit(r *http.Request, body []byte, c proxy.Call, t proxy.Target, route string, change bool) (*moneyCall, MoneyResult, *problem.Problem) {
	key, p := idempotencyKey(r.Header)
	switch {
	case p != nil && change:
		p.Detail = "a change of a merchant (where money goes) is approved by the user before it is sent: " + p.Detail
		fallthrough
	case p != nil:
		if p.Code == problem.CodeIdempotencyKeyRequired {
			return nil, MoneyKeyRequired, p
		}
		return nil, MoneyKeyInvalid, p
	}
	m := &moneyCall{call: c, target: t, rawQuery: r.URL.RawQuery, header: r.Header, method: r.Method}
	m.req = ledger.Request{UserID: c.UserID, Route: route, Key: key,
		SessionRef: c.SessionRef, ClientIP: c.ClientIP, RequestID: c.RequestID}
	if result, p := m.read(r, body, change); p != nil {
		return nil, result, p
	}
	m.req.Fingerprint = fingerprint(m.method, m.target.Path, m.rawQuery, m.body)
	return m, "", nil
}

// read reads a money request's path and body into m, every check in one
// order, each refusal once: an endpoint the upstream defines, a body read
// one way (readable), no query, JSON, then the body as the model reads it.
// The BFF sends what it read: a creation's, an init's or a merchant's
// body is decoded once into the model, and from here on everything (the
// record, the comparisons, a hold, the send) uses its canonical encoding,
// never the client's bytes. An operator's own money route is sent as it
// came, and never settled.
func (m *moneyCall) read(r *http.Request, body []byte, change bool) (MoneyResult, *problem.Problem) {
	e, p := m.endpoint(change)
	if p != nil {
		return MoneyRouteRefused, p
	}
	if p := readable(r.Header, body); p != nil {
		return MoneyBodyRefused, p
	}
	m.body = body
	m.rawFingerprint = fingerprint(r.Method, m.target.Path, r.URL.RawQuery, body)
	if e == ownRoute {
		return "", nil
	}
	if p := noQuery(r.URL); p != nil {
		return MoneyBodyRefused, p
	}
	if e != merchantDeletion {
		if p := checkMediaType(r.Header); p != nil {
			return MoneyBodyRefused, p
		}
	}
	if p := m.readModel(e, body); p != nil {
		return MoneyBodyRefused, p
	}
	m.header = r.Header.Clone()
	m.header.Set("Content-Type", "application/json")
	return "", nil
}

// endpoint is what a money request reaches.
type endpoint int

const (
	paymentEndpoint  endpoint = iota // the creation or the open-banking init
	ownRoute                         // an operator's own money route
	merchantChange                   // a merchant created or changed
	merchantDeletion                 // a merchant deleted
)

// endpoint reads m's path: the endpoint it reaches, with m's path as the
// upstream routes it (canonicalPath), or the refusal of a path the
// upstream does not define (404 ROUTE_NOT_FOUND, nothing claimed).
func (m *moneyCall) endpoint(change bool) (endpoint, *problem.Problem) {
	if change {
		action, _, ok := payeeTarget(m.target.Path, m.method)
		switch {
		case !ok:
			return 0, problem.New(problem.CodeRouteNotFound, "the upstream defines no change of a merchant at this path; nothing was sent")
		case action == "delete":
			return merchantDeletion, nil
		}
		return merchantChange, nil
	}
	path, ok := canonicalPath(m.target.Path)
	if !ok {
		return 0, problem.New(problem.CodeRouteNotFound, "the upstream defines no money-moving endpoint at this path; nothing was sent")
	}
	m.target.Path = path
	if path != creationPath && path != initPath {
		return ownRoute, nil
	}
	return paymentEndpoint, nil
}

// readModel reads body into m as the model reads e's body: a payment (its
// content, when it creates one), a merchant, or a deletion's empty body.
func (m *moneyCall) readModel(e endpoint, body []byte) *problem.Problem {
	switch e {
	case merchantDeletion, merchantChange:
		m.target.Path, m.req.Route = strings.TrimSuffix(m.target.Path, "/"), merchantsPath
	}
	switch e {
	case merchantDeletion:
		if len(bytes.TrimSpace(body)) > 0 {
			p := problem.New(problem.CodeValidationError, "a merchant's deletion has no body; nothing was sent")
			p.Fields = []problem.Field{{Field: "body", Message: "must be empty"}}
			return p
		}
		m.body = nil // sent with none
	case merchantChange:
		var p *problem.Problem
		_, m.body, p = readMerchant(body)
		return p
	default:
		read, p := readBody(m.target.Path, body)
		if p != nil {
			return p
		}
		m.body, m.content = read.Encode(), contentOf(read)
		if m.content.Info != nil {
			m.creates, m.req.Content = true, m.content.Encode()
		}
	}
	return nil
}

// canonicalPath is the money endpoint a POST to path reaches, read as the
// upstream routes it: a trailing slash is the same endpoint (most
// frameworks route it so), and a sub-path of the creation or of the
// open-banking family that the upstream does not define is refused, never
// claimed. ok is false for a refused path. A path outside those families
// (an operator's own money route) is served as itself, never settled.
func canonicalPath(path string) (string, bool) {
	p := strings.TrimSuffix(path, "/")
	if mutant.Is(mutant.NoTrailingSlash) {
		p = path
	}
	switch {
	case p == creationPath || p == initPath:
		return p, true
	case strings.HasPrefix(p, creationPath+"/"), p == "/v2/pay", strings.HasPrefix(p, "/v2/pay/"):
		return "", false
	}
	return p, true
}

// duplicateKey finds, in a JSON body, an object with two keys that are
// equal or differ only in case: the BFF (Go's decoder matches keys without
// case and keeps the last) and the upstream (exact keys, first or last)
// could then read two different payments. It returns the key's path, or
// "" when there is none or the body is not JSON (the upstream refuses that
// itself).
func duplicateKey(body []byte) string {
	path, _ := scanBody(body)
	return path
}

// maxDepth bounds how deep a money body may nest: the model needs three
// levels, and a scan with no bound would recurse once per bracket of a
// megabyte of them.
const maxDepth = 32

// scanBody reads a JSON body's structure once: the path of a key repeated
// (without case), or deep when it nests past maxDepth.
func scanBody(body []byte) (dupKey string, deep bool) {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	path, err := scanValue(d, "", 0)
	switch {
	case errors.Is(err, errTooDeep):
		return "", true
	case err != nil && !errors.Is(err, errDuplicate):
		return "", false
	}
	return path, false
}

var (
	errDuplicate = errors.New("duplicate key")
	errTooDeep   = errors.New("nested too deep")
)

func scanValue(d *json.Decoder, at string, depth int) (string, error) {
	if depth > maxDepth {
		return "", errTooDeep
	}
	tok, err := d.Token()
	if err != nil {
		return "", err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for d.More() {
			kt, err := d.Token()
			if err != nil {
				return "", err
			}
			k, _ := kt.(string)
			name := k
			if at != "" {
				name = at + "." + k
			}
			lk := strings.ToLower(k)
			if mutant.Is(mutant.CaseVariantKeys) {
				lk = k
			}
			if seen[lk] {
				return name, errDuplicate
			}
			seen[lk] = true
			if p, err := scanValue(d, name, depth+1); err != nil {
				return p, err
			}
		}
		_, err = d.Token() // '}'
		return "", err
	case json.Delim('['):
		for i := 0; d.More(); i++ {
			if p, err := scanValue(d, at, depth+1); err != nil {
				return p, err
			}
		}
		_, err = d.Token() // ']'
		return "", err
	}
	return "", nil
}

// checkBody refuses a money body the BFF and the upstream could read as
// two different payments, before anything is claimed.
func checkBody(body []byte) *problem.Problem {
	key, deep := scanBody(body)
	if deep {
		p := problem.Newf(problem.CodeValidationError, "the body nests deeper than %d levels; nothing was sent", maxDepth)
		p.Fields = []problem.Field{{Field: "body", Message: fmt.Sprintf("nests deeper than %d levels", maxDepth)}}
		return p
	}
	if key == "" {
		return nil
	}
	p := problem.Newf(problem.CodeValidationError, "the key %q appears twice in the body (keys are compared without case): send each once", key)
	p.Fields = []problem.Field{{Field: key, Message: "appears twice (keys are compared without case)"}}
	return p
}

// readable refuses, before anything is claimed, a money body the BFF and
// the upstream could read two ways: keys repeated or differing only in
// case, a body nested past maxDepth (checkBody), or a Content-Encoding
// (checkEncoding).
func readable(h http.Header, body []byte) *problem.Problem {
	if p := checkBody(body); p != nil {
		return p
	}
	return checkEncoding(h)
}

// noQuery refuses a query on an endpoint the BFF reads whole (a payment's
// creation or init, a change of a merchant): the upstream defines no query
// parameter there, and an upstream that merges query parameters into the
// body would act on values the BFF never read, compared, held or showed.
func noQuery(u *url.URL) *problem.Problem {
	if u.RawQuery == "" && !u.ForceQuery {
		return nil
	}
	p := problem.New(problem.CodeValidationError, "this endpoint takes no query parameters (the upstream defines none): send the request in its body alone; nothing was sent")
	p.Fields = []problem.Field{{Field: "query", Message: "must be empty"}}
	return p
}

// checkEncoding refuses a money body sent with a Content-Encoding: the BFF
// reads what it records, settles and holds, and an upstream that inflated
// it would read another body than the BFF did.
func checkEncoding(h http.Header) *problem.Problem {
	for _, v := range h.Values("Content-Encoding") {
		if !strings.EqualFold(strings.TrimSpace(v), "identity") {
			return problem.New(problem.CodeBadRequest, "send a money-moving request's body without Content-Encoding; nothing was sent")
		}
	}
	return nil
}

// checkMediaType refuses a money body that says it is not UTF-8 JSON: the
// BFF reads it as JSON, and sends its own JSON encoding of what it read.
func checkMediaType(h http.Header) *problem.Problem {
	ct := h.Get("Content-Type")
	if ct == "" {
		return nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return problem.New(problem.CodeBadRequest, "send a payment as application/json; nothing was sent")
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return problem.New(problem.CodeBadRequest, "send a payment as UTF-8 JSON; nothing was sent")
	}
	return nil
}

// readBody decodes a body on path (the creation or the open-banking init)
// into the BFF's model, once: everything after (the claim, the
// comparisons, a hold, the send) uses what it read. A refusal is 400
// VALIDATION_ERROR naming the member, before anything is claimed.
func readBody(path string, body []byte) (money.Body, *problem.Problem) {
	kind := money.Creation
	if path == initPath {
		kind = money.Init
	}
	b, fe := money.Decode(kind, body)
	if fe == nil {
		return b, nil
	}
	field := fe.Field
	detail := fe.Error() + "; nothing was sent"
	if field == "" {
		field = "body"
	}
	p := problem.New(problem.CodeValidationError, detail)
	p.Fields = []problem.Field{{Field: field, Message: fe.Error()}}
	return money.Body{}, p
}

// readMerchant decodes a merchant body strictly (the model's members only,
// each a string, name required) and returns its canonical encoding.
func readMerchant(body []byte) (merchantBody, []byte, *problem.Problem) {
	refused := func(field, msg string) *problem.Problem {
		p := problem.New(problem.CodeValidationError, field+" "+msg+"; nothing was sent")
		p.Fields = []problem.Field{{Field: field, Message: field + " " + msg}}
		return p
	}
	var m map[string]json.RawMessage
	if !utf8.Valid(body) || json.Unmarshal(body, &m) != nil || m == nil {
		return merchantBody{}, nil, refused("body", "must be a JSON object")
	}
	var out merchantBody
	for k, raw := range m {
		var to *string
		switch k {
		case "name":
			to = &out.Name
		case "iban":
			to = &out.IBAN
		case "website":
			to = &out.Website
		default:
			return merchantBody{}, nil, refused(k, "is not a member the API documents for a merchant (allowed: name, iban, website); the BFF sends only what it can read, so remove it")
		}
		if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			continue
		}
		if json.Unmarshal(raw, to) != nil {
			return merchantBody{}, nil, refused(k, "must be a string")
		}
		if !money.Printable(*to) {
			return merchantBody{}, nil, refused(k, "must not hold control or invisible formatting characters")
		}
	}
	if out.Name == "" {
		return merchantBody{}, nil, refused("name", "is required")
	}
	enc, _ := json.Marshal(out)
	return out, enc, nil
}

// MaxKeyLen bounds an Idempotency-Key.
const MaxKeyLen = 255

// ValidKey reports whether an Idempotency-Key is acceptable: 1 to 255
// printable ASCII characters, no comma (a comma-joined header is several
// keys, RFC 9110 5.3).
func ValidKey(k string) bool {
	if len(k) == 0 || len(k) > MaxKeyLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e || k[i] == ',' {
			return false
		}
	}
	return true
}

// idempotencyKey reads the request's one Idempotency-Key.
func idempotencyKey(h http.Header) (string, *problem.Problem) {
	vs := h.Values("Idempotency-Key")
	switch {
	case len(vs) == 0 || (len(vs) == 1 && vs[0] == ""):
		return "", problem.New(problem.CodeIdempotencyKeyRequired, "send an Idempotency-Key header (a fresh random value per payment, kept across its retries)")
	case len(vs) > 1:
		return "", problem.New(problem.CodeIdempotencyKeyInvalid, "send one Idempotency-Key header, not several")
	case strings.Contains(vs[0], ","):
		return "", problem.New(problem.CodeIdempotencyKeyInvalid, "the Idempotency-Key header holds several keys; send one")
	case !ValidKey(vs[0]):
		return "", problem.New(problem.CodeIdempotencyKeyInvalid, "the Idempotency-Key must be 1 to 255 printable ASCII characters")
	}
	return vs[0], nil
}

// fingerprint identifies a request: method, path, query and body (on the
// creation and the init, the body as the BFF read it: two bodies that are
// the same payment are the same request).
func fingerprint(method, path, query string, body []byte) []byte {
	h := sha256.New()
	for _, s := range []string{method, path, query} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	h.Write(body)
	return h.Sum(nil)
}

// moneyCall is one money-moving request that won its claim. It keeps what
// its sends need of the client's request, never the request itself (whose
// context is the client's connection: the payment is detached from it).
type moneyCall struct {
	call     proxy.Call
	target   proxy.Target
	rawQuery string
	header   http.Header // the client's; proxy sends only the allowlisted ones
	req      ledger.Request
	claim    *ledger.Claim
	body     []byte // what is sent: the model's encoding on the creation and the init
	creates  bool   // it asks the upstream to create a payment: settled from its list
	// content is what it asks the upstream to create, as read (nil Info
	// when it came from a record: wanted reads the record's).
	content Content
	// method is what is sent: a POST, but for a held change of a merchant.
	method string
	// rawFingerprint is the fingerprint of the client's own bytes: a
	// record claimed by a version that fingerprinted those is the same
	// request.
	rawFingerprint []byte
}

// wanted is what the request asks the upstream to create: as read, or
// from its record (an approved hold's).
func (m *moneyCall) wanted() Content {
	if m.content.Info != nil {
		return m.content
	}
	c, _ := ParseContent(m.req.Content)
	return c
}

// sameRequest reports whether rec was claimed by this same request: its
// fingerprint is this request's, or (a record an earlier version claimed)
// that of the client's own bytes, which is then the one to claim it by.
func (m *moneyCall) sameRequest(rec *ledger.Record) bool {
	if bytes.Equal(rec.Fingerprint, m.rawFingerprint) {
		m.req.Fingerprint = rec.Fingerprint
	}
	return bytes.Equal(rec.Fingerprint, m.req.Fingerprint)
}

// heldForm is what a hold of m keeps, to send once approved.
func (m *moneyCall) heldForm() []byte {
	h := heldRequest{Path: m.target.Path, Route: m.target.Route, Query: m.rawQuery, Body: m.body}
	if m.method != http.MethodPost {
		h.Method = m.method
	}
	b, _ := json.Marshal(h)
	return b
}
