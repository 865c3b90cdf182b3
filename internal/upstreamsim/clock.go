package upstreamsim

import (
	"sync/atomic"
	"time"
)

// simClock is the injected clock plus an offset that Advance moves forward.
// With a start time set (Options.Start, or the fixtures control call) the
// clock is frozen there and only the offset moves it, so replies are the
// same on every run. It reads in UTC and whole seconds: every timestamp the
// simulator sends is RFC 3339 without fractions, as the real service's are.
// It is safe for concurrent use.
type simClock struct {
	base   func() time.Time
	start  atomic.Pointer[time.Time] // nil: follow base
	offset atomic.Int64              // nanoseconds
	// forward is the sum of the forward steps alone (steady).
	forward atomic.Int64
}

func (c *simClock) now() time.Time { return c.exact().Truncate(time.Second) }

// exact is the simulator's time, in UTC, without now's rounding down to
// whole seconds: what a setting finer than a second (the list lag) is
// measured on. Timestamps in replies come from now.
func (c *simClock) exact() time.Time {
	return c.origin().Add(time.Duration(c.offset.Load())).UTC()
}

// origin is where the clock starts from: its frozen start, or the base.
func (c *simClock) origin() time.Time {
	if p := c.start.Load(); p != nil {
		return *p
	}
	return c.base()
}

// steady is the time the list lag runs on: the simulator's time with only
// its forward steps, never a step back. An upstream's list lags its
// creations in real time: a clock stepped back must not hide a payment for
// as long as the step.
func (c *simClock) steady() time.Time {
	return c.origin().Add(time.Duration(c.forward.Load())).UTC()
}

func (c *simClock) advance(d time.Duration) time.Time {
	if d > 0 {
		c.forward.Add(int64(d))
	}
	c.offset.Add(int64(d))
	return c.now()
}

// freeze stops the clock at t (the offset goes back to zero).
func (c *simClock) freeze(t time.Time) {
	c.start.Store(&t)
	c.offset.Store(0)
	c.forward.Store(0)
}

func (c *simClock) reset() {
	c.offset.Store(0)
	c.forward.Store(0)
}
