package upstreamsim

import (
	"sync/atomic"
	"time"
)

// simClock is the injected clock plus an offset that Advance moves forward.
// It is safe for concurrent use.
type simClock struct {
	base   func() time.Time
	offset atomic.Int64 // nanoseconds
}

func (c *simClock) now() time.Time {
	return c.base().Add(time.Duration(c.offset.Load()))
}

func (c *simClock) advance(d time.Duration) time.Time {
	c.offset.Add(int64(d))
	return c.now()
}

func (c *simClock) reset() { c.offset.Store(0) }
