package main

import (
	"fmt"
	"time"
)

// results is everything the report shows.
type results struct {
	date       time.Time
	scenarios  []scenarioResult
	sweep      []sweepPoint
	revocation revocationResult
	machine    machine
	command    string
	redisDesc  string
	elapsed    time.Duration
}

func (e *env) measureAll() (*results, error) {
	res := &results{date: time.Now().UTC()}
	scs := e.scenarios()
	if err := e.warmUp(scs[0]); err != nil {
		return nil, err
	}
	for _, sc := range scs {
		step(fmt.Sprintf("scenario (%s) %s", sc.key, sc.title))
		r, err := e.runScenario(sc)
		if err != nil {
			return nil, fmt.Errorf("scenario (%s): %w", sc.key, err)
		}
		res.scenarios = append(res.scenarios, r)
	}
	step("constant-rate sweep")
	var err error
	if res.sweep, err = e.sweep(scs[0]); err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	step("revocation latency across two instances")
	if res.revocation, err = e.revocation(); err != nil {
		return nil, fmt.Errorf("revocation: %w", err)
	}
	return res, nil
}

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
