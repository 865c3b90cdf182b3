package tokens

import (
	"sync"
	"time"

	"github.com/fintech-bff/bff/internal/nearcache"
)

// localEntry is a token as a local copy holds it, keyed by its store key
// (which invalidations name), as its bytes hold it (appendEntry). Its
// times are int64 nanoseconds, Unix times (they come from the store's
// value too); how old the copy is, nearcache counts.
type localEntry struct {
	value                    string
	expiry, until, refreshAt int64
}

func newLocalEntry(v stored) localEntry {
	return localEntry{value: v.tok.Value, expiry: v.tok.Expiry.UnixNano(), until: v.until.UnixNano(),
		refreshAt: v.refreshAt.UnixNano()}
}

func (e localEntry) token() Token { return Token{Value: e.value, Expiry: time.Unix(0, e.expiry)} }

// appendEntry is how a local copy holds a token: its times, then the
// token.
func appendEntry(b []byte, e localEntry) []byte {
	for _, t := range [...]int64{e.expiry, e.until, e.refreshAt} {
		b = nearcache.AppendInt(b, t)
	}
	return nearcache.AppendString(b, e.value)
}

// readEntry is the token appendEntry wrote.
func readEntry(_ string, b []byte) localEntry {
	r := nearcache.Reader(b)
	return localEntry{expiry: r.Int(), until: r.Int(), refreshAt: r.Int(), value: r.String()}
}

// waiters lets goroutines of this process wait for news of a store key (a
// mint finished, failed, or was invalidated) instead of polling Redis.
type waiters struct {
	mu sync.Mutex
	m  map[string]map[chan struct{}]struct{}
}

func (w *waiters) add(key string) chan struct{} {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]map[chan struct{}]struct{}{}
	}
	if w.m[key] == nil {
		w.m[key] = map[chan struct{}]struct{}{}
	}
	w.m[key][ch] = struct{}{}
	return ch
}

func (w *waiters) remove(key string, ch chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m[key], ch)
	if len(w.m[key]) == 0 {
		delete(w.m, key)
	}
}

func (w *waiters) notify(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.m[key] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
