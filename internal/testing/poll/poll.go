// Package poll is the tests' one bounded wait for a condition that another
// goroutine or process makes true: it looks every few milliseconds and
// fails the test, naming what it waited for, when the bound passes. It
// never asserts a duration: the bound is only how long to keep looking.
package poll

import (
	"testing"
	"time"
)

// every is how often a condition is looked at: often enough that a test
// does not wait long after it turns true, rarely enough not to load the
// machine the test shares with others.
const every = 5 * time.Millisecond

// Until looks at cond until it reports true, and fails t (naming what)
// when it is still false after within.
func Until(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Within(within, cond) {
		t.Fatalf("%s: not within %s", what, within)
	}
}

// Within looks at cond until it reports true or within has passed, and
// reports whether it did.
func Within(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(every)
	}
}
