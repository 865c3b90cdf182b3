// Package leaktest fails a package's tests when a goroutine they started
// outlives them: every loop has a Run(ctx) and a caller who stops it, and
// a test that forgets to (or a loop that ignores its ctx) is found here.
package leaktest

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fintech-bff/bff/internal/testing/poll"
)

// settle is how long the goroutines of the last test may take to end once
// the test stopped them: the slowest loop ends at its next timeout (a Redis
// subscription's read, 500 ms), and two cores are shared with other tests.
const settle = 10 * time.Second

// Main runs the package's tests (call it from TestMain) and exits. After a
// successful run it looks for goroutines still running, again and again
// for at most settle, and fails the run naming those that stayed, with
// their stacks.
func Main(m *testing.M, opts ...goleak.Option) {
	code := m.Run()
	if code == 0 {
		if err := find(opts); err != nil {
			fmt.Fprintf(os.Stderr, "leaktest: goroutines still running %v after the tests: %v\n", settle, err)
			code = 1
		}
	}
	os.Exit(code)
}

// find polls goleak.Find (itself a short poll) until no goroutine is left
// or settle has passed.
func find(opts []goleak.Option) error {
	var err error
	poll.Within(settle, func() bool {
		err = goleak.Find(opts...)
		return err == nil
	})
	return err
}
