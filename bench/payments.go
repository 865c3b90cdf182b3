package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The payments section (make bench-payments, -only payments): keyed
// payment creations through a BFF with the PostgreSQL ledger and Redis,
// against the bare proxy's plain POST of the same request, in one run.
// A creation through the BFF reads the user's payment list (the
// snapshot, a GET to the upstream), claims its key in the ledger, writes
// its send mark, sends the POST once and stores the outcome; a repeat of
// the key answers the stored outcome. Per row: payments per second at
// saturation (wrk -c64, closed loop), then constant rates at fractions of
// it (the baseline at the same rates), with the CPU, ledger transactions
// and Redis commands per payment.

// payBody is the payment each request makes (docs/payments.md, "The
// payment model").
const payBody = `{"paymentInformation":{"amount":"10.00","currency":"EUR","creditorName":"Bench","creditorAccount":{"iban":"DE89370400440532013000"}},"redirectUrl":"https://example.com/done"}`

// payRunTail is the wait after each of the section's runs before its
// readings: the requests wrk left in flight end meanwhile.
const payRunTail = 300 * time.Millisecond

// payRun is one wrk run of the section and what it cost.
type payRun struct {
	label   string
	target  string
	offered float64 // req/s; 0 at saturation
	m       runMetrics
	// pgCPU is the µs of CPU per request of the server processes of the
	// ledger's database, upstream the BFF's upstream calls per request
	// (NaN for the baseline), busy the share of the machine's cores busy
	// over the run (every process, the other engineers' included).
	pgCPU, upstream, busy float64
	// ok is the answers in 2xx per second (payments made, or repeats
	// answered); handled the requests the proxy handled in the run (the
	// BFF's own count), by which the costs above and cpu and redis are
	// divided.
	ok, handled, cpu, redis float64
	// redisCmds are the Redis commands over the run and its tail (every
	// client's: the BFF's background ones too), over redisSecs: redis is
	// made net of the background once it is known (netRedis). secs is
	// wrk's run.
	redisCmds       int64
	secs, redisSecs float64
}

// payPoint is one constant rate: the baseline, then the BFF.
type payPoint struct {
	fraction, rate float64
	base, bff      payRun
}

// payBlock is one row of the section: creations, or repeats of a key.
// Its ledger figures are counted over a window that starts and ends with
// PostgreSQL's counters settled, around all of its BFF runs.
type payBlock struct {
	name      string
	sat       []payRun // the BFF at saturation, each round
	satMedian payRun
	points    []payPoint
	requests  int64 // the money requests the BFF handled in the window
	window    time.Duration
	xacts     int64
	stmts     float64 // NaN without pg_stat_statements
	results   map[string]float64
}

// xactsPer is the ledger's transactions per request, less the BFF's
// background transactions over the window.
func (b payBlock) xactsPer(idlePerSec float64) float64 {
	if b.requests == 0 {
		return math.NaN()
	}
	return (float64(b.xacts) - idlePerSec*b.window.Seconds()) / float64(b.requests)
}

// paymentsResult is everything the section reports.
type paymentsResult struct {
	date           time.Time
	users, conns   int
	baseSat        []payRun
	baseSatMedian  payRun
	create, repeat payBlock
	idlePerSec     float64 // the ledger's transactions per second with the BFF idle
	idleWindow     time.Duration
	// idleRedisPerSec are the Redis commands per second of the idle BFF.
	idleRedisPerSec float64
	db              benchDB
	diagnosis       string // -profile payments: what bounds the BFF at saturation
	bound           bound  // its figures the section states
	loadStart       string
	loadEnd         string
	elapsed         time.Duration
}

// payScripts renders the section's wrk scripts.
type payScripts struct {
	e           *env
	usersFile   string // cookie values
	repeatsFile string // cookie, tab, the key of that user's payment
	run         string // this run's prefix of every key
	next        map[string]int64
}

func (s *payScripts) request(t *target, repeat bool) request {
	r := request{method: http.MethodPost, path: t.apiPrefix + "/v2/payments", body: payBody,
		headers: map[string]string{"Content-Type": "application/json", "X-CSRF": "1"}}
	if repeat {
		r.rotate = &rotation{header: "Cookie", prefix: cookieName + "=", file: s.repeatsFile, second: "Idempotency-Key"}
	} else {
		r.rotate = &rotation{header: "Cookie", prefix: cookieName + "=", file: s.usersFile}
	}
	// The baseline gets a key too: the same request, which it passes on.
	r.fresh = &freshKey{header: "Idempotency-Key", prefix: s.run}
	if repeat {
		r.fresh = nil
	}
	return r
}

