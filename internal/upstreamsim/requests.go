package upstreamsim

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"
)

// maxSeen bounds the request log; older entries are dropped first so a
// long-running simulator does not grow without limit.
const maxSeen = 10000

// SeenRequest is one request as the simulator received it, with its
// credentials redacted: developers paste the log into bug reports. The
// Authorization, Proxy-Authorization and Cookie headers hold a fingerprint
// of their credentials (see Fingerprint), and a JSON body's secret and
// token fields hold "REDACTED". UserID is the user the request says it
// acts for: its Bearer token's subject (read, not verified), or the userId
// of a token request. Requests to the control API are not recorded.
type SeenRequest struct {
	Time   time.Time   `json:"time"`
	Method string      `json:"method"`
	Path   string      `json:"path"`
	Query  string      `json:"query"`
	UserID string      `json:"userId,omitempty"`
	Header http.Header `json:"headers"`
	Body   string      `json:"body,omitempty"`
}

// redacted replaces a secret value in the request log.
const redacted = "REDACTED"

// credentialHeaders are the headers whose values the request log
// fingerprints instead of storing.
var credentialHeaders = []string{"Authorization", "Proxy-Authorization", "Cookie"}

// Fingerprint is how the request log shows a credential: for a long one
// (a token) its first 6 characters, then "…(sha256:" and the first 8 hex
// digits of its SHA-256, then ")"; for a short one only the hash part, so
// that a short secret does not show a large share of itself. Tests compare
// a token they hold with the log through it: the log's Authorization
// header is "Bearer " + Fingerprint(token).
func Fingerprint(credential string) string {
	sum := sha256.Sum256([]byte(credential))
	hash := "(sha256:" + hex.EncodeToString(sum[:4]) + ")"
	if len(credential) < 24 {
		return "…" + hash
	}
	return credential[:6] + "…" + hash
}

// redactHeader fingerprints the credentials of one header value, keeping
// an auth scheme ("Bearer") readable.
func redactHeader(v string) string {
	if scheme, cred, ok := strings.Cut(v, " "); ok && !strings.ContainsAny(scheme, "=;") {
		return scheme + " " + Fingerprint(strings.TrimSpace(cred))
	}
	return Fingerprint(v)
}

// seenHeader copies h with its credential headers fingerprinted.
func seenHeader(h http.Header) http.Header {
	out := h.Clone()
	for _, k := range credentialHeaders {
		vs := out[k]
		for i, v := range vs {
			vs[i] = redactHeader(v)
		}
	}
	return out
}

// seenBody is the recorded form of a request body. A body that is not a
// token request's and mentions no secret or token is kept as sent (a cheap
// byte scan, so payment bodies cost nothing more). Otherwise a JSON object
// keeps its keys with the values of secret and token fields redacted;
// anything else is redacted whole. It also returns the body's top-level
// userId, the user a token request names.
func seenBody(body []byte, tokenRequest bool) (string, string) {
	if !tokenRequest && !bytes.Contains(body, []byte("ecret")) && !bytes.Contains(body, []byte("oken")) {
		return string(body), ""
	}
	if len(body) == 0 {
		return "", ""
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return redacted, ""
	}
	for k := range m {
		if l := strings.ToLower(k); strings.Contains(l, "secret") || strings.Contains(l, "token") {
			m[k] = redacted
		}
	}
	user, _ := m["userId"].(string)
	b, _ := json.Marshal(m)
	return string(b), user
}

// seenRequest is r (with its already read body) as the request log keeps
// it: see SeenRequest.
func seenRequest(r *http.Request, body []byte, now time.Time) SeenRequest {
	tokenRequest := r.URL.Path == tokenPath
	recorded, named := seenBody(body, tokenRequest)
	var user string
	switch tok, ok := bearer(r); {
	case tokenRequest:
		user = named
	case ok:
		user = subject(tok)
	}
	return SeenRequest{
		Time: now, Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
		UserID: user, Header: seenHeader(r.Header), Body: recorded,
	}
}

// requestLog keeps the last maxSeen requests in a ring. It is safe for
// concurrent use.
type requestLog struct {
	mu    sync.Mutex
	ring  []SeenRequest
	start int // index of the oldest entry once the ring is full
}

func (l *requestLog) add(r SeenRequest) {
	l.mu.Lock()
	if len(l.ring) < maxSeen {
		l.ring = append(l.ring, r)
	} else {
		l.ring[l.start] = r
		l.start = (l.start + 1) % maxSeen
	}
	l.mu.Unlock()
}

// list returns the recorded requests, oldest first.
func (l *requestLog) list() []SeenRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]SeenRequest, 0, len(l.ring))
	out = append(out, l.ring[l.start:]...)
	return append(out, l.ring[:l.start]...)
}

func (l *requestLog) clear() {
	l.mu.Lock()
	l.ring, l.start = nil, 0
	l.mu.Unlock()
}

// mintCounter counts successful token exchanges per user. It is safe for
// concurrent use.
type mintCounter struct {
	mu     sync.Mutex
	byUser map[string]int
	total  int
}

func (m *mintCounter) add(userID string) {
	m.mu.Lock()
	if m.byUser == nil {
		m.byUser = map[string]int{}
	}
	m.byUser[userID]++
	m.total++
	m.mu.Unlock()
}

func (m *mintCounter) get(userID string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.byUser[userID]
}

func (m *mintCounter) snapshot() (map[string]int, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]int, len(m.byUser))
	for k, v := range m.byUser {
		out[k] = v
	}
	return out, m.total
}

func (m *mintCounter) reset() {
	m.mu.Lock()
	m.byUser, m.total = nil, 0
	m.mu.Unlock()
}
