package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/fintech-bff/bff/internal/mutant"
)

// Every mutant has its checks, and no checks name a mutant that is gone:
// a mutant added to internal/mutant without a line here would stop make
// mutants, not slip through it.
func TestEveryMutantHasChecks(t *testing.T) {
	for _, n := range mutant.All {
		c, ok := killers[n]
		if !ok {
			t.Errorf("mutant %q has no checks in killers", n)
			continue
		}
		if len(c.tests) == 0 || len(c.packages) == 0 {
			t.Errorf("mutant %q: checks %+v name no test or no package", n, c)
		}
	}
	for n := range killers {
		if !slices.Contains(mutant.All, n) {
			t.Errorf("killers names %q, which is not in mutant.All", n)
		}
	}
}

// The failed tests are read from go test's own lines: a subtest's failure
// is its parent's, each test once; a pass or a build failure names none.
func TestFailedTests(t *testing.T) {
	out := `=== RUN   TestMoneyHistories
--- FAIL: TestMoneyHistories (9.31s)
    --- FAIL: TestMoneyHistories/seed=17 (5.02s)
        moneyhistory_test.go:152: seed 17: 1 invariant(s) broken
    --- PASS: TestMoneyHistories/seed=18 (4.29s)
--- FAIL: TestConclude (0.00s)
    --- FAIL: TestConclude/two_equal (0.00s)
--- PASS: TestCanonicalPath (0.00s)
FAIL
FAIL	github.com/fintech-bff/bff/internal/payments	9.9s
`
	if got := strings.Join(failedTests([]byte(out)), ","); got != "TestConclude,TestMoneyHistories" {
		t.Fatalf("got %q", got)
	}
	build := "# github.com/fintech-bff/bff/internal/payments\ninternal/payments/x.go:1:1: undefined: y\nFAIL\tgithub.com/fintech-bff/bff/internal/payments [build failed]\n"
	if got := failedTests([]byte(build)); len(got) != 0 {
		t.Fatalf("a build failure named %v", got)
	}
}

// The -run pattern runs exactly the named tests, and every test of a
// prefix ending in "*".
func TestPattern(t *testing.T) {
	re := regexp.MustCompile(pattern([]string{"TestMoneyHistories", "TestStepUp*"}))
	for name, want := range map[string]bool{
		"TestMoneyHistories": true, "TestMoneyHistoriesLong": false, "TestStepUp": true, "TestStepUpAttackGzip": true,
		"TestHoldHistories": false, "XTestMoneyHistories": false,
	} {
		if got := re.MatchString(name); got != want {
			t.Errorf("%s: matched %v, want %v", name, got, want)
		}
	}
}

// The table has one line per mutant, with what killed it or SURVIVED,
// and the survivors are those not killed.
func TestTable(t *testing.T) {
	results := []Result{
		{Mutant: "made-on-similar", Killed: true, By: []string{"TestConclude", "TestMoneyHistories"}, Seconds: 12, Tries: 1},
		{Mutant: "no-window", Seconds: 9, Tries: 2},
		{Mutant: "final-replaceable", Broken: "build failed", Seconds: 1, Tries: 1},
	}
	table := Table(Result{Seconds: 30}, results)
	for _, want := range []string{
		"made-on-similar              killed          12  TestConclude, TestMoneyHistories\n",
		"no-window                    SURVIVED         9  -\n",
		"final-replaceable            BROKEN           1  build failed\n",
		"# 3 mutants, 1 killed, 2 not killed (no-window, final-replaceable); 52 s in all",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
	if got := Survivors(results); !slices.Equal(got, []string{"no-window", "final-replaceable"}) {
		t.Errorf("survivors: %v", got)
	}
}
