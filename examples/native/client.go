package main

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
	"regexp"
	"strings"
	"sync"
)

// bffClient sends the app's requests to the BFF, each with a fresh DPoP
// proof, and follows the BFF's nonces (RFC 9449, section 8). Safe for
// concurrent use.
type bffClient struct {
	base   *url.URL     // the BFF's public URL, as the proofs' htu name it
	http   *http.Client // for ordinary requests: it has a timeout
	stream *http.Client // for the event stream: no overall timeout
	prover *prover

	mu    sync.Mutex
	nonce string // the newest DPoP-Nonce the BFF sent, "" before any
}

// newBFFClient is a client for the BFF at base (its public URL, with no
// path, query or fragment).
func newBFFClient(base string, p *prover, hc, stream *http.Client) (*bffClient, error) {
	u, err := url.Parse(strings.TrimSuffix(base, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("-bff %q: want the BFF's public URL, such as http://localhost:8080", base)
	}
	return &bffClient{base: u, http: hc, stream: stream, prover: p}, nil
}

// request is one request to the BFF. body is sent again as is on a retry.
type request struct {
	method, path string      // path may hold a query; it is not part of the proof
	body         []byte      // JSON, or nil
	header       http.Header // more headers: Idempotency-Key, Last-Event-ID
	session      *savedSession
	streaming    bool // the event stream: no overall timeout
}

// send sends r with a proof signed for it, and once more with the BFF's
// nonce when the BFF asks for one (RFC 9449, 8.2: 401 with
// WWW-Authenticate: DPoP error="use_dpop_nonce" and DPoP-Nonce). Any
// answer's DPoP-Nonce becomes the nonce the next proof carries. The caller
// closes the answer's body.
func (c *bffClient) send(ctx context.Context, r request) (*http.Response, error) {
	target, err := c.base.Parse(r.path)
	if err != nil || !strings.HasPrefix(r.path, "/") || target.Host != c.base.Host || target.Scheme != c.base.Scheme {
		// "//host/x" parses as another host: the token goes to the BFF only.
		return nil, fmt.Errorf("%q is not a path on the BFF", r.path)
	}
	for attempt := 0; ; attempt++ {
		req, err := c.build(ctx, r, target)
		if err != nil {
			return nil, err
		}
		hc := c.http
		if r.streaming {
			hc = c.stream
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		if n := resp.Header.Get("DPoP-Nonce"); n != "" {
			c.mu.Lock()
			c.nonce = n
			c.mu.Unlock()
		}
		// Once: a BFF that asks again for the nonce it just got is broken,
		// and asking it a third time would not mend it.
		if attempt == 0 && nonceAsked(resp) {
			drain(resp)
			continue
		}
		return resp, nil
	}
}

func (c *bffClient) build(ctx context.Context, r request, target *url.URL) (*http.Request, error) {
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, target.String(), body)
	if err != nil {
		return nil, err
	}
	// net/http sends a request with an Idempotency-Key again by itself
	// when a kept-alive connection breaks under it, with the same proof,
	// which the BFF refuses as a replay. Without GetBody it never does:
	// send's callers repeat a request, each time with a new proof.
	req.GetBody = nil
	for k, v := range r.header {
		req.Header[k] = v
	}
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	token := ""
	if s := r.session; s != nil {
		token = s.Token
		if !s.bound() {
			// A session the BFF did not bind (session.mobile_dpop off, or
			// a BFF from before DPoP): it takes the token alone.
			req.Header.Set("Authorization", "Bearer "+token)
			return req, nil
		}
		req.Header.Set("Authorization", "DPoP "+token)
	}
	c.mu.Lock()
	nonce := c.nonce
	c.mu.Unlock()
	proof, err := c.prover.proof(r.method, target, token, nonce)
	if err != nil {
		return nil, err
	}
	req.Header.Set("DPoP", proof)
	return req, nil
}

// dpopErrorRE finds the error parameter of a DPoP challenge in a
// WWW-Authenticate header (RFC 9449, 7.1).
var (
	dpopChallengeRE = regexp.MustCompile(`(?i)(?:^|,)\s*DPoP(?:\s+(.*))?$`)
	authErrorRE     = regexp.MustCompile(`(?i)(?:^|[\s,])error\s*=\s*"?([A-Za-z0-9_]+)`)
)

// dpopError is the error of the DPoP challenge in resp's WWW-Authenticate
// ("use_dpop_nonce", "invalid_dpop_proof", "invalid_token"), "" without one.
func dpopError(h http.Header) string {
	for _, v := range h.Values("WWW-Authenticate") {
		if m := dpopChallengeRE.FindStringSubmatch(v); m != nil {
			if e := authErrorRE.FindStringSubmatch(m[1]); e != nil {
				return e[1]
			}
		}
	}
	return ""
}

// nonceAsked says whether resp asks for the request again with the BFF's
// nonce: a resource's 401 with the DPoP challenge (RFC 9449, 9), or a
// token endpoint's 400 use_dpop_nonce (RFC 9449, 8), with a DPoP-Nonce.
func nonceAsked(resp *http.Response) bool {
	if resp.Header.Get("DPoP-Nonce") == "" {
		return false
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		return dpopError(resp.Header) == "use_dpop_nonce"
	case http.StatusBadRequest:
		if dpopError(resp.Header) == "use_dpop_nonce" {
			return true
		}
		// Read the (small) body to look, then put it back for the caller.
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(b))
		var v struct{ Error, Code string }
		_ = json.Unmarshal(b, &v)
		return v.Error == "use_dpop_nonce" || v.Code == "USE_DPOP_NONCE"
	}
	return false
}