// script writes the script of one run; each run goes on with the users
// where the target's previous run stopped, and its keys are its own.
func (s *payScripts) script(t *target, label string, repeat bool, rate float64) (string, error) {
	req := s.request(t, repeat)
	req.rotate.start = s.next[t.name]
	if req.fresh != nil {
		req.fresh.prefix += label + "-"
	}
	name := strings.NewReplacer(" ", "-", "%", "pct").Replace("pay-" + t.name + "-" + label)
	return writeScript(s.e.dir, name, luaScript(req, s.e.opt.conns, rate, s.e.opt.threads))
}

func (e *env) payments() (*paymentsResult, error) {
	o := e.opt.pay
	start := time.Now()
	r := &paymentsResult{date: start.UTC(), users: o.users, conns: e.opt.conns, loadStart: loadAvg()}
	step("PostgreSQL: a fresh database for the ledger")
	db, err := createBenchDB(o.postgres)
	if err != nil {
		return nil, err
	}
	e.payDB = db
	// The readings after a run wait for the requests wrk left in flight.
	e.runTail = payRunTail
	defer func() { e.runTail = 0 }()
	step(fmt.Sprintf("database %s (%s); pg_stat_statements: %s", db.name, db.settings, yesOr(db.statements, db.statementsWhy)))
	step("BFF with the PostgreSQL ledger")
	bff, err := e.startBFFWith("bff-pay", nil, func(c *bffConfig) {
		c.ledgerURL, c.ledgerMaxConns = db.url, o.maxConns
		c.pprof = c.pprof || e.profiling("payments")
	})
	if err != nil {
		return nil, err
	}
	s, err := e.payUsers(&bff)
	if err != nil {
		return nil, err
	}
	step("warm-up")
	for _, t := range []*target{&e.baseline, &bff} {
		path, err := s.script(t, "warmup", false, 0)
		if err != nil {
			return nil, err
		}
		m, err := e.measure(t, path, time.Second)
		if err != nil {
			return nil, err
		}
		s.next[t.name] += m.wrk.Requests
	}
	if err := e.idleLedger(r, o.settle); err != nil {
		return nil, err
	}
	run := func(t *target, label string, repeat bool, rate float64, dur time.Duration) (payRun, error) {
		path, err := s.script(t, label, repeat, rate)
		if err != nil {
			return payRun{}, err
		}
		pr, err := e.payMeasure(t, path, dur, t != &e.baseline)
		if err != nil {
			return pr, fmt.Errorf("%s %s: %w", t.name, label, err)
		}
		pr.label, pr.target, pr.offered = label, t.name, rate
		s.next[t.name] += pr.m.wrk.Requests
		logPayRun(pr)
		return pr, nil
	}
	step(fmt.Sprintf("keyed creations: %d rounds at saturation, baseline and BFF interleaved", o.rounds))
	r.create.name = "keyed creation"
	err = e.payBlock(&r.create, bff.metricsURL, o.settle, r.idlePerSec, func(b *payBlock) error {
		for i := range o.rounds {
			base, err := run(&e.baseline, fmt.Sprintf("sat%d", i+1), false, 0, o.dur)
			if err != nil {
				return err
			}
			r.baseSat = append(r.baseSat, base)
			pr, err := run(&bff, fmt.Sprintf("sat%d", i+1), false, 0, o.dur)
			if err != nil {
				return err
			}
			b.sat = append(b.sat, pr)
		}
		b.satMedian = medianPayRun(b.sat)
		return e.payRates(b, o, &bff, func(t *target, label string, rate float64) (payRun, error) {
			return run(t, label, false, rate, o.rateDur)
		})
	})
	if err != nil {
		return nil, err
	}
	r.baseSatMedian = medianPayRun(r.baseSat)
	step(fmt.Sprintf("repeats of a key: %d rounds at saturation", o.rounds))
	r.repeat.name = "repeat of a key"
	err = e.payBlock(&r.repeat, bff.metricsURL, o.settle, r.idlePerSec, func(b *payBlock) error {
		for i := range o.rounds {
			pr, err := run(&bff, fmt.Sprintf("rsat%d", i+1), true, 0, o.dur)
			if err != nil {
				return err
			}
			b.sat = append(b.sat, pr)
		}
		b.satMedian = medianPayRun(b.sat)
		return e.payRates(b, o, &bff, func(t *target, label string, rate float64) (payRun, error) {
			// The baseline has no repeat: the same plain POST.
			return run(t, "r"+label, t != &e.baseline, rate, o.rateDur)
		})
	})
	if err != nil {
		return nil, err
	}
	if e.profiling("payments") {
		step("diagnosis: one more run of creations at saturation, with the BFF's CPU profile and goroutines, and the ledger's wait events")
		if r.diagnosis, r.bound, err = e.payDiagnosis(&bff, s, o.dur); err != nil {
			return nil, err
		}
	}
	r.netRedis()
	r.db = *db
	r.loadEnd = loadAvg()
	r.elapsed = time.Since(start)
	return r, nil
}

