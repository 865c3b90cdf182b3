package problem

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MaxRetryAfter is the longest wait the BFF passes on from the upstream's
// Retry-After: an upstream that says 36000 s or a date in 9999
// would tell a client never to come back; after an hour the client asks
// again and gets the upstream's wait as it is then.
const MaxRetryAfter = time.Hour

// RetryAfter reads a reply's Retry-After (RFC 9110 10.2.3): delay-seconds,
// or an HTTP-date measured from the reply's own Date when it has one (the
// upstream's clock, so no skew between the two hosts), else from now. A
// date gone by is no wait; seconds too many for a Duration are the longest
// Duration. ok is false when there is none or it is malformed. It is the
// one reading of the header: the proxy waits by it, RelayRetryAfter passes
// it on.
func RetryAfter(h http.Header, now time.Time) (d time.Duration, ok bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if strings.Trim(v, "0123456789") == "" {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs > int64(math.MaxInt64/time.Second) {
			return math.MaxInt64, true
		}
		return time.Duration(secs) * time.Second, true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	if date, err := http.ParseTime(h.Get("Date")); err == nil {
		now = date
	}
	return max(at.Sub(now), 0), true
}

// RelayRetryAfter is the Retry-After to send a client for an upstream
// reply with header h, or "" when it has none or a malformed one: always
// delay-seconds (an HTTP-date becomes the seconds to it, counted on the
// upstream's clock as RetryAfter does, so the client's clock does not
// matter; one gone by is "0"), rounded up and at most MaxRetryAfter.
func RelayRetryAfter(h http.Header, now time.Time) string {
	d, ok := RetryAfter(h, now)
	if !ok {
		return ""
	}
	d = min(d, MaxRetryAfter)
	return strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)
}
