package main

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"
)

// scenario is one row pair of the table.
type scenario struct {
	key, title string
	req        func(t *target) request
	vsBaseline bool // also run the baseline, interleaved
	rounds     int
	dur        time.Duration
	note       string
	prepare    func() error // before the scenario's first run, when set
}

// scenarioResult holds every run and the medians.
type scenarioResult struct {
	scenario
	baseRuns, bffRuns []runMetrics
	base, bff         runMetrics // medians; base is zero without baseline
	mints             int64      // tokens minted by the stub during the BFF runs
}

const smallBody = `{"name":"Bench Coffee","category":"food","country":"DE","city":"Berlin"}`

func (e *env) scenarios() []scenario {
	o := e.opt
	cookie := map[string]string{"Cookie": e.steady.cookieHeader()}
	get := func(path string, h map[string]string) func(t *target) request {
		return func(t *target) request {
			return request{method: http.MethodGet, path: t.apiPrefix + path, headers: h}
		}
	}
	rotating := func(file string) func(t *target) request {
		return func(t *target) request {
			return request{method: http.MethodGet, path: t.apiPrefix + "/v2/payments",
				rotate: &rotation{header: "Cookie", prefix: cookieName + "=", file: file}}
		}
	}
	return []scenario{
		{key: "a", title: "steady state: cookie GET, 1 KB, one user, cached token",
			req: get("/v2/payments", cookie), vsBaseline: true, rounds: o.steadyRounds, dur: o.steadyDur},
		{key: "b", title: "session token (mobile): Authorization: Bearer GET, 1 KB",
			req:        get("/v2/data/accounts", map[string]string{"Authorization": "Bearer " + e.steady.token}),
			vsBaseline: true, rounds: o.rounds, dur: o.dur},
		{key: "c", title: "cookie POST, small JSON body, X-CSRF: 1",
			req: func(t *target) request {
				return request{method: http.MethodPost, path: t.apiPrefix + "/v2/merchants", body: smallBody,
					headers: map[string]string{"Cookie": e.steady.cookieHeader(), "X-CSRF": "1", "Content-Type": "application/json"}}
			}, vsBaseline: true, rounds: o.rounds, dur: o.dur},
		{key: "d", title: "1 MiB response (streaming)",
			req: get("/v2/data/transactions", cookie), vsBaseline: true, rounds: o.rounds, dur: o.dur},
		{key: "e", title: fmt.Sprintf("%d distinct users round-robin (tokens cached)", o.users),
			req: rotating(e.manyFile), vsBaseline: true, rounds: o.rounds, dur: o.dur, prepare: e.prepareMany,
			note: "the baseline runs the same rotating script (it ignores the cookie)"},
		{key: "f", title: "first request of new users (mint)",
			req: rotating(e.freshFile), rounds: 1, dur: o.freshDur,
			note: fmt.Sprintf("%d fresh sessions, each used once in order", o.freshUsers)},
	}
}

// runScenario runs baseline and BFF alternately, rounds times.
func (e *env) runScenario(sc scenario) (scenarioResult, error) {
	r := scenarioResult{scenario: sc}
	if sc.prepare != nil {
		if err := sc.prepare(); err != nil {
			return r, err
		}
	}
	// A rotating script goes on where the target's previous run of the
	// scenario stopped, so successive runs cycle through every user
	// rather than each starting again at the first.
	next := map[string]int64{}
	script := func(t *target, round int) (string, error) {
		req := sc.req(t)
		if req.rotate != nil {
			req.rotate.start = next[t.name]
		}
		return writeScript(e.dir, fmt.Sprintf("%s-%s-%d", sc.key, t.name, round), luaScript(req, e.opt.conns, 0, e.opt.threads))
	}
	run := func(t *target, round int) (runMetrics, error) {
		path, err := script(t, round)
		if err != nil {
			return runMetrics{}, err
		}
		var prof *profiling
		if t.adminURL != "" && round == sc.rounds-1 && slices.Contains(strings.Split(e.opt.profile, ","), sc.key) {
			prof = e.startProfile(t, sc.key, sc.dur)
		}
		m, err := e.measure(t, path, sc.dur)
		if err != nil {
			return m, err
		}
		if prof != nil {
			if err := prof.finish(); err != nil {
				return m, err
			}
		}
		next[t.name] += m.wrk.Requests
		logRun(sc.key, round, t.name, m)
		return m, nil
	}
	mints0, err := e.stubMints()
	if err != nil {
		return r, err
	}
	for round := range sc.rounds {
		if sc.vsBaseline {
			m, err := run(&e.baseline, round)
			if err != nil {
				return r, err
			}
			r.baseRuns = append(r.baseRuns, m)
		}
		m, err := run(&e.bff, round)
		if err != nil {
			return r, err
		}
		r.bffRuns = append(r.bffRuns, m)
	}
	mints1, err := e.stubMints()
	if err != nil {
		return r, err
	}
	r.mints = mints1 - mints0
	r.base = medianRun(r.baseRuns)
	r.bff = medianRun(r.bffRuns)
	return r, nil
}

