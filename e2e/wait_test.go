//go:build integration

package e2e

import (
	"testing"
	"time"

	testpoll "github.com/fintech-bff/bff/internal/testing/poll"
)

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
// once check does, or check's last error once within has passed. It is
// internal/testing/poll's Within (imported as testpoll: this package's
// poll is this function), keeping check's last error.
func poll(within time.Duration, check func() error) error {
	var err error
	if testpoll.Within(within, func() bool { err = check(); return err == nil }) {
		return nil
	}
	return err
}
