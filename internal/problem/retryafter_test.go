package problem

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// The upstream's Retry-After reaches a client as seconds of at most an hour
// (docs/errors.md, "Headers"): a date becomes the seconds to it on the upstream's
// clock, one gone by "0", anything longer than MaxRetryAfter 3600.
func TestRelayRetryAfter(t *testing.T) {
	date := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	now := date.Add(10 * time.Minute) // the BFF's clock, ahead of the upstream's
	cases := []struct {
		name, retryAfter, date, want string
	}{
		{"none", "", "", ""},
		{"malformed", "soon", "", ""},
		{"a header injection", "soon\r\nX-Evil: 1", "", ""},
		{"negative", "-1", "", ""},
		{"a fraction", "1.5", "", ""},
		{"seconds", "120", "", "120"},
		{"seconds with spaces and zeros", " 007 ", "", "7"},
		{"zero", "0", "", "0"},
		{"one hour exactly", "3600", "", "3600"},
		{"over an hour", "3601", "", "3600"},
		{"ten hours", "36000", "", "3600"},
		{"more seconds than a Duration holds", "99999999999999999999", "", "3600"},
		{"a date, from the reply's Date", date.Add(90 * time.Second).Format(http.TimeFormat), date.Format(http.TimeFormat), "90"},
		{"a date, without Date: from now", now.Add(90 * time.Second).Format(http.TimeFormat), "", "90"},
		{"a date with a malformed Date: from now", now.Add(90 * time.Second).Format(http.TimeFormat), "yesterday", "90"},
		{"a date an hour and more away", date.Add(61 * time.Minute).Format(http.TimeFormat), date.Format(http.TimeFormat), "3600"},
		{"a date in 9999", "Fri, 31 Dec 9999 23:59:59 GMT", date.Format(http.TimeFormat), "3600"},
		{"a date gone by", date.Add(-time.Minute).Format(http.TimeFormat), date.Format(http.TimeFormat), "0"},
		{"a date long gone by", "Wed, 21 Oct 2015 07:28:00 GMT", "", "0"},
		{"an RFC 850 date", date.Add(30 * time.Second).Format("Monday, 02-Jan-06 15:04:05 GMT"), date.Format(http.TimeFormat), "30"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.retryAfter != "" {
				h.Set("Retry-After", tc.retryAfter)
			}
			if tc.date != "" {
				h.Set("Date", tc.date)
			}
			if got := RelayRetryAfter(h, now); got != tc.want {
				t.Errorf("Retry-After %q, Date %q: got %q, want %q", tc.retryAfter, tc.date, got, tc.want)
			}
		})
	}
}

// FuzzRetryAfter: whatever an upstream sends as Retry-After and Date, the
// wait is never negative, a value that is not one is ignored, and what a
// client gets is seconds between 0 and MaxRetryAfter.
func FuzzRetryAfter(f *testing.F) {
	for _, s := range [][2]string{
		{"120", ""}, {" 7 ", ""}, {"0", ""}, {"-1", ""}, {"1.5", ""}, {"99999999999999999999", ""},
		{"Tue, 10 Mar 2026 12:00:03 GMT", "Tue, 10 Mar 2026 12:00:00 GMT"},
		{"Tuesday, 10-Mar-26 12:00:03 GMT", "garbage"}, {"Tue Mar 10 12:00:03 2026", ""}, {"", ""},
		{"Fri, 31 Dec 9999 23:59:59 GMT", ""},
	} {
		f.Add(s[0], s[1])
	}
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v, date string) {
		h := http.Header{"Retry-After": {v}, "Date": {date}}
		d, ok := RetryAfter(h, now)
		if d < 0 {
			t.Fatalf("Retry-After %q, Date %q: got wait %v", v, date, d)
		}
		if !ok && d != 0 {
			t.Fatalf("Retry-After %q: ignored, yet a wait of %v", v, d)
		}
		if _, err := http.ParseTime(v); v == "" && ok || err == nil && !ok {
			t.Fatalf("Retry-After %q: got ok=%v", v, ok)
		}
		relayed := RelayRetryAfter(h, now)
		if secs, err := strconv.Atoi(relayed); relayed == "" && ok || relayed != "" && (err != nil || secs < 0 || secs > int(MaxRetryAfter/time.Second) || strconv.Itoa(secs) != relayed) {
			t.Fatalf("Retry-After %q, Date %q: relayed %q", v, date, relayed)
		}
	})
}