func logRun(key string, round int, who string, m runMetrics) {
	fmt.Printf("  (%s) round %d %-8s %8.0f req/s  cpu %6.1f µs/req  p99 %6.2f ms  %8.0f B/resp  errors %d  redis %.3f/req%s\n",
		key, round+1, who, m.rps, m.cpuUSPerReq, m.wrk.P99/1000, m.wrk.bytesPerReq(), m.wrk.errors(), m.redisPerReq, topCommands(m))
}

// topCommands names the Redis commands of a run that cost more than 0.005
// per request, most first: where a scenario's Redis traffic comes from.
func topCommands(m runMetrics) string {
	n := float64(m.wrk.Requests)
	type kv struct {
		name  string
		calls int64
	}
	var top []kv
	for name, calls := range m.redisByCmd {
		if float64(calls)/n > 0.005 {
			top = append(top, kv{name, calls})
		}
	}
	slices.SortFunc(top, func(a, b kv) int { return int(b.calls - a.calls) })
	var b strings.Builder
	for _, t := range top {
		fmt.Fprintf(&b, " %s %.3f", t.name, float64(t.calls)/n)
	}
	if b.Len() == 0 {
		return ""
	}
	return " (" + strings.TrimSpace(b.String()) + ")"
}

// medianRun is the per-metric median of the runs (errors and requests are
// summed; peak RSS is the maximum).
func medianRun(runs []runMetrics) runMetrics {
	if len(runs) == 0 {
		return runMetrics{}
	}
	pick := func(f func(runMetrics) float64) float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = f(r)
		}
		return median(v)
	}
	m := runMetrics{
		rps:          pick(func(r runMetrics) float64 { return r.rps }),
		cpuUSPerReq:  pick(func(r runMetrics) float64 { return r.cpuUSPerReq }),
		allocsPerReq: pick(func(r runMetrics) float64 { return r.allocsPerReq }),
		redisPerReq:  pick(func(r runMetrics) float64 { return r.redisPerReq }),
		peakRSSMiB:   math.NaN(),
	}
	m.wrk.P50 = pick(func(r runMetrics) float64 { return r.wrk.P50 })
	m.wrk.P90 = pick(func(r runMetrics) float64 { return r.wrk.P90 })
	m.wrk.P99 = pick(func(r runMetrics) float64 { return r.wrk.P99 })
	m.wrk.P999 = pick(func(r runMetrics) float64 { return r.wrk.P999 })
	for _, r := range runs {
		m.wrk.Requests += r.wrk.Requests
		m.wrk.Bytes += r.wrk.Bytes
		m.wrk.Status += r.wrk.Status
		m.wrk.Connect += r.wrk.Connect
		m.wrk.Read += r.wrk.Read
		m.wrk.Write += r.wrk.Write
		m.wrk.Timeout += r.wrk.Timeout
		if math.IsNaN(m.peakRSSMiB) || math.Abs(r.peakRSSMiB) > math.Abs(m.peakRSSMiB) {
			m.peakRSSMiB = r.peakRSSMiB
		}
	}
	return m
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	n := len(v)
	if n == 0 {
		return math.NaN()
	}
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}
