package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// stormResult is the login storm on one instance: n new users log in at
// once, then each sends its first API request (a token mint per user).
type stormResult struct {
	users        int
	workers      int
	loginTook    time.Duration
	firstTook    time.Duration
	loginErrors  int
	firstErrors  int
	mints        int64   // tokens the stub minted during the first requests
	lockTimeouts float64 // bff_token_lock_wait_seconds_count{result="timeout"} during them
	mintErrors   float64 // bff_token_mints_total{result="error"} during them
	// Redis memory (INFO used_memory) added per session by the logins and
	// per token by the first requests.
	redisPerSession, redisPerToken float64
}

func (s stormResult) sessionsPerSecond() float64 { return float64(s.users) / s.loginTook.Seconds() }
func (s stormResult) firstPerSecond() float64    { return float64(s.users) / s.firstTook.Seconds() }

// exact reports the storm's guarantee: every user got a token, with one
// mint each, no lock wait timed out and no mint failed.
func (s stormResult) exact() bool {
	return s.loginErrors == 0 && s.firstErrors == 0 && s.mints == int64(s.users) && s.lockTimeouts == 0 && s.mintErrors == 0
}

// storm logs in e.opt.stormUsers new users with e.opt.conns concurrent
// clients, then sends each its first request, timing both and counting the
// mints, lock timeouts and Redis memory.
func (e *env) storm() (stormResult, error) {
	r := stormResult{users: e.opt.stormUsers, workers: e.opt.conns}
	mem0, err := e.redis.usedMemory()
	if err != nil {
		return r, err
	}
	start := time.Now()
	sessions := make([]session, r.users)
	r.loginErrors = countErrors(r.users, r.workers, func(i int) error {
		var err error
		sessions[i], err = login(e.bff.base, fmt.Sprintf("storm%d", i))
		return err
	})
	r.loginTook = time.Since(start)
	mem1, err := e.redis.usedMemory()
	if err != nil {
		return r, err
	}
	mints0, err := e.stubMints()
	if err != nil {
		return r, err
	}
	timeouts0, _ := metricValue(e.bff.metricsURL, `bff_token_lock_wait_seconds_count{result="timeout"}`)
	errors0, _ := metricValue(e.bff.metricsURL, `bff_token_mints_total{result="error"}`)
	api := e.bff.base + "/api/v2/payments"
	start = time.Now()
	r.firstErrors = countErrors(r.users, r.workers, func(i int) error {
		code, err := call(http.MethodGet, api, sessions[i])
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("first request of %s: status %d", sessions[i].user, code)
		}
		return err
	})
	r.firstTook = time.Since(start)
	mints1, err := e.stubMints()
	if err != nil {
		return r, err
	}
	timeouts1, _ := metricValue(e.bff.metricsURL, `bff_token_lock_wait_seconds_count{result="timeout"}`)
	errors1, _ := metricValue(e.bff.metricsURL, `bff_token_mints_total{result="error"}`)
	mem2, err := e.redis.usedMemory()
	if err != nil {
		return r, err
	}
	r.mints, r.lockTimeouts, r.mintErrors = mints1-mints0, timeouts1-timeouts0, errors1-errors0
	r.redisPerSession = float64(mem1-mem0) / float64(r.users)
	r.redisPerToken = float64(mem2-mem1) / float64(r.users)
	return r, nil
}

// countErrors runs f(0..n-1) on workers goroutines and counts its errors.
func countErrors(n, workers int, f func(i int) error) int {
	errs := make([]bool, n)
	_ = parallel(n, workers, func(i int) error {
		errs[i] = f(i) != nil
		return nil
	})
	bad := 0
	for _, b := range errs {
		if b {
			bad++
		}
	}
	return bad
}

// usedMemory is INFO memory's used_memory: the bytes Redis holds for data
// and its own structures.
func (r *benchRedis) usedMemory() (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	info, err := r.client.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("redis: INFO memory has no used_memory")
}

// metricValue reads one sample (name with its labels, as exposed) from a
// Prometheus text endpoint; 0 when the series is absent (not yet counted).
func metricValue(url, sample string) (float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, sc.Err()
}
