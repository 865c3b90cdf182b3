//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fintech-bff/bff/internal/testing/redistest"
	"github.com/fintech-bff/bff/internal/upstreamsim"
)

// chaosSettings are the run's bounds: a short run in make test, a long one
// in make chaos (BFF_CHAOS_DURATION, BFF_CHAOS_USERS).
func chaosSettings(t *testing.T) (time.Duration, int) {
	dur, users := 15*time.Second, 12
	if v := os.Getenv("BFF_CHAOS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > 30*time.Minute {
			t.Fatalf("BFF_CHAOS_DURATION=%q: want a duration up to 30m", v)
		}
		dur = d
	}
	if v := os.Getenv("BFF_CHAOS_USERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			t.Fatalf("BFF_CHAOS_USERS=%q: want 1 to 1000", v)
		}
		users = n
	}
	return dur, users
}

// keyResult is how one logical payment (one Idempotency-Key) ended for its
// client.
type keyResult struct {
	user, key string
	outcome   string // paid, unknown, failed, gave_up
	paymentID string // the id a 201 named
	attempts  int
	took      time.Duration // from the first attempt to the final answer
	sawFault  bool          // at least one attempt failed before the end
	// settledLater: told unknown during the run, paid on a repeat after it.
	settledLater bool
}

// TestPaymentsUnderFaults is the fault-injection run: three instances
// behind HAProxy, users paying with a fresh key each and retrying with the
// same key on any failure, while instances are killed and frozen, Redis
// restarts empty, and the upstream drops, delays or fails payment answers.
// It counts logical payments against the upstream's payments and fails on
// any duplicate, and on any key answered 201 that has no payment.
func TestPaymentsUnderFaults(t *testing.T) {
	dur, users := chaosSettings(t)
	rs := redistest.StartServer(t)
	o := options{redisAddr: rs.Addr, upstream: "timeout: 2s"}
	a := start(t, o)
	instances := []*env{a, a.another(o), a.another(o)}
	front := startLB(t, instances).through(a)

	var mu sync.Mutex
	var results []keyResult
	faults := map[string]int{}
	stop := time.Now().Add(dur)

	var wg sync.WaitGroup
	for u := 0; u < users; u++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := fmt.Sprintf("chaos-%d", u)
			token := ""
			for n := 0; time.Now().Before(stop); n++ {
				key := fmt.Sprintf("%s-%d", user, n)
				res := payWithRetries(front, user, key, &token)
				mu.Lock()
				results = append(results, res)
				mu.Unlock()
			}
		}()
	}

	// The injector: one fault every 1.5 s, in turn, until the run ends.
	rng := rand.New(rand.NewPCG(1, 2))
	kinds := []string{"kill instance", "freeze instance 3s", "upstream hangs up after acting",
		"upstream answers late (past the timeout)", "upstream 500 before acting", "redis restart (all keys lost)",
		"upstream acts, then answers 401", "upstream hangs up before acting"}
	for i := 0; time.Now().Add(1500 * time.Millisecond).Before(stop); i++ {
		time.Sleep(1500 * time.Millisecond) // deliberate: the faults' pace
		kind := kinds[i%len(kinds)]
		faults[kind]++
		switch i % len(kinds) {
		case 0:
			victim := instances[rng.IntN(len(instances))]
			victim.kill()
			time.Sleep(time.Second) // deliberate: the instance stays dead a second
			victim.relaunch()
		case 1:
			victim := instances[rng.IntN(len(instances))]
			_ = victim.cmd.Process.Signal(syscall.SIGSTOP)
			time.Sleep(3 * time.Second) // deliberate: the freeze lasts past the lease and the timeouts
			_ = victim.cmd.Process.Signal(syscall.SIGCONT)
		case 2:
			a.sim.InjectFault(upstreamsim.Fault{Method: "POST", PathPrefix: "/v2/payments", AfterActing: true, HangUp: true, Times: 1})
		case 3:
			a.sim.InjectFault(upstreamsim.Fault{Method: "POST", PathPrefix: "/v2/payments", AfterActing: true, Delay: 3 * time.Second, Times: 1})
		case 4:
			a.sim.InjectFault(upstreamsim.Fault{Method: "POST", PathPrefix: "/v2/payments", Status: 500, Times: 1})
		case 5:
			rs.Restart(t)
		case 6:
			a.sim.InjectFault(upstreamsim.Fault{Method: "POST", PathPrefix: "/v2/payments", AfterActing: true, Status: 401, Times: 1})
		case 7:
			a.sim.InjectFault(upstreamsim.Fault{Method: "POST", PathPrefix: "/v2/payments", HangUp: true, Times: 1})
		}
	}
	wg.Wait()
	a.sim.ClearFaults()

	// With the faults over, a client that was told the outcome is unknown
	// repeats the key once (as after checking the payment list): the BFF
	// settles it from the upstream where it can.
	settledLater := 0
	for i, r := range results {
		if r.outcome != "unknown" {
			continue
		}
		again, err := front.app(tryLogin(front, r.user)).try("POST", "/api/v2/payments", fmt.Sprintf(validPayment, r.key), "Idempotency-Key", r.key)
		if err == nil && again.status == 201 {
			results[i].outcome, results[i].settledLater = "paid", true
			results[i].paymentID = paidID(again.body)
			settledLater++
		}
	}

	// Count each key's payments at the upstream.
	byUser := map[string][]string{}
	var paid, unknown, unknownButMade, failed, gaveUp, duplicates, phantom, falseOutcomes, withFault, made int
	var recoveries []time.Duration
	for _, r := range results {
		have, ok := byUser[r.user]
		if !ok {
			have = a.sim.PaymentRemittances(r.user)
			byUser[r.user] = have
		}
		n := count(have, r.key)
		made += n
		if n > 1 {
			duplicates++
			t.Errorf("key %s made %d payments", r.key, n)
		}
		switch r.outcome {
		case "paid":
			paid++
			if n != 1 {
				phantom++
				t.Errorf("key %s was answered 201 but the upstream holds %d payments for it", r.key, n)
			}
			// A true 201 names the payment this key made, never another.
			if rem, ok := a.sim.PaymentRemittance(r.user, r.paymentID); !ok || rem != r.key {
				falseOutcomes++
				t.Errorf("key %s was answered 201 with payment %q, which the upstream holds for %q (found: %v)", r.key, r.paymentID, rem, ok)
			}
		case "unknown":
			unknown++
			unknownButMade += n
		case "failed":
			failed++
		default:
			gaveUp++
		}
		if r.sawFault {
			withFault++
			recoveries = append(recoveries, r.took)
		}
	}
	sort.Slice(recoveries, func(i, j int) bool { return recoveries[i] < recoveries[j] })
	pct := func(p float64) time.Duration {
		if len(recoveries) == 0 {
			return 0
		}
		return recoveries[int(p*float64(len(recoveries)-1))]
	}
	kindsSeen := make([]string, 0, len(faults))
	for k, n := range faults {
		kindsSeen = append(kindsSeen, fmt.Sprintf("%s ×%d", k, n))
	}
	sort.Strings(kindsSeen)
	report := fmt.Sprintf("chaos run: %v, %d users, 3 instances behind HAProxy\n"+
		"faults: %s\n"+
		"logical payments: %d; paid %d (%d of them told unknown during the run, settled on a repeat after it),\n"+
		"  still unknown %d (of which the upstream made %d), failed %d, gave up %d\n"+
		"payments the upstream holds for these keys: %d; keys paid twice: %d; 201 without a payment: %d; 201 naming another payment: %d\n"+
		"final unknowns in the ledger, by reason: %s\n"+
		"payments that met a fault: %d; time to their final answer p50 %v, p90 %v, max %v\n",
		dur, users, strings.Join(kindsSeen, ", "), len(results), paid, settledLater, unknown, unknownButMade, failed, gaveUp,
		made, duplicates, phantom, falseOutcomes, unknownReasons(t, a), withFault, pct(0.5), pct(0.9), pct(1))
	t.Log(report)
	if path := os.Getenv("BFF_CHAOS_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
			t.Error(err)
		}
	}
	if paid == 0 || withFault == 0 {
		t.Fatalf("%d paid, %d met a fault: the run proved nothing", paid, withFault)
	}
}

