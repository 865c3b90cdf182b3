// Command mutants shows that the fast checks of the money path catch each
// plausible broken rule (internal/mutant): for each mutant it builds the
// checks with that one rule broken,
//
//	go test -count=1 -ldflags=-X=github.com/fintech-bff/bff/internal/mutant.active=<name> -run <killers> <packages>
//
// and requires the run to fail: the mutant is killed, and the tests that
// failed (their "--- FAIL:" lines) are what killed it. A mutant whose run
// passes SURVIVED: the checks would not see that bug. First the same
// checks run once with no mutant and must pass, or a failure would prove
// nothing. It writes one line per mutant (name, killed or SURVIVED, by
// which tests, seconds) to -out and exits 1 when any survived.
//
// Usage, from the module's root (make mutants):
//
//	go run ./tools/mutants [-out bench/mutants.txt] [-v] [-retries n] [mutant ...]
//
// With no names it runs every one in mutant.All, in that order.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/fintech-bff/bff/internal/mutant"
)

// activeVar is the variable a build sets to choose its mutant.
const activeVar = "github.com/fintech-bff/bff/internal/mutant.active"

// check is what is run against one mutant: test names (anchored, joined
// into one -run pattern) in packages.
type check struct {
	tests    []string
	packages []string
}

// history is the money history checker (internal/payments): it breaks the
// invariants every settlement rule protects, so it is the killer every
// rule of the money path is expected to meet first.
const history = "TestMoneyHistories"

// killers are the checks of each mutant: the history checker where the
// rule is on its path, and the unit tests that state the rule. The
// approval rules are outside the money history (no payment is held
// there): the hold checker (TestHoldHistories) and the step-up tests are
// theirs, as the follow rule's is the ledger's table test.
var killers = map[string]check{
	mutant.MadeOnSimilar:            {[]string{history, "TestConclude"}, []string{"./internal/payments"}},
	mutant.MadeOfTwoEqual:           {[]string{history, "TestConclude"}, []string{"./internal/payments"}},
	mutant.CaseVariantKeys:          {[]string{history, "TestDuplicateKey", "TestAttackBodiesReadAsTheUpstreamReadsThem"}, []string{"./internal/payments"}},
	mutant.FinalReplaceable:         {[]string{"TestFinalIsFinal", "TestFollowing"}, []string{"./internal/ledger"}},
	mutant.FreshByClock:             {[]string{history, "TestConclude"}, []string{"./internal/payments"}},
	mutant.NoWindow:                 {[]string{history, "TestConclude"}, []string{"./internal/payments"}},
	mutant.ListLagIgnored:           {[]string{history}, []string{"./internal/payments"}},
	mutant.OthersSinceClaim:         {[]string{history}, []string{"./internal/payments"}},
	mutant.NotMadeBeforeQuiet:       {[]string{history, "TestConclude"}, []string{"./internal/payments"}},
	mutant.NoTrailingSlash:          {[]string{history, "TestCanonicalPath", "TestAttackTrailingSlashIsTheCreation"}, []string{"./internal/payments"}},
	mutant.CouldHaveMadeByEquality:  {[]string{history, "TestConclude"}, []string{"./internal/payments"}},
	mutant.AmountThroughFloat:       {[]string{history, "TestReadBody", "TestParseAmount", "TestDecodeRefusals"}, []string{"./internal/money", "./internal/payments"}},
	mutant.PayeeUnbound:             {[]string{"TestHoldHistories", "TestStepUp*"}, []string{"./internal/payments"}},
	mutant.OwnerWidensNotMade:       {[]string{history, "TestConclude", "TestAttackInitOfAHeldPaymentIsNotAResend"}, []string{"./internal/payments"}},
	mutant.ApprovalContentUnchecked: {[]string{"TestHoldHistories", "TestStepUp*"}, []string{"./internal/payments"}},
}

// pattern is the -run pattern of tests: each a whole top-level test's
// name, or a prefix when it ends in "*" ("TestStepUp*" runs every
// TestStepUp...).
func pattern(tests []string) string {
	parts := make([]string, len(tests))
	for i, t := range tests {
		if p, ok := strings.CutSuffix(t, "*"); ok {
			parts[i] = regexp.QuoteMeta(p)
		} else {
			parts[i] = regexp.QuoteMeta(t) + "$"
		}
	}
	return "^(" + strings.Join(parts, "|") + ")"
}

