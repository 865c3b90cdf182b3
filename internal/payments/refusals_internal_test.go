package payments

import "testing"

// A refused payment's Retry-After is 1 s while few are refused, and spreads
// at random up to maxRetryAfter as more are: the clients of a freeze do
// not all come back in the same second.
func TestRetryAfterSpreadsWithRefusals(t *testing.T) {
	r := &refusals{}
	if got := r.retryAfter(); got != 1 {
		t.Fatalf("the first refusal: Retry-After %d, want 1", got)
	}
	seen := map[int]bool{}
	for range 2000 { // well within a second: the spread reaches its bound
		got := r.retryAfter()
		if got < 1 || got > maxRetryAfter {
			t.Fatalf("Retry-After %d, want 1 to %d", got, maxRetryAfter)
		}
		seen[got] = true
	}
	if len(seen) < maxRetryAfter/2 {
		t.Fatalf("2000 refusals got only the Retry-Afters %v: not spread", seen)
	}
	if got := (*refusals)(nil).retryAfter(); got != 1 {
		t.Fatalf("no counter: Retry-After %d, want 1", got)
	}
}
