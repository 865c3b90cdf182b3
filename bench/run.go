package main

import (
	"fmt"
	"math"
	"time"
)

// runMetrics is one wrk run against one target, with the proxy process's
// resource use over the run.
type runMetrics struct {
	wrk          wrkResult
	rps          float64
	cpuUSPerReq  float64
	allocsPerReq float64 // NaN when the target has no metrics
	redisPerReq  float64
	redisByCmd   map[string]int64 // commands sent during the run, by name
	peakRSSMiB   float64          // NaN when VmHWM could not be read
}

// counters are the cumulative readings taken before and after a run.
type counters struct {
	cpu     int64
	mallocs float64
	redis   int64
	byCmd   map[string]int64
}

func (e *env) read(t *target) (counters, error) {
	var c counters
	var err error
	if c.cpu, err = cpuTicks(t.proc.pid()); err != nil {
		return c, err
	}
	if c.mallocs, err = mallocs(t.metricsURL); err != nil {
		c.mallocs = math.NaN()
	}
	if c.redis, c.byCmd, err = e.redis.commandCalls(); err != nil {
		return c, err
	}
	return c, nil
}

// measure runs wrk with the script against t and derives the per-request costs.
func (e *env) measure(t *target, script string, dur time.Duration) (runMetrics, error) {
	pid := t.proc.pid()
	truncateLog(t.proc)
	rssReset := resetPeakRSS(pid) == nil
	before, err := e.read(t)
	if err != nil {
		return runMetrics{}, err
	}
	res, err := wrkRun{bin: e.opt.wrk, url: t.base + "/", script: script, threads: e.opt.threads,
		conns: e.opt.conns, duration: dur}.run()
	if err != nil {
		return runMetrics{}, err
	}
	time.Sleep(e.runTail)
	after, err := e.read(t)
	if err != nil {
		return runMetrics{}, err
	}
	if t.proc.exited() {
		return runMetrics{}, fmt.Errorf("%s exited during the run:\n%s", t.name, t.proc.tail())
	}
	m := runMetrics{wrk: res, rps: res.rps(), allocsPerReq: math.NaN(), peakRSSMiB: math.NaN()}
	n := float64(res.Requests)
	if n == 0 {
		return m, fmt.Errorf("%s: wrk completed no request", t.name)
	}
	m.cpuUSPerReq = float64(after.cpu-before.cpu) / clockTicks * 1e6 / n
	m.allocsPerReq = (after.mallocs - before.mallocs) / n
	m.redisPerReq = float64(after.redis-before.redis) / n
	m.redisByCmd = map[string]int64{}
	for name, calls := range after.byCmd {
		if d := calls - before.byCmd[name]; d > 0 && name != "info" {
			m.redisByCmd[name] = d
		}
	}
	if kib, err := peakRSSKiB(pid); err == nil {
		m.peakRSSMiB = float64(kib) / 1024
		if !rssReset {
			m.peakRSSMiB = -m.peakRSSMiB // marks "since start" in the report
		}
	}
	return m, nil
}
