package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// tracingResult is the steady state (a) through three instances of the
// same BFF, runs interleaved: tracing off, on with every request sampled,
// and on with one in a hundred, exporting to a real OpenTelemetry
// Collector (tools/otelsink) on the same machine.
type tracingResult struct {
	off, full, sampled runMetrics // medians
	spans              int64      // bytes the collector wrote, a sign the spans arrived
}

func (r tracingResult) ran() bool { return r.off.rps > 0 }

// tracingCost builds and starts the collector and two traced instances,
// then measures them against the untraced one.
func (e *env) tracingCost(sc scenario) (tracingResult, error) {
	var r tracingResult
	sink := filepath.Join(e.dir, "otelsink")
	build := exec.Command("go", "build", "-mod=readonly", "-o", sink, ".")
	build.Dir = "tools/otelsink"
	if out, err := build.CombinedOutput(); err != nil {
		return r, fmt.Errorf("building tools/otelsink: %v\n%s", err, out)
	}
	addr, err := freeAddr()
	if err != nil {
		return r, err
	}
	_, port, _ := strings.Cut(addr, ":")
	spans := filepath.Join(e.dir, "spans.jsonl")
	p, err := e.ps.startEnv("otelsink", filepath.Join(e.dir, "otelsink.log"),
		[]string{"OTLP_HTTP_PORT=" + port, "SPANS_FILE=" + spans}, sink, "--config", "tools/otelsink/config.yaml")
	if err != nil {
		return r, err
	}
	if err := waitReady(p, 20*time.Second, func() error {
		resp, err := http.Post("http://"+addr+"/v1/traces", "application/json", bytes.NewReader([]byte("{}")))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("collector: %s", resp.Status)
		}
		return nil
	}); err != nil {
		return r, err
	}
	otel := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + addr, "OTEL_SERVICE_NAME=bff-bench"}
	full, err := e.startBFFEnv("bff-trace-100", append(otel, "OTEL_TRACES_SAMPLER=parentbased_always_on"))
	if err != nil {
		return r, err
	}
	full.name = "BFF traced 100%"
	sampled, err := e.startBFFEnv("bff-trace-1", append(otel, "OTEL_TRACES_SAMPLER=parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG=0.01"))
	if err != nil {
		return r, err
	}
	sampled.name = "BFF traced 1%"
	targets := []*target{&e.bff, &full, &sampled}
	runs := make([][]runMetrics, len(targets))
	for _, t := range targets[1:] { // connection pools, the token in each process
		path, err := writeScript(e.dir, "warmup-"+strings.ReplaceAll(t.name, " ", "-"), luaScript(sc.req(t), e.opt.conns, 0, e.opt.threads))
		if err != nil {
			return r, err
		}
		if _, err := e.measure(t, path, time.Second); err != nil {
			return r, err
		}
	}
	for round := range e.opt.steadyRounds {
		for i, t := range targets {
			path, err := writeScript(e.dir, fmt.Sprintf("tracing-%d-%d", i, round), luaScript(sc.req(t), e.opt.conns, 0, e.opt.threads))
			if err != nil {
				return r, err
			}
			m, err := e.measure(t, path, e.opt.steadyDur)
			if err != nil {
				return r, err
			}
			logRun("tracing", round, t.name, m)
			runs[i] = append(runs[i], m)
		}
	}
	r.off, r.full, r.sampled = medianRun(runs[0]), medianRun(runs[1]), medianRun(runs[2])
	time.Sleep(time.Second) // the batch processors' last export
	if fi, err := os.Stat(spans); err == nil {
		r.spans = fi.Size()
	}
	if r.spans == 0 {
		return r, fmt.Errorf("the collector received no span from the traced instances:\n%s", p.tail())
	}
	return r, nil
}

// tracingText is BENCHMARKS.md's section on the cost of tracing.
func tracingText(o options, r tracingResult) string {
	if !r.ran() {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n**Tracing cost** (the steady state (a), %d rounds of %s, three instances interleaved; traced instances export over OTLP/HTTP to an OpenTelemetry Collector on the same cores, which wrote %d KB of spans):\n\n", o.steadyRounds, o.steadyDur, r.spans/1024)
	b.WriteString("| BFF | req/s | CPU µs/req | p99 ms | allocs/req | req/s ×off | CPU ×off | p99 − off ms |\n|---|--:|--:|--:|--:|--:|--:|--:|\n")
	line := func(name string, m runMetrics, ratios bool) {
		fmt.Fprintf(&b, "| %s | %.0f | %.1f | %.2f | %s |", name, m.rps, m.cpuUSPerReq, m.wrk.P99/1000, num(m.allocsPerReq, 1))
		if ratios {
			fmt.Fprintf(&b, " %.2f× | %.2f× | %+.2f |\n", m.rps/r.off.rps, m.cpuUSPerReq/r.off.cpuUSPerReq, (m.wrk.P99-r.off.wrk.P99)/1000)
		} else {
			b.WriteString(" – | – | – |\n")
		}
	}
	line("tracing off (no OTEL_* variable)", r.off, false)
	line("traced, every request sampled", r.full, true)
	line("traced, 1% sampled (parentbased_traceidratio 0.01)", r.sampled, true)
	b.WriteString("\nWith tracing off no span is made and no instrumentation installed (`TestStartIsFreeWhenOff` holds a span's cost at zero allocations), so the off row is the BFF of every other figure here.\n")
	return b.String()
}
