package tokens_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/testing/poll"
	"github.com/fintech-bff/bff/internal/tokens"
)

// fakeSource mints numbered tokens and counts mints per user. It stands in
// for the upstream in unit tests; the end-to-end tests use the simulator.
type fakeSource struct {
	now   func() time.Time
	life  time.Duration
	delay time.Duration
	err   error
	mu    sync.Mutex
	mints map[string]int
	total atomic.Int64
}

func (f *fakeSource) Token(_ context.Context, userID string) (tokens.Token, error) {
	time.Sleep(f.delay) // a fake latency: the mint's round trip
	f.total.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mints == nil {
		f.mints = map[string]int{}
	}
	f.mints[userID]++
	if f.err != nil {
		return tokens.Token{}, f.err
	}
	return tokens.Token{Value: fmt.Sprintf("tok-%s-%d-plaintext", userID, f.mints[userID]), Expiry: f.now().Add(f.life)}, nil
}

func (f *fakeSource) count(user string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mints[user]
}

// encKey is the caches' token encryption key in these tests.
var encKey = []byte("0123456789abcdef0123456789abcdef")

// waitFor fails t unless cond holds within 5 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	poll.Until(t, 5*time.Second, "condition", cond)
}
