package main

import (
	"fmt"
	"net/http"
	"time"
)

// revocationResult is the logout-on-A to 401-on-B latency over n tries.
type revocationResult struct {
	samples []time.Duration
	gaveUp  int // tries where B still answered after revocationLimit
}

const revocationLimit = 3 * time.Second

// revocation starts a second BFF on the same Redis, prefix and keys, and
// for each try: logs in on A, warms both instances' caches, logs out on A
// and polls B every millisecond until it answers 401. The clock starts when
// A's 204 arrives.
func (e *env) revocation() (revocationResult, error) {
	var r revocationResult
	b, err := e.startBFF("bff-b")
	if err != nil {
		return r, err
	}
	defer b.proc.stop(5 * time.Second)
	a := e.bff
	for i := range e.opt.revocations {
		d, err := revokeOnce(a.base, b.base, fmt.Sprintf("revoke%d", i))
		if err != nil {
			return r, err
		}
		if d > revocationLimit {
			r.gaveUp++
		}
		r.samples = append(r.samples, d)
	}
	return r, nil
}

func revokeOnce(a, b, user string) (time.Duration, error) {
	s, err := login(a, user)
	if err != nil {
		return 0, err
	}
	for _, u := range []string{a, b, a, b} {
		if code, err := call(http.MethodGet, u+"/api/v2/payments", s); err != nil || code != http.StatusOK {
			return 0, fmt.Errorf("warm %s: status %d, %v", u, code, err)
		}
	}
	code, err := call(http.MethodPost, a+"/auth/logout", s)
	if err != nil || code != http.StatusNoContent {
		return 0, fmt.Errorf("logout on A: status %d, %v", code, err)
	}
	t0 := time.Now()
	for {
		code, err := call(http.MethodGet, b+"/api/v2/payments", s)
		if err != nil {
			return 0, err
		}
		if code == http.StatusUnauthorized {
			return time.Since(t0), nil
		}
		if time.Since(t0) > revocationLimit {
			return time.Since(t0), nil
		}
		time.Sleep(time.Millisecond)
	}
}
