package tokens

import (
	"sync"
	"time"

	"github.com/fintech-bff/bff/internal/localcache"
)

// localEntry is a token in the in-process layer, keyed by its store key
// (which invalidations name). Its times are int64 nanoseconds, so that no
// pointer (a time.Time's location) is left for the garbage collector to
// follow in each of the 100,000 and more entries: expiry, until and
// refreshAt as Unix times (they come from the store's value too), added
// as localcache.Mono (an age, which a wall-clock step must not stretch).
type localEntry struct {
	value                           string
	expiry, until, refreshAt, added int64
}

func newLocalEntry(v stored, added time.Time) localEntry {
	return localEntry{value: v.tok.Value, expiry: v.tok.Expiry.UnixNano(), until: v.until.UnixNano(),
		refreshAt: v.refreshAt.UnixNano(), added: localcache.Mono(added)}
}

func (e localEntry) token() Token { return Token{Value: e.value, Expiry: time.Unix(0, e.expiry)} }

// entryFixed is the fixed size of a localEntry (the token's string header
// and four times), which the token's bytes add to.
const entryFixed = 48

// entryBytes estimates the memory of a cached token besides the cache's
// per-entry overhead and its key. TestBytesPerCachedToken holds it to a
// measurement.
func entryBytes(e localEntry) int { return entryFixed + len(e.value) }

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
