// Command bench is the end-to-end load benchmark of the BFF (make bench).
//
// One binary, three roles: without a sub-command it orchestrates the run
// (Redis, upstream stub, baseline proxy, BFF, wrk) and writes the report;
// "bench stub" is the fast upstream and "bench baseline" the bare
// httputil.ReverseProxy, each started by the orchestrator as its own process.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "stub":
			os.Exit(runStub(os.Args[2:]))
		case "baseline":
			os.Exit(runBaseline(os.Args[2:]))
		}
	}
	if err := runBench(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}