// Result is one run: a mutant's ("" for the baseline).
type Result struct {
	Mutant  string
	Tries   int      // the runs it took (1 unless it survived a run)
	Killed  bool     // the run failed in its tests
	By      []string // the top-level tests that failed
	Broken  string   // the run failed without a test failing (build, panic, leak): neither killed nor survived
	Seconds float64
	Command string
	Output  []byte
}

// Runner runs the checks.
type Runner struct {
	Dir     string        // the module's root
	Go      string        // the go command
	Timeout time.Duration // each go test's -timeout
	Log     io.Writer     // progress; nil: none
	Verbose bool          // the output of every run, not only of those that went wrong
	// Retries is how many more times a mutant that survived is run (each
	// run a new seed of the randomized checks): a mutant the checks
	// catch only now and then is reported with the try that caught it.
	Retries int
}

// run runs c with the mutant name built in ("" none).
func (r *Runner) run(ctx context.Context, name string, c check) Result {
	args := []string{"test", "-count=1", "-timeout", r.Timeout.String()}
	if name != "" {
		args = append(args, "-ldflags=-X="+activeVar+"="+name)
	}
	args = append(args, "-run", pattern(c.tests))
	args = append(args, c.packages...)
	cmd := exec.CommandContext(ctx, r.Go, args...)
	cmd.Dir = r.Dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	res := Result{Mutant: name, Seconds: time.Since(start).Seconds(), Command: r.Go + " " + strings.Join(args, " "), Output: out.Bytes()}
	res.By = failedTests(out.Bytes())
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && len(res.By) > 0:
		res.Killed = true
	case errors.As(err, &exit):
		res.Broken = "the run failed, and no test did: " + lastLines(out.Bytes(), 5)
	default:
		res.Broken = err.Error()
	}
	return res
}

var failLine = regexp.MustCompile(`^\s*--- FAIL: (\S+)`)

