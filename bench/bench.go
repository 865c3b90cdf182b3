package main

import (
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// options are the run's knobs (flags).
type options struct {
	wrk, bffBin       string
	out, svg, svgLink string
	threads, conns    int
	steadyDur, dur    time.Duration
	sweepDur          time.Duration
	steadyRounds      int
	rounds            int
	users, freshUsers int
	freshDur          time.Duration
	rates             []float64
	scaleFractions    []float64 // of (e)'s baseline saturation rate in the same run
	revocations       int
	stormUsers        int
	only              string
	profile           string
	keepDir           bool
	pause             time.Duration
	pacedRounds       int
	roundEvery        time.Duration
	idleTimeout       time.Duration
	pay               payOptions
}

// payOptions are the payments section's knobs (-only payments).
type payOptions struct {
	postgres     string
	out          string
	users        int
	rounds       int
	dur, rateDur time.Duration
	settle       time.Duration
	fractions    []float64
	maxConns     int
}

func parseOptions(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&o.wrk, "wrk", "wrk", "wrk binary")
	fs.StringVar(&o.bffBin, "bff", "bin/bff", "BFF binary (make build)")
	fs.StringVar(&o.out, "out", "BENCHMARKS.md", "report file; empty: stdout only")
	fs.StringVar(&o.svg, "svg", "bench/latency.svg", "latency chart file; empty: none")
	fs.IntVar(&o.threads, "t", 2, "wrk threads")
	fs.IntVar(&o.conns, "c", 64, "wrk connections")
	fs.DurationVar(&o.steadyDur, "steady-dur", 5*time.Second, "duration of one steady-state run")
	fs.DurationVar(&o.dur, "dur", 4*time.Second, "duration of one run of the other scenarios")
	fs.DurationVar(&o.sweepDur, "sweep-dur", 3*time.Second, "duration of one constant-rate run")
	fs.DurationVar(&o.freshDur, "fresh-dur", time.Second, "duration of the first-request (mint) run")
	fs.IntVar(&o.steadyRounds, "steady-rounds", 3, "baseline/BFF rounds of the steady state")
	fs.IntVar(&o.rounds, "rounds", 3, "baseline/BFF rounds of the other scenarios")
	fs.IntVar(&o.users, "users", 100000, "distinct users of the round-robin scenario")
	fs.IntVar(&o.freshUsers, "fresh-users", 15000, "fresh users of the first-request scenario")
	fs.IntVar(&o.stormUsers, "storm-users", 10000, "new users of the login storm (logins, then one first request each)")
	fs.IntVar(&o.revocations, "revocations", 20, "logout-to-401 measurements across two instances")
	rates := fs.String("rates", "1000,2000,4000,6000,8000,10000,12000", "offered loads of the sweep, req/s")
	scaleFractions := fs.String("scale-fractions", "0.5,0.9", "scenario (e) at constant rates, as fractions of its baseline's saturation rate in the same run; empty: none")
	fs.StringVar(&o.only, "only", "", "run only these scenarios, e.g. a,e (and skip the sweep, storm, tracing and revocation unless named: sweep, storm, tracing, revocation); payments (never in the default run: make bench-payments) alone writes its section into -out and its figures to -pay-out")
	fs.StringVar(&o.profile, "profile", "", "profile the BFF's CPU over the last round of these scenarios, e.g. e: the top functions go to the log, the profile to the work directory (with -keep); payments: an extra run of creations at saturation, its top functions in -pay-out")
	fs.BoolVar(&o.keepDir, "keep", false, "keep the work directory (configs, logs, scripts)")
	fs.DurationVar(&o.pause, "pause", 0, "an idle pause after scenario (e)'s users are primed, before its rounds: what the first round after a quiet spell costs")
	fs.IntVar(&o.pacedRounds, "paced-rounds", 3, "with -pause: paced rounds of scenario (e)'s users after the pause, each user once per round, with the Redis commands of each round by command")
	fs.DurationVar(&o.roundEvery, "round-every", 8*time.Second, "with -pause: the length of a paced round (each user seen once per this)")
	fs.DurationVar(&o.idleTimeout, "idle-timeout", 0, "session.idle_timeout of the BFF (0: its default, 30m); a session is written back once per a quarter of it (at most 15m), which a short one shows within a run")
	fs.StringVar(&o.pay.postgres, "postgres", defaultPostgresURL(), "payments: a PostgreSQL server URL where the user may create databases (a fresh bffbench_<pid> is made and dropped)")
	fs.StringVar(&o.pay.out, "pay-out", "bench/payments.txt", "payments: the section's figures, profile and raw runs; empty: none")
	fs.IntVar(&o.pay.users, "pay-users", 1000, "payments: distinct users the payments rotate over (each payment from the next)")
	fs.IntVar(&o.pay.rounds, "pay-rounds", 3, "payments: rounds at saturation (creations: baseline and BFF interleaved)")
	fs.DurationVar(&o.pay.dur, "pay-dur", 5*time.Second, "payments: duration of one run at saturation")
	fs.DurationVar(&o.pay.rateDur, "pay-rate-dur", 6*time.Second, "payments: duration of one constant-rate run")
	fs.DurationVar(&o.pay.settle, "pay-settle", 11*time.Second, "payments: the wait before PostgreSQL's counters are read (an idle server process flushes them up to 10 s late)")
	fractions := fs.String("pay-fractions", "0.25,0.5,0.9", "payments: the constant rates, as fractions of the saturation rate")
	fs.IntVar(&o.pay.maxConns, "pay-max-conns", 0, "payments: the BFF's ledger.max_conns (0: its default, pgx's: the larger of 4 and the CPU count)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var err error
	if o.rates, err = parseRates("-rates", *rates); err != nil {
		return o, err
	}
	if o.scaleFractions, err = parseRates("-scale-fractions", *scaleFractions); err != nil {
		return o, err
	}
	for _, f := range o.scaleFractions {
		if f > 1 {
			return o, fmt.Errorf("-scale-fractions: %g is more than the saturation rate", f)
		}
	}
	if o.pay.fractions, err = parseRates("-pay-fractions", *fractions); err != nil {
		return o, err
	}
	for _, f := range o.pay.fractions {
		if f > 1 {
			return o, fmt.Errorf("-pay-fractions: %g is more than the saturation rate", f)
		}
	}
	if o.svg != "" && o.out != "" {
		if rel, err := filepath.Rel(filepath.Dir(o.out), o.svg); err == nil {
			o.svgLink = filepath.ToSlash(rel)
		}
	}
	return o, nil
}

// runBench is the orchestrator: set up, measure, report, clean up.
func runBench(args []string) error {
	start := time.Now()
	load := loadAvg()
	o, err := parseOptions(args)
	if err != nil {
		return err
	}
	if o.wrk, err = exec.LookPath(o.wrk); err != nil {
		return fmt.Errorf("wrk not found (apt-get install -y wrk): %w", err)
	}
	if _, err := os.Stat(o.bffBin); err != nil {
		return fmt.Errorf("%s: %w (run make build)", o.bffBin, err)
	}
	readClockTicks()

	e := &env{opt: o, ps: &procSet{}}
	if e.dir, err = os.MkdirTemp("", "bffbench-"); err != nil {
		return err
	}
	if o.keepDir {
		fmt.Println("work directory:", e.dir)
	}
	var once sync.Once
	cleanup := func() { once.Do(e.cleanUp) }
	defer cleanup()
	stopOnSignal(cleanup)

	if err := e.setUp(); err != nil {
		return err
	}
	res, err := e.measureAll()
	if err != nil {
		return err
	}
	res.machine = machineInfo(o.wrk)
	res.machine.loadavg = load
	res.command = commandLine()
	res.redisDesc = e.redis.desc
	res.elapsed = time.Since(start)
	return writeReport(o, res)
}

func readClockTicks() {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err != nil {
		return
	}
	if v, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64); err == nil && v > 0 {
		clockTicks = v
	}
}

// stopOnSignal cleans up on SIGINT/SIGTERM/SIGHUP, then exits.
func stopOnSignal(cleanup func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-ch
		fmt.Fprintln(os.Stderr, "bench: got", s, "- stopping every process it started")
		cleanup()
		os.Exit(1)
	}()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func commandLine() string {
	args := append([]string{"./" + filepath.ToSlash(filepath.Clean(os.Args[0]))}, os.Args[1:]...)
	if strings.HasPrefix(os.Args[0], "/") {
		args[0] = os.Args[0]
	}
	return strings.Join(args, " ")
}

// parseRates reads a comma-separated list of positive rates.
func parseRates(flag, list string) ([]float64, error) {
	var out []float64
	if strings.TrimSpace(list) == "" {
		return out, nil
	}
	for _, r := range strings.Split(list, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(r), 64)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("%s: bad rate %q", flag, r)
		}
		out = append(out, v)
	}
	return out, nil
}