// netRedis makes the BFF's Redis commands per payment net of its
// background ones (leases, canaries: a rate that does not follow the
// load), as counted over the baseline runs, when the BFF idles.
func (r *paymentsResult) netRedis() {
	var rates []float64
	var all []*payRun
	for i := range r.baseSat {
		rates = append(rates, float64(r.baseSat[i].redisCmds)/r.baseSat[i].redisSecs)
	}
	for _, blk := range []*payBlock{&r.create, &r.repeat} {
		for i := range blk.points {
			pt := &blk.points[i]
			rates = append(rates, float64(pt.base.redisCmds)/pt.base.redisSecs)
			all = append(all, &pt.bff)
		}
		for i := range blk.sat {
			all = append(all, &blk.sat[i])
		}
	}
	r.idleRedisPerSec = median(rates)
	for _, pr := range all {
		pr.redis = max(0, float64(pr.redisCmds)-r.idleRedisPerSec*pr.redisSecs) / pr.handled
	}
	r.create.satMedian = medianPayRun(r.create.sat)
	r.repeat.satMedian = medianPayRun(r.repeat.sat)
}

// bound is what the diagnosis run found, for the section's text.
type bound struct {
	rps                        float64
	handlers, waitingForConn   float64 // payment handlers, and those waiting for a ledger connection (per snapshot)
	notify, wal, running, busy float64 // waitSampler.shares
}

// payDiagnosis runs creations at saturation once more (not in the
// figures) and looks at what bounds them: the BFF's CPU profile, where
// its goroutines wait (three snapshots, summed), and what the ledger
// database's server processes do (sampled every 10 ms).
func (e *env) payDiagnosis(bff *target, s *payScripts, dur time.Duration) (string, bound, error) {
	var bd bound
	path, err := s.script(bff, "diagnosis", false, 0)
	if err != nil {
		return "", bd, err
	}
	waits, err := e.payDB.sampleWaits(10 * time.Millisecond)
	if err != nil {
		return "", bd, err
	}
	prof := e.startProfile(bff, "payments", dur)
	var snaps []string
	snapped := make(chan error, 1)
	go func() {
		for i := 1; i <= 3; i++ {
			time.Sleep(dur / 4)
			p := filepath.Join(e.dir, fmt.Sprintf("goroutines-%d.pprof", i))
			if err := fetchTo(bff.adminURL+"/debug/pprof/goroutine", p); err != nil {
				snapped <- err
				return
			}
			snaps = append(snaps, p)
		}
		snapped <- nil
	}()
	m, err := e.measure(bff, path, dur)
	if err != nil {
		return "", bd, err
	}
	waitText, err := waits.finish()
	if err != nil {
		return "", bd, err
	}
	if err := <-snapped; err != nil {
		return "", bd, err
	}
	cpu, err := prof.summary(25)
	if err != nil {
		return "", bd, err
	}
	// The payment handlers' goroutines only, less the frames every
	// request has (the server, the middleware, the runtime's parking).
	args := append([]string{"tool", "pprof", "-top", "-cum", "-nodecount=30", "-focus=MoneyPath",
		"-hide=^runtime\\.|^net/http\\.|^net\\.|labstack|internal/edge\\.|internal/poll|^sync|^bufio|^io\\.|semaphore|puddle|^context"}, snaps...)
	gor, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		return "", bd, fmt.Errorf("go tool pprof: %w\n%s", err, gor)
	}
	bd.rps = m.rps
	bd.notify, bd.wal, bd.running, bd.busy = waits.shares()
	snapsN := float64(max(len(snaps), 1))
	bd.handlers = cumOf(string(gor), "payments.(*MoneyPath).serve") / snapsN
	bd.waitingForConn = cumOf(string(gor), "pgxpool.(*Pool).Acquire") / snapsN
	var b strings.Builder
	fmt.Fprintf(&b, "The run: %.0f req/s, %d non-2xx, p50 %.2f ms, p99 %.2f ms.\n\n", m.rps, m.wrk.Status, m.wrk.P50/1000, m.wrk.P99/1000)
	b.WriteString("What the ledger database's server processes did (pg_stat_activity every 10 ms):\n")
	b.WriteString(waitText)
	b.WriteString("\nWhere the BFF's payment handlers waited (three goroutine profiles, summed; cum is the goroutines inside the function; pgxpool.(*Pool).Acquire is waiting for a ledger connection):\n")
	b.Write(gor)
	b.WriteString("\n")
	b.WriteString(cpu)
	return b.String(), bd, nil
}

