//go:build !unix

package dpop

import "time"

// processCPU is 0 where getrusage is not: no cpu-ns/op is reported.
func processCPU() time.Duration { return 0 }
