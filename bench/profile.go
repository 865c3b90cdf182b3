package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// profiling is a CPU profile of the BFF being taken over one run
// (-profile): where the cost that remains goes.
type profiling struct {
	path string
	done chan error
}

// startProfile asks the BFF's admin listener for a CPU profile of the
// next dur less a second (the run's start and end are left out).
func (e *env) startProfile(t *target, key string, dur time.Duration) *profiling {
	p := &profiling{path: filepath.Join(e.dir, key+".pprof"), done: make(chan error, 1)}
	secs := max(1, int((dur-time.Second)/time.Second))
	go func() {
		p.done <- fetchTo(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", t.adminURL, secs), p.path)
	}()
	return p
}

// finish waits for the profile and prints its top functions, by their
// own CPU and with their callees.
func (p *profiling) finish() error {
	text, err := p.summary(25)
	if err != nil {
		return err
	}
	fmt.Print(text)
	return nil
}

// summary waits for the profile and renders its n top functions, by their
// own CPU (-flat) and with their callees (-cum).
func (p *profiling) summary(n int) (string, error) {
	if err := <-p.done; err != nil {
		return "", fmt.Errorf("profile: %w", err)
	}
	var b strings.Builder
	for _, sort := range []string{"-flat", "-cum"} {
		out, err := exec.Command("go", "tool", "pprof", "-top", sort, fmt.Sprintf("-nodecount=%d", n), p.path).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("go tool pprof: %w\n%s", err, out)
		}
		fmt.Fprintf(&b, "CPU profile of the BFF (%s, %s):\n%s\n", sort, p.path, out)
	}
	return b.String(), nil
}