// cumOf is the cum column of the line of pprof -top output that names fn.
func cumOf(top, fn string) float64 {
	for line := range strings.Lines(top) {
		f := strings.Fields(line)
		if len(f) >= 6 && strings.HasSuffix(f[5], fn) {
			v, err := strconv.ParseFloat(f[3], 64)
			if err == nil {
				return v
			}
		}
	}
	return 0
}

// fetchTo saves what url answers in path.
func fetchTo(url, path string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// profiling reports whether -profile names the part.
func (e *env) profiling(part string) bool {
	return slices.Contains(strings.Split(e.opt.profile, ","), part)
}

// payUsers logs in the section's users on the BFF, mints their tokens,
// and makes one payment per user with a key of its own for the repeats.
func (e *env) payUsers(bff *target) (*payScripts, error) {
	n := e.opt.pay.users
	step(fmt.Sprintf("log in %d users and mint their tokens", n))
	users, err := loginMany(bff.base, "payer", n, 32)
	if err != nil {
		return nil, err
	}
	if err := primeMany(bff.base+"/api/v2/payments", users, 32); err != nil {
		return nil, err
	}
	s := &payScripts{e: e, usersFile: filepath.Join(e.dir, "payers.txt"), repeatsFile: filepath.Join(e.dir, "repeats.txt"),
		run: "bench-" + randomHex(6) + "-", next: map[string]int64{}}
	if err := writeLines(s.usersFile, users, func(u session) string { return u.cookie }); err != nil {
		return nil, err
	}
	step(fmt.Sprintf("one payment per user, with the key its repeats send (%d)", n))
	keys := make([]string, n)
	err = parallel(n, 8, func(i int) error {
		keys[i] = s.run + "repeat-" + strconv.Itoa(i)
		// As an app does: a 503 (the ledger shed it) or a 409 (still in
		// progress) is sent again with the same key.
		for try := 0; ; try++ {
			code, err := pay(bff.base+"/api/v2/payments", users[i], keys[i])
			switch {
			case err != nil:
				return err
			case code == http.StatusCreated:
				return nil
			case (code == http.StatusServiceUnavailable || code == http.StatusConflict) && try < 20:
				time.Sleep(100 * time.Millisecond)
			default:
				return fmt.Errorf("payment of %s: status %d", users[i].user, code)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	for i, u := range users {
		b.WriteString(u.cookie + "\t" + keys[i] + "\n")
	}
	return s, os.WriteFile(s.repeatsFile, []byte(b.String()), 0o600)
}

// pay sends one payment with the session's cookie and the key.
func pay(url string, s session, key string) (int, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(payBody))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Cookie", s.cookieHeader())
	req.Header.Set("X-CSRF", "1")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// idleLedger counts the ledger's transactions with the BFF idle, over
// a settle, once the warm-up's are flushed: what every window holds
// besides its payments.
func (e *env) idleLedger(r *paymentsResult, settle time.Duration) error {
	step(fmt.Sprintf("PostgreSQL's counters settle (%s), then %s idle", settle, settle))
	time.Sleep(settle)
	c0, err := e.payDB.read()
	if err != nil {
		return err
	}
	t0 := time.Now()
	time.Sleep(settle)
	c1, err := e.payDB.read()
	if err != nil {
		return err
	}
	r.idleWindow = time.Since(t0)
	r.idlePerSec = float64(c1.xacts-c0.xacts) / r.idleWindow.Seconds()
	return nil
}

// payBlock runs body inside a counting window of b: PostgreSQL's
// counters and the money results read before, and after a settle.
func (e *env) payBlock(b *payBlock, metricsURL string, settle time.Duration, idlePerSec float64, body func(b *payBlock) error) error {
	c0, err := e.payDB.read()
	if err != nil {
		return err
	}
	res0, err := metricByLabel(metricsURL, "bff_money_requests_total", "result")
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := body(b); err != nil {
		return err
	}
	step(fmt.Sprintf("PostgreSQL's counters settle (%s)", settle))
	time.Sleep(settle)
	c1, err := e.payDB.read()
	if err != nil {
		return err
	}
	b.window = time.Since(t0)
	res1, err := metricByLabel(metricsURL, "bff_money_requests_total", "result")
	if err != nil {
		return err
	}
	b.results = map[string]float64{}
	for k, v := range res1 {
		if d := v - res0[k]; d != 0 {
			b.results[k] = d
		}
	}
	b.xacts = c1.xacts - c0.xacts
	b.stmts = c1.statements - c0.statements
	for _, v := range b.results {
		b.requests += int64(v)
	}
	step(fmt.Sprintf("%s: %.2f ledger transactions per request (%d in %s over %d requests, less %.2f/s idle)",
		b.name, b.xactsPer(idlePerSec), b.xacts, b.window.Round(time.Second), b.requests, idlePerSec))
	return nil
}

// payRates runs the baseline then the BFF at each fraction of the block's
// saturation rate.
func (e *env) payRates(b *payBlock, o payOptions, bffT *target, run func(t *target, label string, rate float64) (payRun, error)) error {
	for _, f := range o.fractions {
		rate := math.Round(f * b.satMedian.ok)
		label := fmt.Sprintf("%.0fpct", f*100)
		base, err := run(&e.baseline, label, rate)
		if err != nil {
			return err
		}
		bff, err := run(bffT, label, rate)
		if err != nil {
			return err
		}
		b.points = append(b.points, payPoint{fraction: f, rate: rate, base: base, bff: bff})
	}
	return nil
}

// payMeasure is measure with the ledger's CPU, the BFF's upstream calls
// and the machine's busy cores over the run. The BFF's costs are per
// money request it handled (bff_money_requests_total, a refused one
// included), which counts the requests wrk left in flight when it
// stopped, as their costs are (the readings wait for them: runTail).
func (e *env) payMeasure(t *target, script string, dur time.Duration, ledger bool) (payRun, error) {
	pr := payRun{pgCPU: math.NaN(), upstream: math.NaN(), redis: math.NaN()}
	var pg0 pgCounters
	var up0, money0 float64
	var err error
	if ledger {
		if pg0, err = e.payDB.read(); err != nil {
			return pr, err
		}
		if up0, err = metricSum(t.metricsURL, "bff_upstream_requests_total"); err != nil {
			return pr, err
		}
		if money0, err = metricSum(t.metricsURL, "bff_money_requests_total"); err != nil {
			return pr, err
		}
	}
	busy0, total0 := machineTicks()
	if pr.m, err = e.measure(t, script, dur); err != nil {
		return pr, err
	}
	busy1, total1 := machineTicks()
	if total1 > total0 {
		pr.busy = float64(busy1-busy0) / float64(total1-total0)
	}
	w := pr.m.wrk
	ok := float64(w.Requests - w.Status)
	if ok <= 0 {
		return pr, fmt.Errorf("%s: no request answered 2xx (%d answered otherwise)", t.name, w.Status)
	}
	pr.secs = w.DurationUS / 1e6
	pr.redisSecs = pr.secs + e.runTail.Seconds()
	pr.ok = ok / pr.secs
	pr.handled = float64(w.Requests)
	for _, c := range pr.m.redisByCmd {
		pr.redisCmds += c
	}
	if ledger {
		money1, err := metricSum(t.metricsURL, "bff_money_requests_total")
		if err != nil {
			return pr, err
		}
		if d := money1 - money0; d > 0 {
			pr.handled = d
		}
		pg1, err := e.payDB.read()
		if err != nil {
			return pr, err
		}
		pr.pgCPU = float64(pg1.cpuSince(pg0)) / clockTicks * 1e6 / pr.handled
		up1, err := metricSum(t.metricsURL, "bff_upstream_requests_total")
		if err != nil {
			return pr, err
		}
		pr.upstream = (up1 - up0) / pr.handled
		pr.redis = float64(pr.redisCmds) / pr.handled // made net of the background by netRedis
	}
	// The baseline sends Redis nothing: what it sees is the idle BFF's.
	pr.cpu = pr.m.cpuUSPerReq * float64(w.Requests) / pr.handled
	return pr, nil
}

func logPayRun(pr payRun) {
	load := "saturation"
	if pr.offered > 0 {
		load = fmt.Sprintf("%.0f/s", pr.offered)
	}
	fmt.Printf("  %-8s %-8s %-10s %7.0f 2xx/s  p50 %6.2f  p99 %6.2f  p99.9 %6.2f ms  cpu %6.1f µs  pg cpu %s µs  upstream %s (per request)  redis %.0f/s%s  busy %.0f%%  non-2xx %d  errors %d\n",
		pr.target, pr.label, load, pr.ok, pr.m.wrk.P50/1000, pr.m.wrk.P99/1000, pr.m.wrk.P999/1000,
		pr.cpu, num(pr.pgCPU, 1), num(pr.upstream, 2), float64(pr.redisCmds)/pr.redisSecs, topCommands(pr.m), pr.busy*100, pr.m.wrk.Status, pr.m.wrk.errors()-pr.m.wrk.Status)
}

// medianPayRun is the per-metric median of runs.
func medianPayRun(runs []payRun) payRun {
	if len(runs) == 0 {
		return payRun{}
	}
	ms := make([]runMetrics, len(runs))
	for i, r := range runs {
		ms[i] = r.m
	}
	pick := func(f func(payRun) float64) float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = f(r)
		}
		return median(v)
	}
	return payRun{label: "median", target: runs[0].target, m: medianRun(ms),
		pgCPU:    pick(func(r payRun) float64 { return r.pgCPU }),
		upstream: pick(func(r payRun) float64 { return r.upstream }),
		busy:     pick(func(r payRun) float64 { return r.busy }),
		ok:       pick(func(r payRun) float64 { return r.ok }),
		cpu:      pick(func(r payRun) float64 { return r.cpu }),
		redis:    pick(func(r payRun) float64 { return r.redis })}
}

// machineTicks are the machine's busy and total CPU ticks (/proc/stat):
// busy is all but idle and iowait.
func machineTicks() (busy, total int64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0, 0
	}
	for i, v := range f[1:] {
		if i >= 8 { // guest and guest_nice are inside user and nice
			break
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		total += n
		if i != 3 && i != 4 {
			busy += n
		}
	}
	return busy, total
}

// metricSum is the sum of every sample of a metric (all its labels).
func metricSum(url, name string) (float64, error) {
	var sum float64
	err := eachSample(url, name, func(_ string, v float64) { sum += v })
	return sum, err
}

// metricByLabel is a metric's samples by the value of one label.
func metricByLabel(url, name, label string) (map[string]float64, error) {
	out := map[string]float64{}
	err := eachSample(url, name, func(labels string, v float64) {
		_, rest, ok := strings.Cut(labels, label+`="`)
		if !ok {
			return
		}
		val, _, _ := strings.Cut(rest, `"`)
		out[val] += v
	})
	return out, err
}

// eachSample calls f with the labels ({...}, or "") and value of each
// sample of the metric name on a Prometheus text endpoint.
func eachSample(url, name string, f func(labels string, v float64)) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		labels := ""
		if rest[0] == '{' {
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				continue
			}
			labels, rest = rest[:end+1], rest[end+1:]
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err == nil {
			f(labels, v)
		}
	}
	return sc.Err()
}

func yesOr(ok bool, why string) string {
	if ok {
		return "yes"
	}
	return "no: " + why
}
