package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// target is one proxy under load: the baseline or a BFF.
type target struct {
	name       string
	base       string // http://host:port
	apiPrefix  string // "/api" for the BFF
	proc       *proc
	metricsURL string
	adminURL   string // the BFF's admin listener
}

// env is everything the run set up.
type env struct {
	opt   options
	ps    *procSet
	dir   string
	redis *benchRedis
	// afterPause are the paced rounds after -pause (prepareMany).
	afterPause []roundResult
	keyPrefix  string
	stubURL    string

	baseline, bff target

	steady     session   // the steady-state user
	many       []session // u0..u(users-1), each used once
	fresh      []session // logged in, never called the API
	manyFile   string    // Cookie values of many
	freshFile  string    // Cookie values of fresh
	selfBinary string

	payDB *benchDB // the payments section's ledger database, dropped at the end
	// runTail is a wait after each wrk run before its readings, for the
	// requests it left in flight (the payments section); 0: none.
	runTail time.Duration
}

func (e *env) setUp() error {
	var err error
	if e.selfBinary, err = os.Executable(); err != nil {
		return err
	}
	step("redis")
	if e.redis, err = startRedis(e.ps, e.dir); err != nil {
		return err
	}
	e.keyPrefix = "bffbench:" + randomHex(4) + ":"
	step("upstream stub")
	if err := e.startStub(); err != nil {
		return err
	}
	step("baseline proxy")
	if err := e.startBaseline(); err != nil {
		return err
	}
	if e.onlyPayments() {
		// The payments section starts its own BFF, with the ledger.
		return nil
	}
	step("BFF")
	if e.bff, err = e.startBFF("bff-a"); err != nil {
		return err
	}
	return e.createSessions()
}

// cleanUp stops every process the run started, drops its Redis keys and
// removes the work directory (unless -keep).
func (e *env) cleanUp() {
	e.ps.stopAll()
	if e.payDB != nil {
		e.payDB.drop()
	}
	if e.redis != nil {
		if !e.redis.private {
			e.redis.dropPrefix(e.keyPrefix)
		}
		_ = e.redis.client.Close()
	}
	if !e.opt.keepDir {
		_ = os.RemoveAll(e.dir)
	}
}

func step(what string) { fmt.Printf("%s  %s\n", time.Now().Format("15:04:05"), what) }

func (e *env) startStub() error {
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	p, err := e.ps.start("stub", filepath.Join(e.dir, "stub.log"), e.selfBinary, "stub", "-addr", addr)
	if err != nil {
		return err
	}
	e.stubURL = "http://" + addr
	return waitReady(p, 10*time.Second, tcpCheck(addr))
}

func (e *env) startBaseline() error {
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	maddr, err := freeAddr()
	if err != nil {
		return err
	}
	p, err := e.ps.start("baseline", filepath.Join(e.dir, "baseline.log"), e.selfBinary, "baseline",
		"-addr", addr, "-metrics", maddr, "-upstream", e.stubURL)
	if err != nil {
		return err
	}
	e.baseline = target{name: "baseline", base: "http://" + addr, proc: p, metricsURL: "http://" + maddr + "/metrics"}
	if err := waitReady(p, 10*time.Second, tcpCheck(addr)); err != nil {
		return err
	}
	return waitReady(p, 5*time.Second, httpOK(e.baseline.base+"/v2/payments"))
}

// startBFF starts one BFF instance on fresh ports, same Redis, prefix and keys.
func (e *env) startBFF(name string) (target, error) { return e.startBFFEnv(name, nil) }

// startBFFEnv is startBFF with more environment variables (OTEL_*).
func (e *env) startBFFEnv(name string, env []string) (target, error) {
	return e.startBFFWith(name, env, nil)
}

