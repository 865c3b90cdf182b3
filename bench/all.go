package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// results is everything the report shows.
type results struct {
	date       time.Time
	scenarios  []scenarioResult
	sweep      []sweepPoint
	revocation revocationResult
	storm      stormResult
	tracing    tracingResult
	users      int             // distinct users of scenario (e)
	afterPause []roundResult   // paced rounds of (e)'s users after -pause
	scaleSweep []sweepPoint    // scenario (e) at constant rates
	payments   *paymentsResult // -only payments (nil when not run)
	// paymentsBlock is the payments section of the report: this run's,
	// or the one the report file holds.
	paymentsBlock string
	machine       machine
	command       string
	redisDesc     string
	elapsed       time.Duration
}

func (e *env) measureAll() (*results, error) {
	res := &results{date: time.Now().UTC(), users: e.opt.users}
	var err error
	if e.onlyPayments() {
		step("payments")
		res.payments, err = e.payments()
		return res, err
	}
	scs := e.scenarios()
	if err := e.warmUp(scs[0]); err != nil {
		return nil, err
	}
	for _, sc := range scs {
		if !e.selected(sc.key) {
			continue
		}
		step(fmt.Sprintf("scenario (%s) %s", sc.key, sc.title))
		r, err := e.runScenario(sc)
		if err != nil {
			return nil, fmt.Errorf("scenario (%s): %w", sc.key, err)
		}
		res.scenarios = append(res.scenarios, r)
		if sc.key == "e" {
			res.afterPause = e.afterPause
		}
		if sc.key == "e" && len(e.opt.scaleFractions) > 0 {
			// Below saturation: the latency users see at a production
			// load, where a collector's pause is absorbed rather than
			// queued behind; at fractions of the baseline's saturation
			// rate of this run, so that the rows mean the same on any
			// machine.
			step("scenario (e) at constant rates")
			rates := make([]float64, len(e.opt.scaleFractions))
			for i, f := range e.opt.scaleFractions {
				rates[i] = math.Round(f * r.base.rps)
			}
			if res.scaleSweep, err = e.sweep(sc, rates); err != nil {
				return nil, fmt.Errorf("scenario (e) at constant rates: %w", err)
			}
		}
	}
	if e.selected("tracing") {
		step("tracing on, sampled at 100% and 1%, against tracing off")
		if res.tracing, err = e.tracingCost(scs[0]); err != nil {
			return nil, fmt.Errorf("tracing: %w", err)
		}
	}
	if e.selected("storm") {
		step(fmt.Sprintf("login storm: %d new users", e.opt.stormUsers))
		if res.storm, err = e.storm(); err != nil {
			return nil, fmt.Errorf("login storm: %w", err)
		}
	}
	if e.selected("sweep") {
		step("constant-rate sweep")
		if res.sweep, err = e.sweep(scs[0], e.opt.rates); err != nil {
			return nil, fmt.Errorf("sweep: %w", err)
		}
	}
	if e.selected("revocation") {
		step("revocation latency across two instances")
		if res.revocation, err = e.revocation(); err != nil {
			return nil, fmt.Errorf("revocation: %w", err)
		}
	}
	if e.selected("payments") {
		step("payments")
		if res.payments, err = e.payments(); err != nil {
			return nil, fmt.Errorf("payments: %w", err)
		}
	}
	return res, nil
}

// selected reports whether -only names the part (or is empty). The
// payments section runs only when named: make bench runs it on its own
// (make bench-payments), and the full run keeps its section as it stands.
func (e *env) selected(part string) bool {
	named := slices.Contains(strings.Split(e.opt.only, ","), part)
	if part == "payments" {
		return named
	}
	return e.opt.only == "" || named
}

// onlyPayments reports -only payments: the section alone, written into
// the report as a block of its own.
func (e *env) onlyPayments() bool { return e.opt.only == "payments" }

// warmUp sends one short unrecorded run through each proxy so that
// connection pools and caches are in place.
func (e *env) warmUp(sc scenario) error {
	step("warm-up")
	for _, t := range []*target{&e.baseline, &e.bff} {
		path, err := writeScript(e.dir, "warmup-"+t.name, luaScript(sc.req(t), e.opt.conns, 0, e.opt.threads))
		if err != nil {
			return err
		}
		if _, err := e.measure(t, path, time.Second); err != nil {
			return err
		}
	}
	return nil
}