// failedTests are the top-level tests that failed in out (a subtest's
// failure is its parent's), each once, sorted.
func failedTests(out []byte) []string {
	seen := map[string]bool{}
	s := bufio.NewScanner(bytes.NewReader(out))
	s.Buffer(make([]byte, 0, 64*1024), 4<<20)
	for s.Scan() {
		if m := failLine.FindStringSubmatch(s.Text()); m != nil {
			name, _, _ := strings.Cut(m[1], "/")
			seen[name] = true
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func lastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}

// baseline is every mutant's checks at once, with no mutant: the union of
// their tests and packages.
func baseline(names []string) check {
	var c check
	for _, n := range names {
		k := killers[n]
		for _, t := range k.tests {
			if !slices.Contains(c.tests, t) {
				c.tests = append(c.tests, t)
			}
		}
		for _, p := range k.packages {
			if !slices.Contains(c.packages, p) {
				c.packages = append(c.packages, p)
			}
		}
	}
	sort.Strings(c.packages)
	return c
}

// Run runs the baseline, then each mutant; it stops after a baseline
// that does not pass (its Result is the only one then).
func (r *Runner) Run(ctx context.Context, names []string) (base Result, results []Result, err error) {
	for _, n := range names {
		if _, ok := killers[n]; !ok {
			return base, nil, fmt.Errorf("mutant %q has no checks in tools/mutants (killers); known: %s", n, strings.Join(mutant.All, ", "))
		}
	}
	r.logf("baseline (no mutant): %s\n", pattern(baseline(names).tests))
	base = r.run(ctx, "", baseline(names))
	if base.Killed || base.Broken != "" {
		r.logf("baseline FAILED in %.0fs (%s%s):\n%s\n", base.Seconds, strings.Join(base.By, ", "), base.Broken, base.Output)
		return base, nil, errors.New("the checks fail with no mutant: fix them first")
	}
	r.logf("baseline passed in %.0fs\n", base.Seconds)
	for _, n := range names {
		res := r.run(ctx, n, killers[n])
		res.Tries = 1
		for res.Broken == "" && !res.Killed && res.Tries <= r.Retries && ctx.Err() == nil {
			r.logf("%-28s survived try %d; again\n", n, res.Tries)
			tries, spent := res.Tries, res.Seconds
			res = r.run(ctx, n, killers[n])
			res.Tries, res.Seconds = tries+1, res.Seconds+spent
		}
		results = append(results, res)
		r.logf("%-28s %s in %.0fs\n", n, res.verdict(), res.Seconds)
		if r.Verbose || res.Broken != "" || !res.Killed {
			r.logf("  %s\n%s\n", res.Command, res.Output)
		}
		if ctx.Err() != nil {
			return base, results, ctx.Err()
		}
	}
	return base, results, nil
}

func (r *Runner) logf(format string, args ...any) {
	if r.Log != nil {
		fmt.Fprintf(r.Log, format, args...)
	}
}

func (res Result) verdict() string {
	switch {
	case res.Broken != "":
		return "BROKEN (" + res.Broken + ")"
	case res.Killed:
		return "killed by " + strings.Join(res.By, ", ") + res.onTry()
	}
	return "SURVIVED"
}

// onTry notes a mutant killed only after it survived a run.
func (res Result) onTry() string {
	if res.Tries <= 1 {
		return ""
	}
	return fmt.Sprintf(" (on try %d)", res.Tries)
}

// Survivors are the mutants not killed (a broken run kills nothing).
func Survivors(results []Result) []string {
	var out []string
	for _, res := range results {
		if !res.Killed || res.Broken != "" {
			out = append(out, res.Mutant)
		}
	}
	return out
}

// Table is the report: one line per mutant, and the totals.
func Table(base Result, results []Result) string {
	var b strings.Builder
	b.WriteString("# make mutants (tools/mutants): each mutant of internal/mutant built in, and its fast checks run:\n")
	b.WriteString("#   go test -count=1 -ldflags=-X=" + activeVar + "=<name> -run <killers> <packages>\n")
	b.WriteString("# a mutant is killed when the run fails in a test (those are listed); SURVIVED when it passes.\n")
	fmt.Fprintf(&b, "# baseline, no mutant: passed in %.0f s\n", base.Seconds)
	fmt.Fprintf(&b, "%-28s %-9s %8s  %s\n", "mutant", "result", "seconds", "killed by")
	total := base.Seconds
	for _, res := range results {
		result, by := "killed", strings.Join(res.By, ", ")+res.onTry()
		switch {
		case res.Broken != "":
			result, by = "BROKEN", res.Broken
		case !res.Killed:
			result, by = "SURVIVED", "-"
		}
		fmt.Fprintf(&b, "%-28s %-9s %8.0f  %s\n", res.Mutant, result, res.Seconds, by)
		total += res.Seconds
	}
	survived := Survivors(results)
	fmt.Fprintf(&b, "# %d mutants, %d killed, %d not killed%s; %.0f s in all, the baseline included\n",
		len(results), len(results)-len(survived), len(survived), listed(survived), total)
	return b.String()
}

func listed(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return " (" + strings.Join(names, ", ") + ")"
}

func main() {
	out := flag.String("out", "", "write the table to this file (as well as to stdout)")
	verbose := flag.Bool("v", false, "print the output of every run")
	timeout := flag.Duration("timeout", 10*time.Minute, "each go test's -timeout")
	retries := flag.Int("retries", 0, "run a mutant that survived this many more times")
	flag.Parse()
	names := flag.Args()
	if len(names) == 0 {
		names = mutant.All
	}
	goCmd := os.Getenv("GO")
	if goCmd == "" {
		goCmd = "go"
	}
	r := &Runner{Dir: ".", Go: goCmd, Timeout: *timeout, Log: os.Stderr, Verbose: *verbose, Retries: *retries}
	base, results, err := r.Run(context.Background(), names)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		os.Exit(2)
	}
	table := Table(base, results)
	fmt.Print(table)
	if *out != "" {
		if err := os.WriteFile(*out, []byte(table), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "mutants:", err)
			os.Exit(2)
		}
	}
	if s := Survivors(results); len(s) > 0 {
		fmt.Fprintf(os.Stderr, "mutants: not killed: %s\n", strings.Join(s, ", "))
		os.Exit(1)
	}
}