// startBFFWith is startBFFEnv with its configuration changed by tweak
// (the payments section's ledger).
func (e *env) startBFFWith(name string, env []string, tweak func(*bffConfig)) (target, error) {
	listen, err := freeAddr()
	if err != nil {
		return target{}, err
	}
	admin, err := freeAddr()
	if err != nil {
		return target{}, err
	}
	cfg := bffConfig{listen: listen, admin: admin, upstream: e.stubURL, redisAddr: e.redis.addr, keyPrefix: e.keyPrefix, pprof: e.opt.profile != "", idleTimeout: e.opt.idleTimeout}
	if tweak != nil {
		tweak(&cfg)
	}
	cfgPath := filepath.Join(e.dir, name+".yaml")
	if err := cfg.write(cfgPath); err != nil {
		return target{}, err
	}
	p, err := e.ps.startEnv(name, filepath.Join(e.dir, name+".log"), env, e.opt.bffBin, "-config", cfgPath)
	if err != nil {
		return target{}, err
	}
	t := target{name: "BFF", base: "http://" + listen, apiPrefix: "/api", proc: p, metricsURL: "http://" + admin + "/metrics", adminURL: "http://" + admin}
	return t, waitReady(p, 20*time.Second, httpOK("http://"+admin+"/readyz"))
}

// createSessions logs in the steady-state user (primed) and the fresh
// users (not primed). The round-robin users come just before their
// scenario (prepareMany), so the scenarios before it run with a heap that
// holds one user.
func (e *env) createSessions() error {
	var err error
	base := e.bff.base
	api := base + "/api/v2/payments"
	if e.steady, err = login(base, "steady"); err != nil {
		return err
	}
	if err := primeMany(api, []session{e.steady}, 1); err != nil {
		return err
	}
	step(fmt.Sprintf("log in %d users", e.opt.freshUsers))
	if e.fresh, err = loginMany(base, "fresh", e.opt.freshUsers, 32); err != nil {
		return err
	}
	e.manyFile = filepath.Join(e.dir, "many.txt")
	e.freshFile = filepath.Join(e.dir, "fresh.txt")
	return writeLines(e.freshFile, e.fresh, func(s session) string { return s.cookie })
}

// prepareMany logs in the round-robin users and primes their tokens.
func (e *env) prepareMany() error {
	var err error
	step(fmt.Sprintf("log in %d users", e.opt.users))
	if e.many, err = loginMany(e.bff.base, "u", e.opt.users, 32); err != nil {
		return err
	}
	step(fmt.Sprintf("prime the tokens of %d users", e.opt.users))
	if err := primeMany(e.bff.base+"/api/v2/payments", e.many, 32); err != nil {
		return err
	}
	// Once more: Redis reports each instance's own writes back to it
	// too, so the copy a login or a mint kept was dropped by the report
	// of its own write; the second request of each user re-reads and
	// keeps it, as every user's has been in a steady state.
	step(fmt.Sprintf("second request of each of the %d users", e.opt.users))
	if err := primeMany(e.bff.base+"/api/v2/payments", e.many, 32); err != nil {
		return err
	}
	if e.opt.pause > 0 {
		step(fmt.Sprintf("idle for %v", e.opt.pause))
		time.Sleep(e.opt.pause)
		if e.opt.pacedRounds > 0 {
			if e.afterPause, err = e.pacedRounds(e.opt.pacedRounds, e.opt.roundEvery); err != nil {
				return err
			}
		}
	}
	return writeLines(e.manyFile, e.many, func(s session) string { return s.cookie })
}

// stubMints is the number of tokens the stub has minted so far.
func (e *env) stubMints() (int64, error) {
	resp, err := http.Get(e.stubURL + "/_stats")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var s struct {
		Mints int64 `json:"mints"`
	}
	err = json.NewDecoder(resp.Body).Decode(&s)
	return s.Mints, err
}

// truncateLog empties a process's log (the BFF's access log grows fast);
// the file is open in append mode, so writing goes on at the new end.
func truncateLog(p *proc) { _ = os.Truncate(p.log, 0) }
