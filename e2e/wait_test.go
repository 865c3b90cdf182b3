//go:build integration

package e2e

import (
	"testing"
	"time"
)

// pollEvery is how often a wait looks at its condition again: often enough
// that a wait ends soon after the condition holds, seldom enough that the
// looking costs the instances under test nothing that matters.
const pollEvery = 20 * time.Millisecond

// eventually waits until check returns nil and fails t with check's last
// error once within has passed. The bound only keeps a broken build from
// hanging the run: a test never asserts how long a wait took, so within is
// generous (seconds), and the wait costs only as long as the condition
// takes. check runs on the test's goroutine and may call t.Fatal itself
// for a state that can never turn good.
func eventually(t testing.TB, within time.Duration, check func() error) {
	t.Helper()
	if err := poll(within, check); err != nil {
		t.Fatalf("not within %s: %v", within, err)
	}
}

// poll is eventually for a caller that goes on either way: it returns nil
// once check does, or check's last error once within has passed.
func poll(within time.Duration, check func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(pollEvery) // the poll's interval
	}
}
