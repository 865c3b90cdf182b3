package proxy

import (
	"net/http"
	"testing"
	"time"
)

// FuzzRetryAfter: whatever an upstream sends as Retry-After and Date, the
// wait is never negative, and a value that is not one is ignored.
func FuzzRetryAfter(f *testing.F) {
	for _, s := range [][2]string{
		{"120", ""}, {" 7 ", ""}, {"0", ""}, {"-1", ""}, {"1.5", ""}, {"99999999999999999999", ""},
		{"Tue, 10 Mar 2026 12:00:03 GMT", "Tue, 10 Mar 2026 12:00:00 GMT"},
		{"Tuesday, 10-Mar-26 12:00:03 GMT", "garbage"}, {"Tue Mar 10 12:00:03 2026", ""}, {"", ""},
	} {
		f.Add(s[0], s[1])
	}
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v, date string) {
		h := http.Header{"Retry-After": {v}, "Date": {date}}
		d, ok := retryAfter(h, now)
		if d < 0 {
			t.Fatalf("Retry-After %q, Date %q: got wait %v", v, date, d)
		}
		if !ok && d != 0 {
			t.Fatalf("Retry-After %q: ignored, yet a wait of %v", v, d)
		}
		if _, err := http.ParseTime(v); v == "" && ok || err == nil && !ok {
			t.Fatalf("Retry-After %q: got ok=%v", v, ok)
		}
	})
}
