// Package lru is the bounded in-process cache the BFF keeps in front of
// Redis for sessions and tokens: least recently used entries go first, and
// each entry also has a store key, by which an invalidation message from
// another instance removes it. Safe for concurrent use.
package lru

import (
	"container/list"
	"context"
	"sync"
	"time"
)

// Cache maps K to V, with at most max entries (0 or less: it keeps none).
type Cache[K comparable, V any] struct {
	mu      sync.Mutex
	max     int
	ll      *list.List
	byKey   map[K]*list.Element
	byStore map[string]*list.Element
}

type entry[K comparable, V any] struct {
	key      K
	storeKey string
	val      V
}

// New returns an empty cache of at most max entries.
func New[K comparable, V any](max int) *Cache[K, V] {
	return &Cache[K, V]{max: max, ll: list.New(), byKey: map[K]*list.Element{}, byStore: map[string]*list.Element{}}
}

// Get returns the value under k and marks it recently used.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	var zero V
	if c.max <= 0 {
		return zero, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[k]
	if !ok {
		return zero, false
	}
	c.ll.MoveToFront(el)
	return el.Value.(*entry[K, V]).val, true
}

// Put stores v under k (and storeKey), evicting the least recently used
// entry beyond the bound.
func (c *Cache[K, V]) Put(k K, storeKey string, v V) {
	if c.max <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[k]; ok {
		c.removeLocked(el)
	}
	el := c.ll.PushFront(&entry[K, V]{key: k, storeKey: storeKey, val: v})
	c.byKey[k] = el
	c.byStore[storeKey] = el
	for c.ll.Len() > c.max {
		c.removeLocked(c.ll.Back())
	}
}

// Drop removes the entry under k.
func (c *Cache[K, V]) Drop(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[k]; ok {
		c.removeLocked(el)
	}
}

// DropStoreKey removes the entry whose store key is storeKey.
func (c *Cache[K, V]) DropStoreKey(storeKey string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byStore[storeKey]; ok {
		c.removeLocked(el)
	}
}

// Clear removes every entry.
func (c *Cache[K, V]) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ll.Init()
	clear(c.byKey)
	clear(c.byStore)
}

// Len is the number of entries.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}

func (c *Cache[K, V]) removeLocked(el *list.Element) {
	e := el.Value.(*entry[K, V])
	c.ll.Remove(el)
	delete(c.byKey, e.key)
	if cur, ok := c.byStore[e.storeKey]; ok && cur == el {
		delete(c.byStore, e.storeKey)
	}
}

// Prune removes every entry for which expired returns true and reports how
// many it removed. It holds the lock for one pass over the entries.
func (c *Cache[K, V]) Prune(expired func(V) bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for el := c.ll.Back(); el != nil; {
		prev := el.Prev()
		if expired(el.Value.(*entry[K, V]).val) {
			c.removeLocked(el)
			n++
		}
		el = prev
	}
	return n
}

// PruneEvery runs Prune every interval until ctx ends, with now's time
// handed to stale.
func (c *Cache[K, V]) PruneEvery(ctx context.Context, every time.Duration, now func() time.Time, stale func(now time.Time, v V) bool) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			at := now()
			c.Prune(func(v V) bool { return stale(at, v) })
		}
	}
}
