package main

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// roundResult is one paced round of scenario (e)'s users after the idle
// pause: every user asked once, spread over the round, and the Redis
// commands the round cost, by command.
type roundResult struct {
	requests int
	took     time.Duration
	calls    int64
	byName   map[string]int64
}

func (r roundResult) perRequest() float64 {
	if r.requests == 0 {
		return 0
	}
	return float64(r.calls) / float64(r.requests)
}

// top is the round's commands, most called first, as "GET 812, ...".
func (r roundResult) top(n int) string {
	names := slices.SortedFunc(maps.Keys(r.byName), func(a, b string) int {
		return int(r.byName[b] - r.byName[a])
	})
	var parts []string
	for _, name := range names[:min(n, len(names))] {
		parts = append(parts, fmt.Sprintf("%s %d", strings.ToUpper(name), r.byName[name]))
	}
	return strings.Join(parts, ", ")
}

// pacedRounds asks each of e.many once per round, the requests spread
// evenly over every (so each user is seen once per every, as with a
// user base that comes back at that interval), for n rounds, and counts
// the Redis commands of each round. If the machine cannot keep the pace,
// the round takes longer and says so.
func (e *env) pacedRounds(n int, every time.Duration) ([]roundResult, error) {
	url := e.bff.base + "/api/v2/payments"
	users := len(e.many)
	gap := every / time.Duration(users)
	var out []roundResult
	for round := range n {
		_, beforeBy, err := e.redis.commandCalls()
		if err != nil {
			return nil, err
		}
		start := time.Now()
		var failed atomic.Int64
		err = parallel(users, 128, func(i int) error {
			if wait := time.Until(start.Add(time.Duration(i) * gap)); wait > 0 {
				time.Sleep(wait)
			}
			code, err := call(http.MethodGet, url, e.many[i])
			if err == nil && code != http.StatusOK {
				failed.Add(1)
			}
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("round %d: %w", round+1, err)
		}
		if f := failed.Load(); f > 0 {
			return nil, fmt.Errorf("round %d: %d requests not answered 200", round+1, f)
		}
		took := time.Since(start)
		_, afterBy, err := e.redis.commandCalls()
		if err != nil {
			return nil, err
		}
		r := roundResult{requests: users, took: took, byName: map[string]int64{}}
		for name, c := range afterBy {
			if d := c - beforeBy[name]; d > 0 && name != "info" {
				r.byName[name] = d
				r.calls += d
			}
		}
		out = append(out, r)
		step(fmt.Sprintf("round %d after the pause: %d requests in %v, %.3f Redis commands per request (%s)",
			round+1, users, took.Round(time.Millisecond), r.perRequest(), r.top(4)))
	}
	return out, nil
}
