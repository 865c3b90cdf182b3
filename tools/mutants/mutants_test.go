//go:build integration

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/mutant"
)

// TestEveryMutantIsKilled is make mutants inside make test (the
// integration tag: it builds and runs the fast checks once per mutant,
// about two minutes on 2 cores alone, more beside the other suites): the
// checks pass with no mutant, and fail with each one of mutant.All. A
// mutant that survives a run is run once more (a new seed), so a loaded
// machine that slows a pattern past its timing does not fail make test;
// one that survives twice fails it.
func TestEveryMutantIsKilled(t *testing.T) {
	goCmd := os.Getenv("GO")
	if goCmd == "" {
		goCmd = "go"
	}
	gomod, err := exec.Command(goCmd, "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	r := &Runner{Dir: filepath.Dir(strings.TrimSpace(string(gomod))), Go: goCmd, Timeout: 10 * time.Minute, Log: testWriter{t}, Retries: 1}
	ctx := context.Background()
	if dl, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl.Add(-30*time.Second))
		defer cancel()
	}
	base, results, err := r.Run(ctx, mutant.All)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", Table(base, results))
	if s := Survivors(results); len(s) > 0 {
		t.Fatalf("not killed by their checks: %s (bench/mutants.txt, make mutants)", strings.Join(s, ", "))
	}
}

// testWriter is the progress of a run, as the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