// payWithRetries is a careful client: one key per logical payment, the same
// key on every retry, retrying on connection errors, 409, 5xx and timeouts
// (at most 60 s), logging in again when its session is gone.
func payWithRetries(front *env, user, key string, token *string) keyResult {
	res := keyResult{user: user, key: key, outcome: "gave_up"}
	body := fmt.Sprintf(validPayment, key)
	start := time.Now()
	for time.Since(start) < 60*time.Second {
		res.attempts++
		if *token == "" {
			*token = tryLogin(front, user)
			if *token == "" {
				res.sawFault = true
				time.Sleep(200 * time.Millisecond) // a client's pace between logins
				continue
			}
		}
		r, err := front.app(*token).try("POST", "/api/v2/payments", body, "Idempotency-Key", key)
		switch {
		case err != nil:
		case r.status == 201:
			res.outcome, res.took, res.paymentID = "paid", time.Since(start), paidID(r.body)
			return res
		case r.status == 502 && strings.Contains(string(r.body), "PAYMENT_OUTCOME_UNKNOWN"):
			res.outcome, res.took = "unknown", time.Since(start)
			return res
		case r.status == 401:
			*token = ""
		case r.status == 409 || r.status >= 500:
		default:
			res.outcome, res.took = "failed", time.Since(start)
			return res
		}
		res.sawFault = true
		time.Sleep(time.Duration(100+rand.IntN(200)) * time.Millisecond) // a client's jittered pace between retries
	}
	res.took = time.Since(start)
	return res
}

func tryLogin(front *env, user string) string {
	r, err := front.browser().try("POST", "/auth/dev/login", fmt.Sprintf(`{"userId":%q}`, user))
	if err != nil || r.status != 200 {
		return ""
	}
	var v struct{ SessionToken string }
	_ = json.Unmarshal(r.body, &v)
	return v.SessionToken
}

// paidID is the payment id a 201 names.
func paidID(body []byte) string {
	var v struct{ ID string }
	_ = json.Unmarshal(body, &v)
	return v.ID
}

// unknownReasons lists the ledger's unknown rows by ending, each with the
// requests that claimed them, for the run's report.
func unknownReasons(t *testing.T, e *env) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, e.ledgerURL)
	if err != nil {
		t.Error(err)
		return "(ledger unreadable)"
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT coalesce(ending, ''), count(*), string_agg(idem_key, ' ' ORDER BY idem_key)
FROM money_requests WHERE state = 'unknown' GROUP BY 1 ORDER BY 1`)
	if err != nil {
		t.Error(err)
		return "(ledger unreadable)"
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var ending, keys string
		var n int
		if err := rows.Scan(&ending, &n, &keys); err != nil {
			t.Error(err)
			break
		}
		out = append(out, fmt.Sprintf("%s ×%d (%s)", ending, n, keys))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}
