package payments

import (
	"bytes"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strings"

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
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	path, err := scanValue(d, "")
	if err != nil && !errors.Is(err, errDuplicate) {
		return ""
	}
	return path
}

var errDuplicate = errors.New("duplicate key")

func scanValue(d *json.Decoder, at string) (string, error) {
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
			if seen[lk] {
				return name, errDuplicate
			}
			seen[lk] = true
			if p, err := scanValue(d, name); err != nil {
				return p, err
			}
		}
		_, err = d.Token() // '}'
		return "", err
	case json.Delim('['):
		for i := 0; d.More(); i++ {
			if p, err := scanValue(d, at); err != nil {
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
	key := duplicateKey(body)
	if key == "" {
		return nil
	}
	p := problem.Newf(problem.CodeValidationError, "the key %q appears twice in the body (keys are compared without case): send each once", key)
	p.Fields = []problem.Field{{Field: key, Message: "appears twice (keys are compared without case)"}}
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

// unreadablePayment is the answer to a body on a payment-creating path
// that the BFF cannot read as the upstream would (not UTF-8 JSON, not an
// object, or a paymentInformation that does not decode), while step-up is
// on: such a payment is refused rather than sent unheld. A body that
// plainly creates nothing (no paymentInformation; an init of an existing
// paymentId) is nil: the upstream answers it.
func unreadablePayment(h http.Header, body []byte, path string) *problem.Problem {
	refused := func(detail string) *problem.Problem {
		return problem.New(problem.CodeBadRequest, detail+"; nothing was sent")
	}
	if ct := h.Get("Content-Type"); ct != "" {
		mt, params, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			return refused("send a payment as application/json")
		}
		if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
			return refused("send a payment as UTF-8 JSON")
		}
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return refused("the body is not a JSON object the BFF can read (a byte order mark, nesting too deep, or not JSON)")
	}
	if raw, ok := m["paymentInformation"]; ok {
		var info map[string]any
		if json.Unmarshal(raw, &info) != nil {
			return refused("paymentInformation is not an object the BFF can read (a number out of range, say)")
		}
	}
	return nil
}
