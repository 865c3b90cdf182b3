package upstreamsim

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// maxSeen bounds the request log; older entries are dropped first so a
// long-running simulator does not grow without limit.
const maxSeen = 10000

// SeenRequest is one request as the simulator received it, with its
// credentials redacted: developers paste the log into bug reports. The
// Authorization, Proxy-Authorization and Cookie headers, and any header
// whose name contains "secret" or "token", hold a fingerprint of their
// credentials (see Fingerprint). A query parameter or a JSON body key,
// at any depth, whose name contains "secret" or "token" (any case) holds
// "REDACTED". UserID is the user the request says it acts for: its Bearer
// token's subject (read, not verified), or the userId of a token request.
// Requests to the control API are not recorded.
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
// fingerprints instead of storing, besides those credentialName matches.
var credentialHeaders = []string{"Authorization", "Proxy-Authorization", "Cookie"}

// credentialName reports whether a header, query parameter or JSON key
// names a credential: its name contains "secret" or "token", in any case.
func credentialName[T string | []byte](name T) bool {
	return containsFold(name, "secret") || containsFold(name, "token")
}

// containsFold reports whether s contains word (lower-case ASCII) in any
// case, without allocating: it runs on every request's query and body.
func containsFold[T string | []byte](s T, word string) bool {
	for i := 0; i+len(word) <= len(s); i++ {
		j := 0
		for ; j < len(word); j++ {
			if c := s[i+j]; c != word[j] && c+('a'-'A') != word[j] {
				break
			}
		}
		if j == len(word) {
			return true
		}
	}
	return false
}

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
	for k, vs := range out {
		if !slices.Contains(credentialHeaders, k) && !credentialName(k) {
			continue
		}
		for i, v := range vs {
			vs[i] = redactHeader(v)
		}
	}
	return out
}

// seenQuery is a raw query with the values of credential parameters
// redacted, its order and encoding otherwise kept. A query that does not
// mention a secret or token (nor hides a name behind %-escapes) is kept as
// sent.
func seenQuery(raw string) string {
	if !credentialName(raw) && !strings.Contains(raw, "%") {
		return raw
	}
	pairs := strings.Split(raw, "&")
	for i, p := range pairs {
		k, _, _ := strings.Cut(p, "=")
		if name, err := url.QueryUnescape(k); err != nil || credentialName(name) {
			pairs[i] = k + "=" + redacted
		}
	}
	return strings.Join(pairs, "&")
}

// seenBody is the recorded form of a request body. A body that is not a
// token request's and mentions no secret or token, in any case and with no
// JSON escape that could spell one, is kept as sent (a cheap byte scan, so
// payment bodies cost nothing more). Otherwise the value of every JSON key
// that names a credential, at any depth, is redacted (the rest of the
// body re-encoded around it); a token request's body that is not a JSON
// object, and any other body that mentions a secret or token but is not a
// JSON object or array, is redacted whole. It also returns the body's
// top-level userId, the user a token request names.
func seenBody(body []byte, tokenRequest bool) (string, string) {
	mentions := credentialName(body)
	if !tokenRequest && !mentions && !bytes.Contains(body, []byte(`\u`)) {
		return string(body), ""
	}
	if len(body) == 0 {
		return "", ""
	}
	var v any
	err := json.Unmarshal(body, &v)
	m, isObject := v.(map[string]any)
	_, isArray := v.([]any)
	switch {
	case tokenRequest && !isObject, mentions && !isObject && !isArray:
		return redacted, ""
	case err != nil: // not JSON: its \u is no escape, and it names no credential
		return string(body), ""
	}
	user, _ := m["userId"].(string)
	if !redactJSON(v) {
		return string(body), user
	}
	b, _ := json.Marshal(v)
	return string(b), user
}

// redactJSON replaces, in a decoded JSON value, the value of every key
// that names a credential, in objects at any depth and inside arrays. It
// reports whether it replaced any.
func redactJSON(v any) bool {
	changed := false
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if credentialName(k) {
				v[k], changed = redacted, true
				continue
			}
			changed = redactJSON(e) || changed
		}
	case []any:
		for _, e := range v {
			changed = redactJSON(e) || changed
		}
	}
	return changed
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
		Time: now, Method: r.Method, Path: r.URL.Path, Query: seenQuery(r.URL.RawQuery),
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
