package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
)

// machine describes where the numbers come from.
type machine struct {
	nproc   int
	cpu     string
	kernel  string
	goVer   string
	wrkVer  string
	hostMem string
	loadavg string // /proc/loadavg when the run started
	source  string // the BFF's source revision
}

func machineInfo(wrk string) machine {
	m := machine{nproc: runtime.NumCPU(), cpu: cpuModel(), goVer: runtime.Version()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.Command("go", "version").Output(); err == nil {
		m.goVer = strings.TrimSpace(string(out))
	}
	out, _ := exec.Command(wrk, "-v").CombinedOutput()
	m.wrkVer, _, _ = strings.Cut(strings.TrimSpace(string(out)), "\n")
	m.wrkVer, _, _ = strings.Cut(m.wrkVer, " Copyright")
	m.hostMem = memTotal()
	m.source = sourceRevision()
	return m
}

// sourceRevision names the commit bin/bff was built from, and whether the
// working tree differed (read-only git commands).
func sourceRevision() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown (not a git checkout)"
	}
	rev := "commit " + strings.TrimSpace(string(out))
	if exec.Command("git", "diff", "--quiet", "HEAD", "--", "cmd", "internal", "go.mod", "go.sum").Run() != nil {
		rev += " plus uncommitted changes under cmd/ or internal/"
	}
	return rev
}

func cpuModel() string {
	return procField("/proc/cpuinfo", "model name")
}

func memTotal() string {
	v := procField("/proc/meminfo", "MemTotal")
	kib, err := strconv.ParseFloat(strings.TrimSuffix(v, " kB"), 64)
	if err != nil {
		return v
	}
	return fmt.Sprintf("%.1f GiB", kib/(1<<20))
}

// loadAvg is the 1, 5 and 15 minute load averages.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// procField is the value of the first "key: value" line with that key.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
