package payments

import (
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
)

// The wait follows the lifecycle: the interval after every change, doubling
// while the status stays (or the poll fails), never above the maximum.
func TestFollowWaits(t *testing.T) {
	f := Follow{Interval: 2 * time.Second, MaxInterval: 30 * time.Second}
	for _, tt := range []struct {
		name   string
		was    string
		wait   time.Duration
		now    string
		failed bool
		want   time.Duration
	}{
		{"first poll learns INIT", "", 0, "INIT", false, 2 * time.Second},
		{"unchanged doubles", "INIT", 2 * time.Second, "INIT", false, 4 * time.Second},
		{"unchanged keeps doubling", "INIT", 8 * time.Second, "INIT", false, 16 * time.Second},
		{"capped", "INIT", 16 * time.Second, "INIT", false, 30 * time.Second},
		{"stays capped", "INIT", 30 * time.Second, "INIT", false, 30 * time.Second},
		{"a change resets", "INIT", 30 * time.Second, "ACTC", false, 2 * time.Second},
		{"a failure doubles", "ACTC", 4 * time.Second, "", true, 8 * time.Second},
		{"a first failure waits the interval", "", 0, "", true, 2 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := f.next(ledger.Watch{Status: tt.was, Wait: tt.wait}, tt.now, tt.failed)
			if got != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
		})
	}
	if got := (Follow{Interval: 2 * time.Second}).tick(); got != 500*time.Millisecond {
		t.Fatalf("tick: got %s, want 500ms", got)
	}
	if got := (Follow{Interval: 100 * time.Millisecond}).tick(); got != 100*time.Millisecond {
		t.Fatalf("tick: got %s, want its 100ms floor", got)
	}
}
