package nearcache

import (
	"sync/atomic"
	"time"

	"github.com/fintech-bff/bff/internal/kv"
)

// A layer reads one clock, Options.Now, for everything it measures: a
// copy's age, its lease in a group (members.go) and how recent the
// store's last confirmation of its reports is (below). time.Now's readings
// carry the monotonic clock, so in production none of them is stretched or
// shrunk by a step of the wall clock; a test moves them all by moving its
// clock, and never sleeps for them.
//
// Two waits are on real time, because what they wait for is: the renewal
// loop's period (renewEvery), and a revocation waiting for a member that
// does not answer (the store reports that member's lease left on the
// store's own clock). The unit tests run those in a testing/synctest
// bubble, whose clock jumps ahead whenever every goroutine in it waits.

// epoch is the origin of instants.
var epoch = time.Now()

// instant is t as nanoseconds since this process started: on the
// monotonic clock when t has a reading of it (time.Now's do), else (a
// test's clock) on the wall clock, as comparing such times does.
func instant(t time.Time) int64 { return int64(t.Sub(epoch)) }

// timeOf is the time instant(t) came from (with a monotonic reading).
func timeOf(ns int64) time.Time { return epoch.Add(time.Duration(ns)) }

// confirmations turns the store's confirmations of its reports
// (kv.Tracker's onConfirmed) into a time bound on the layer's clock: a
// copy may be served until it is reported changed only while the last
// confirmation is within kv.LeaseFor, that is while every change made
// more than that ago is known to have been reported. Safe for concurrent
// use; the zero value has none.
type confirmations struct {
	// last is the instant of the last confirmed write, as ordered(); 0:
	// none. (An instant may be negative: a test's clock set before the
	// process started.)
	last atomic.Uint64
}

// ordered maps an instant to a uint64 of the same order, in which 0 is
// the earliest instant there is (never a confirmation's).
func ordered(at int64) uint64 { return uint64(at) ^ 1<<63 }

// confirmed records a confirmation of every change made up to instant at.
func (c *confirmations) confirmed(at int64) {
	n := ordered(at)
	for {
		old := c.last.Load()
		if n <= old || c.last.CompareAndSwap(old, n) {
			return
		}
	}
}

// fresh reports whether the last confirmation is within kv.LeaseFor of
// now.
func (c *confirmations) fresh(now int64) bool {
	last := c.last.Load()
	return last != 0 && now-int64(last^1<<63) < int64(kv.LeaseFor)
}

// reset forgets every confirmation (the tracking went down or up).
func (c *confirmations) reset() { c.last.Store(0) }