// drain reads a little of an answer not used, so its connection is reused.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

// problemError is an error answer of the BFF: an RFC 9457 problem
// (docs/errors.md), whose code an app switches on.
type problemError struct {
	Status    int    `json:"status"`
	Code      string `json:"code"`
	Title     string `json:"title"`
	Detail    string `json:"detail"`
	Action    string `json:"action"`
	Retryable bool   `json:"retryable"`
	RequestID string `json:"requestId"`
	DPoP      string `json:"-"` // the WWW-Authenticate DPoP error, if any
}

func (e *problemError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the BFF answered %d %s", e.Status, e.Code)
	if e.Detail != "" {
		fmt.Fprintf(&b, ": %s", e.Detail)
	} else if e.Title != "" {
		fmt.Fprintf(&b, ": %s", e.Title)
	}
	if e.DPoP != "" {
		fmt.Fprintf(&b, " (DPoP: %s)", e.DPoP)
	}
	if e.Action != "" {
		fmt.Fprintf(&b, " [action %s]", e.Action)
	}
	if e.RequestID != "" {
		fmt.Fprintf(&b, " [request %s]", e.RequestID)
	}
	return b.String()
}

// readProblem reads an error answer and closes its body. An answer that is
// not a problem (a proxy's page in front of the BFF) is told by its status.
func readProblem(resp *http.Response) error {
	defer drain(resp)
	p := &problemError{Status: resp.StatusCode, DPoP: dpopError(resp.Header)}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "application/problem+json" {
		if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(p); err == nil {
			p.Status, p.DPoP = resp.StatusCode, dpopError(resp.Header)
			return p
		}
	}
	p.Code = "NOT_A_PROBLEM"
	p.Detail = fmt.Sprintf("%s with a %q body, not application/problem+json", resp.Status, mt)
	return p
}

// codeOf is the problem code of err, "" when it is no problem answer.
func codeOf(err error) string {
	var p *problemError
	if errors.As(err, &p) {
		return p.Code
	}
	return ""
}

// decodeJSON reads a JSON answer into v and closes its body.
func decodeJSON(resp *http.Response, v any) error {
	defer drain(resp)
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(v); err != nil {
		return fmt.Errorf("reading the BFF's answer to %s %s: %w", resp.Request.Method, resp.Request.URL.Path, err)
	}
	return nil
}
