// Package testclock is a settable clock for tests. The code under test may
// read it from its own goroutines (prune loops, refresh-ahead) while the
// test advances it, so it is safe for concurrent use.
package testclock

import (
	"sync"
	"time"
)

// Clock is a test clock.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a clock that reads t until advanced.
func New(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
