package redistest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/testing/poll"
)

// reportWait bounds a wait for a tracking report: Redis sends one within
// milliseconds, and a tracker that lost its connection notices within
// about a second.
const reportWait = 5 * time.Second

// Tracked is a Redis store whose key tracking a test can wait for: a
// test that must show a copy was (or was not) dropped by a report waits
// for that report, instead of sleeping for as long as one usually takes.
// Every Track call on it (one per layer that runs on it) is counted, and
// a wait ends once each of them has reported the key. Safe for
// concurrent use.
type Tracked struct {
	*kv.Redis
	rc     *redis.Client
	prefix string

	trackers atomic.Int64
	markers  atomic.Int64
	mu       sync.Mutex
	reports  map[string]int64 // key (the store's, as Track reports it) -> reports so far
}

// NewTracked is the store on rc under prefix (a prefix from Client).
func NewTracked(rc *redis.Client, prefix string) *Tracked {
	return &Tracked{Redis: kv.NewRedis(rc, prefix), rc: rc, prefix: prefix, reports: map[string]int64{}}
}

var _ kv.Tracker = (*Tracked)(nil)

// Track is kv.Redis's, counting the keys it reports after the caller has
// been told of each.
func (s *Tracked) Track(ctx context.Context, prefixes []string, onKey func(string), onReady func(bool), onConfirmed func(time.Time)) error {
	s.trackers.Add(1)
	defer s.trackers.Add(-1)
	return s.Redis.Track(ctx, prefixes, func(key string) {
		onKey(key)
		s.mu.Lock()
		s.reports[key]++
		s.mu.Unlock()
	}, onReady, onConfirmed)
}

func (s *Tracked) reported(key string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reports[key]
}

// Reported runs write, which changes key (a store key under a tracked
// prefix, as Track reports it), and returns once every running Track has
// reported the change, or an error after 5 s.
func (s *Tracked) Reported(ctx context.Context, key string, write func(context.Context) error) error {
	want := s.reported(key) + s.trackers.Load()
	if err := write(ctx); err != nil {
		return err
	}
	if !poll.Within(reportWait, func() bool { return s.reported(key) >= want }) {
		return fmt.Errorf("redistest: %s was reported %d times within %v, want %d", key, s.reported(key), reportWait, want)
	}
	return nil
}

// Sync writes a marker key under trackedPrefix (one of the prefixes Track
// was given) and returns once every running Track has reported it: Redis
// sends a client its invalidations in the order of the writes, so every
// change made before Sync has been reported too.
func (s *Tracked) Sync(ctx context.Context, trackedPrefix string) error {
	key := fmt.Sprintf("%sredistest-sync-%d", trackedPrefix, s.markers.Add(1))
	return s.Reported(ctx, key, func(ctx context.Context) error {
		return s.rc.Set(ctx, s.prefix+key, "1", time.Minute).Err()
	})
}
