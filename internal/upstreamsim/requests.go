package upstreamsim

import (
	"net/http"
	"sync"
	"time"
)

// maxSeen bounds the request log; older entries are dropped first so a
// long-running simulator does not grow without limit.
const maxSeen = 10000

// SeenRequest is one request as the simulator received it, Authorization
// header included (tests check which token was sent). Requests to the
// control API are not recorded.
type SeenRequest struct {
	Time   time.Time   `json:"time"`
	Method string      `json:"method"`
	Path   string      `json:"path"`
	Query  string      `json:"query"`
	Header http.Header `json:"headers"`
	Body   string      `json:"body,omitempty"`
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
