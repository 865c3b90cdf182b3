package tokens

import (
	"sync"
	"time"
)

// localKey names a user's token in this process: the secret generation and
// the user id, so the hot path needs no hashing.
type localKey struct {
	gen  *string
	user string
}

// localEntry is a token in the in-process layer (an lru.Cache keyed by
// localKey, with the shared store's key for invalidation messages).
type localEntry struct {
	storeKey  string
	tok       Token
	until     time.Time
	refreshAt time.Time
	added     time.Time
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
