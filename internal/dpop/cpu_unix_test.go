//go:build unix

package dpop

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user and system) the process has used, so
// that a benchmark can report its CPU per operation (cpu-ns/op) beside
// ns/op, which on a machine shared with other work also counts the waits
// for a core.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
