package nearcache

import (
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/testing/testclock"
)

// expiring is a copy that ends by itself at until.
type expiring struct{ until int64 }

// ruleLayer is a layer of expiring copies on a test clock, in a group when
// members is set, made live (as Run's subscription would) without running.
func ruleLayer(clk *testclock.Clock, members kv.Members) *Layer[expiring] {
	store := kv.NewMemory(clk.Now)
	l := New(store, Options[expiring]{
		MaxBytes: 1 << 20,
		Append:   func(b []byte, v expiring) []byte { return AppendInt(b, v.until) },
		Read:     func(_ string, b []byte) expiring { r := Reader(b); return expiring{r.Int()} },
		Expires:  func(v expiring) time.Time { return time.Unix(0, v.until) },
		MaxAge:   time.Second, Now: clk.Now, Channel: "events",
		Group: "g", Members: members,
	})
	l.live.Store(true)
	return l
}

// The rule, one condition at a time, on the layer's clock: each refusal
// is one of the ways a copy of an ended session is kept from being served
// (mayServe's doc).
func TestServeRule(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	leased := func(l *Layer[expiring], clk *testclock.Clock) {
		l.trustUntil.Store(instant(clk.Now()) + int64(time.Hour))
	}
	for _, tc := range []struct {
		name    string
		tracked bool // confirmed when the copy is kept
		setUp   func(l *Layer[expiring], clk *testclock.Clock)
		serve   bool
	}{
		{"live, trusted, read just now", false, func(*Layer[expiring], *testclock.Clock) {}, true},
		{"the subscription is down", false, func(l *Layer[expiring], _ *testclock.Clock) { l.live.Store(false) }, false},
		{"the lease ran out", false, func(_ *Layer[expiring], clk *testclock.Clock) { clk.Advance(trustFor) }, false},
		{"never a lease", false, func(l *Layer[expiring], _ *testclock.Clock) { l.trustUntil.Store(untrusted) }, false},
		{"untracked, read MaxAge ago", false, func(l *Layer[expiring], clk *testclock.Clock) {
			leased(l, clk)
			clk.Advance(time.Second)
		}, false},
		{"tracked, read MaxAge ago", true, func(l *Layer[expiring], clk *testclock.Clock) {
			leased(l, clk)
			clk.Advance(time.Second)
			l.tracking.confirmed(instant(clk.Now()))
		}, true},
		{"tracked, read MaxAge ago, not confirmed within kv.LeaseFor", true, func(l *Layer[expiring], clk *testclock.Clock) {
			leased(l, clk)
			clk.Advance(time.Second) // kv.LeaseFor is shorter
			l.tracking.confirmed(instant(clk.Now().Add(-kv.LeaseFor)))
		}, false},
		{"tracked, expired", true, func(l *Layer[expiring], clk *testclock.Clock) {
			leased(l, clk)
			clk.Advance(2 * time.Second) // the copy's end
			l.tracking.confirmed(instant(clk.Now()))
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := testclock.New(t0)
			l := ruleLayer(clk, kv.NewMemory(clk.Now))
			l.trustUntil.Store(instant(clk.Now()) + int64(trustFor)) // as a renewal now would
			if tc.tracked {
				l.tracking.confirmed(instant(clk.Now()))
			}
			l.Keep("k", expiring{until: t0.Add(2 * time.Second).UnixNano()}, l.BeginRead("k"))
			tc.setUp(l, clk)
			if _, got := l.Serve("k"); got != tc.serve {
				t.Fatalf("served %v, want %v", got, tc.serve)
			}
		})
	}
	t.Run("outside a group there is no lease", func(t *testing.T) {
		clk := testclock.New(t0)
		l := ruleLayer(clk, nil)
		l.Keep("k", expiring{until: t0.Add(time.Hour).UnixNano()}, l.BeginRead("k"))
		if _, ok := l.Serve("k"); !ok {
			t.Fatal("a layer in no group refused a fresh copy: got no copy, want it")
		}
	})
}

// A copy read just before a Forget is not served on the lease or the
// subscription that holds after it: here the renewal that forgot every
// copy (a missed announcement) and trusted anew, or an announcement's
// Forget, runs between the copy's read and the rule, where the layer reads
// its clock.
func TestServeRefusesACopyReadAcrossAForget(t *testing.T) {
	for _, tc := range []struct {
		name   string
		forget func(l *Layer[expiring], clk *testclock.Clock)
	}{
		{"a renewal forgot every copy and trusted anew", func(l *Layer[expiring], clk *testclock.Clock) {
			l.distrust()
			l.trustUntil.Store(instant(clk.Now()) + int64(trustFor))
		}},
		{"an announcement forgot the copy", func(l *Layer[expiring], _ *testclock.Clock) { l.Forget("k") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := testclock.New(time.Unix(1_700_000_000, 0))
			reads := 0
			var between func()
			now := func() time.Time {
				reads++
				if between != nil && reads == 2 { // Serve's second reading: after the copy's read
					f := between
					between = nil
					f()
				}
				return clk.Now()
			}
			l := New(kv.NewMemory(clk.Now), Options[expiring]{
				MaxBytes: 1 << 20,
				Append:   func(b []byte, v expiring) []byte { return AppendInt(b, v.until) },
				Read:     func(_ string, b []byte) expiring { r := Reader(b); return expiring{r.Int()} },
				Expires:  func(v expiring) time.Time { return time.Unix(0, v.until) },
				MaxAge:   time.Second, Now: now, Channel: "events",
				Group: "g", Members: kv.NewMemory(clk.Now),
			})
			l.live.Store(true)
			l.trustUntil.Store(instant(clk.Now()) + int64(trustFor))
			l.Keep("k", expiring{until: clk.Now().Add(time.Hour).UnixNano()}, l.BeginRead("k"))
			if _, ok := l.Serve("k"); !ok {
				t.Fatal("the copy is not served before the forget")
			}
			reads, between = 0, func() { tc.forget(l, clk) }
			if _, ok := l.Serve("k"); ok {
				t.Fatal("a copy read before the forget was served after it")
			}
			if between != nil {
				t.Fatal("the forget did not run between the copy's read and the rule")
			}
		})
	}
}
