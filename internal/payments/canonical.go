package payments

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/fintech-bff/bff/internal/money"
	"github.com/fintech-bff/bff/internal/mutant"
	"github.com/fintech-bff/bff/internal/problem"
)

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
