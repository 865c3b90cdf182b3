package tokens

import (
	"sync"
	"time"

	"github.com/fintech-bff/bff/internal/localcache"
)

// localEntry is a token in the in-process layer, keyed by its store key
// (which invalidations name), as its bytes hold it (appendEntry). Its
// times are int64 nanoseconds: expiry, until and refreshAt as Unix times
// (they come from the store's value too), added as localcache.Mono (an
// age, which a wall-clock step must not stretch).
type localEntry struct {
	value                           string
	expiry, until, refreshAt, added int64
}

func newLocalEntry(v stored, added time.Time) localEntry {
	return localEntry{value: v.tok.Value, expiry: v.tok.Expiry.UnixNano(), until: v.until.UnixNano(),
		refreshAt: v.refreshAt.UnixNano(), added: localcache.Mono(added)}
}

func (e localEntry) token() Token { return Token{Value: e.value, Expiry: time.Unix(0, e.expiry)} }

// appendEntry is how the local layer holds a token: its times, then the
// token.
func appendEntry(b []byte, e localEntry) []byte {
	for _, t := range [...]int64{e.expiry, e.until, e.refreshAt, e.added} {
		b = localcache.AppendInt(b, t)
	}
	return localcache.AppendString(b, e.value)
}

// readEntry is the token appendEntry wrote.
func readEntry(_ string, b []byte) localEntry {
	r := localcache.Reader(b)
	return localEntry{expiry: r.Int(), until: r.Int(), refreshAt: r.Int(), added: r.Int(), value: r.String()}
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
