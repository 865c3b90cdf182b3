package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// wrkResult is the JSON line the Lua done() prints.
type wrkResult struct {
	Requests   int64   `json:"requests"`
	Bytes      int64   `json:"bytes"`
	DurationUS float64 `json:"duration_us"`
	Connect    int64   `json:"connect"`
	Read       int64   `json:"read"`
	Write      int64   `json:"write"`
	Status     int64   `json:"status"`
	Timeout    int64   `json:"timeout"`
	P50        float64 `json:"p50"`
	P90        float64 `json:"p90"`
	P99        float64 `json:"p99"`
	P999       float64 `json:"p999"`
}

func (r wrkResult) errors() int64 { return r.Connect + r.Read + r.Write + r.Status + r.Timeout }

// bytesPerReq is the average size of a response, headers included.
func (r wrkResult) bytesPerReq() float64 {
	if r.Requests == 0 {
		return 0
	}
	return float64(r.Bytes) / float64(r.Requests)
}

func (r wrkResult) rps() float64 {
	if r.DurationUS <= 0 {
		return 0
	}
	return float64(r.Requests) / (r.DurationUS / 1e6)
}

// wrkRun is one invocation of wrk.
type wrkRun struct {
	bin      string
	url      string
	script   string
	threads  int
	conns    int
	duration time.Duration
}

func (w wrkRun) run() (wrkResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), w.duration+30*time.Second)
	defer cancel()
	secs := strconv.Itoa(int((w.duration + time.Second - 1) / time.Second))
	cmd := exec.CommandContext(ctx, w.bin, "-t", strconv.Itoa(w.threads), "-c", strconv.Itoa(w.conns),
		"-d", secs+"s", "--latency", "-s", w.script, w.url)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return wrkResult{}, fmt.Errorf("wrk %s: %w: %s", w.url, err, errb.String())
	}
	return parseWrk(out.String())
}

func parseWrk(out string) (wrkResult, error) {
	for line := range strings.Lines(out) {
		if rest, ok := strings.CutPrefix(line, `{"bench":1,`); ok {
			var r wrkResult
			if err := json.Unmarshal([]byte("{"+rest), &r); err != nil {
				return r, fmt.Errorf("wrk JSON line %q: %w", line, err)
			}
			return r, nil
		}
	}
	return wrkResult{}, fmt.Errorf("wrk printed no JSON line:\n%s", out)
}
