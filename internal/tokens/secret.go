package tokens

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
)

// Secret is the upstream client secret and its one owner: it holds the
// value in use, re-reads it on demand, and tells the caches built on it
// when it changes. The Minter sends Current with every mint; every Cache
// made with NewCache subscribes to it for its lifetime, and itself calls
// Reload when the token endpoint refuses the credentials or another
// instance announces a rotation.
//
// A change is pushed to the caches while the re-read lock is held, rather
// than each cache comparing Current on every lookup: switching a cache's
// generation also clears its local layer, and pushed in order, a slow
// re-read can never leave a cache on an older generation than the Secret.
//
// Safe for concurrent use. The zero value is not usable: use NewSecret.
type Secret struct {
	load func() (string, error)
	log  *slog.Logger

	mu     sync.Mutex // serialises re-reads and the switch of every subscribed cache
	cur    atomic.Pointer[string]
	caches []*Cache // guarded by mu
}

// NewSecret reads the secret with load and returns its owner. load is
// called again on every Reload (for instance it reads client_secret_file);
// its errors must not hold the secret. log receives the re-read failures
// and the failed announcements; nil discards them.
func NewSecret(load func() (string, error), log *slog.Logger) (*Secret, error) {
	v, err := load()
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Secret{load: load, log: log}
	s.cur.Store(&v)
	return s, nil
}

// Current returns the secret in use.
func (s *Secret) Current() string { return *s.cur.Load() }

// String, GoString and LogValue print "REDACTED", so a Secret passed to a
// log line or a format verb never shows the value; only Current does.
func (s *Secret) String() string { return "REDACTED" }

// GoString implements fmt.GoStringer (%#v).
func (s *Secret) GoString() string { return "REDACTED" }

// LogValue implements slog.LogValuer.
func (s *Secret) LogValue() slog.Value { return slog.StringValue("REDACTED") }

// Reload re-reads the secret and reports whether it changed; when it did,
// every subscribed cache has switched to the new generation by the time
// Reload returns. On a read error the current secret stays (the error is
// logged and returned). It does not tell the other instances: see Rotate.
func (s *Secret) Reload() (changed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, err := s.load()
	if err != nil {
		s.log.Error("the client secret could not be re-read; keeping the current one", slog.String("error", err.Error()))
		return false, err
	}
	if v == s.Current() {
		return false, nil
	}
	// The value first, then the generations: a mint captures its cache's
	// generation before the Minter reads Current, so in between a token
	// minted under the new secret may land under the old generation (and
	// is forgotten with it), never one minted under the old secret under the
	// new generation.
	s.cur.Store(&v)
	for _, c := range s.caches {
		c.setSecret(v)
	}
	return true, nil
}

// Rotate is Reload followed, when the secret changed, by an announcement
// to every other instance, which then re-reads its own secret. err is the
// re-read's only: an announcement that cannot be sent is logged, and the
// other instances pick the new secret up when the token endpoint refuses
// their old one.
func (s *Secret) Rotate(ctx context.Context) (changed bool, err error) {
	changed, err = s.Reload()
	if !changed {
		return false, err
	}
	s.mu.Lock()
	caches := slices.Clone(s.caches)
	s.mu.Unlock()
	for _, c := range caches {
		if err := c.announceRotation(ctx); err != nil {
			s.log.Warn("could not tell the other instances about the rotation", slog.String("error", err.Error()))
		}
	}
	return true, nil
}

// subscribe switches c to the current generation and keeps it switched
// on every change.
func (s *Secret) subscribe(c *Cache) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.setSecret(s.Current())
	s.caches = append(s.caches, c)
}
