package main

import (
	"fmt"
)

// sweepPoint is one constant-rate run.
type sweepPoint struct {
	target         string
	offered        float64
	achieved       float64
	p50, p99, p999 float64 // µs
	errors         int64
}

// sweep offers each rate to the baseline then the BFF on the steady-state
// path. wrk is closed-loop: each connection waits delay() ms between
// requests, which approximates the rate (with coordinated omission).
func (e *env) sweep(sc scenario, rates []float64) ([]sweepPoint, error) {
	var pts []sweepPoint
	for _, rate := range rates {
		for _, t := range []*target{&e.baseline, &e.bff} {
			name := fmt.Sprintf("sweep-%s-%s-%.0f", sc.key, t.name, rate)
			path, err := writeScript(e.dir, name, luaScript(sc.req(t), e.opt.conns, rate, e.opt.threads))
			if err != nil {
				return nil, err
			}
			res, err := wrkRun{bin: e.opt.wrk, url: t.base + "/", script: path, threads: e.opt.threads,
				conns: e.opt.conns, duration: e.opt.sweepDur}.run()
			if err != nil {
				return nil, err
			}
			truncateLog(t.proc)
			p := sweepPoint{target: t.name, offered: rate, achieved: res.rps(), p50: res.P50, p99: res.P99, p999: res.P999, errors: res.errors()}
			fmt.Printf("  %-8s offered %6.0f achieved %6.0f req/s  p50 %6.2f  p99 %6.2f  p99.9 %6.2f ms\n",
				t.name, rate, p.achieved, p.p50/1000, p.p99/1000, p.p999/1000)
			pts = append(pts, p)
		}
	}
	return pts, nil
}
