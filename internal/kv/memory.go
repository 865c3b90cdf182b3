package kv

import (
	"bytes"
	"context"
	"sync"
	"time"
)

// Memory is an in-process store for a single development instance: nothing
// is shared with other instances and nothing survives a restart. It is safe
// for concurrent use.
type Memory struct {
	now Clock

	mu      sync.Mutex
	entries map[string]memEntry
	sets    map[string]memSet
	groups  map[string]*memGroup
	writes  int

	subMu  sync.Mutex
	subs   map[string]map[int]func(string)
	nextID int
}

type memSet struct {
	members map[string]struct{}
	expires time.Time
}

type memEntry struct {
	value   []byte
	expires time.Time
}

// NewMemory returns an empty store on the given clock (time.Now when nil).
func NewMemory(now Clock) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{now: now, entries: make(map[string]memEntry)}
}

// Get returns a copy of the value at key, or ErrNotFound.
func (m *Memory) Get(_ context.Context, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[key]
	if !ok || !m.now().Before(e.expires) {
		delete(m.entries, key)
		return nil, ErrNotFound
	}
	return append([]byte(nil), e.value...), nil
}

// Set stores a copy of value at key for ttl.
func (m *Memory) Set(_ context.Context, key string, value []byte, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.entries[key] = memEntry{value: append([]byte(nil), value...), expires: now.Add(ttl)}
	m.sweep(now)
	return nil
}

// sweep deletes the expired keys once every 1024 writes (Set, SetNX): an
// amortised sweep keeps keys written once and never read again (a DPoP
// proof's jti) from piling up. m.mu must be held.
func (m *Memory) sweep(now time.Time) {
	m.writes++
	if m.writes%1024 != 0 {
		return
	}
	for k, e := range m.entries {
		if !now.Before(e.expires) {
			delete(m.entries, k)
		}
	}
}

// SetIfExists replaces the value at key and sets its ttl only when key is
// live, and reports whether it did; like Redis.SetIfExists it never
// recreates a deleted or expired key.
func (m *Memory) SetIfExists(_ context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	e, ok := m.entries[key]
	if !ok || !now.Before(e.expires) {
		delete(m.entries, key)
		return false, nil
	}
	m.entries[key] = memEntry{value: append([]byte(nil), value...), expires: now.Add(ttl)}
	m.sweep(now)
	return true, nil
}

// Del removes key.
func (m *Memory) Del(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.entries, key)
	return nil
}

// Ping always succeeds.
func (m *Memory) Ping(context.Context) error { return nil }

// SetNX stores value at key for ttl only when key is absent or expired;
// like Redis.SetNX it reports true when the key already holds value.
func (m *Memory) SetNX(_ context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if e, ok := m.entries[key]; ok && now.Before(e.expires) {
		return bytes.Equal(e.value, value), nil
	}
	m.entries[key] = memEntry{value: append([]byte(nil), value...), expires: now.Add(ttl)}
	return true, nil
}

// DelIf deletes key only when its live value starts with prefix.
func (m *Memory) DelIf(_ context.Context, key string, prefix []byte) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[key]
	if !ok || !m.now().Before(e.expires) || !bytes.HasPrefix(e.value, prefix) {
		return false, nil
	}
	delete(m.entries, key)
	return true, nil
}

// Publish delivers msg to every subscriber of channel in this process.
func (m *Memory) Publish(_ context.Context, channel, msg string) error {
	m.subMu.Lock()
	subs := make([]func(string), 0, len(m.subs[channel]))
	for _, f := range m.subs[channel] {
		subs = append(subs, f)
	}
	m.subMu.Unlock()
	for _, f := range subs {
		f(msg)
	}
	return nil
}

// Subscribe delivers every message published on channel in this process to
// onMessage until ctx ends; it is live at once and never loses messages.
func (m *Memory) Subscribe(ctx context.Context, channel string, onMessage func(string), onReady func(bool)) {
	m.subMu.Lock()
	if m.subs == nil {
		m.subs = make(map[string]map[int]func(string))
	}
	if m.subs[channel] == nil {
		m.subs[channel] = make(map[int]func(string))
	}
	m.nextID++
	id := m.nextID
	m.subs[channel][id] = onMessage
	m.subMu.Unlock()
	onReady(true)
	<-ctx.Done()
	m.subMu.Lock()
	delete(m.subs[channel], id)
	m.subMu.Unlock()
}

// GetDel returns the value at key and deletes it, or ErrNotFound.
func (m *Memory) GetDel(ctx context.Context, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[key]
	delete(m.entries, key)
	if !ok || !m.now().Before(e.expires) {
		return nil, ErrNotFound
	}
	return e.value, nil
}

// SAdd adds member to the set at key and makes the set live at least ttl.
func (m *Memory) SAdd(_ context.Context, key, member string, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	s, ok := m.sets[key]
	if !ok || !now.Before(s.expires) {
		s = memSet{members: map[string]struct{}{}}
	}
	s.members[member] = struct{}{}
	if exp := now.Add(ttl); exp.After(s.expires) {
		s.expires = exp
	}
	if m.sets == nil {
		m.sets = map[string]memSet{}
	}
	m.sets[key] = s
	return nil
}

// SRem removes member from the set at key.
func (m *Memory) SRem(_ context.Context, key, member string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.sets[key]; ok {
		delete(s.members, member)
		if len(s.members) == 0 {
			delete(m.sets, key)
		}
	}
	return nil
}

// SMembers returns the members of the set at key.
func (m *Memory) SMembers(_ context.Context, key string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sets[key]
	if !ok || !m.now().Before(s.expires) {
		delete(m.sets, key)
		return nil, nil
	}
	out := make([]string, 0, len(s.members))
	for k := range s.members {
		out = append(out, k)
	}
	return out, nil
}
