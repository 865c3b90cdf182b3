//go:build integration

package ledger_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/testing/pgtest"
	"github.com/fintech-bff/bff/internal/testing/poll"
)

// The ledger's database fails: it restarts, freezes, fails over. These
// tests run private PostgreSQL servers (pgtest.StartServer, StartPair) and
// drive the ledger through its API while the fault happens: every call
// ends by its context with ErrUnavailable or succeeds, no key is ever
// claimed twice, and the ledger works again once the database is back.
// The last shows the hazard docs/ledger-database.md warns about: a
// failover to an asynchronous standby that lags loses committed claims,
// and each lost key can be claimed, so paid, again.
//
// make test runs them short; make chaos pauses the database for
// BFF_LEDGER_PAUSE (10 s) and appends the figures to
// BFF_LEDGER_FAULTS_REPORT.

// faultPause is how long TestLedgerSurvivesPause freezes the database.
func faultPause(t *testing.T) time.Duration {
	v := os.Getenv("BFF_LEDGER_PAUSE")
	if v == "" {
		return 2 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 || d > 5*time.Minute {
		t.Fatalf("BFF_LEDGER_PAUSE=%q: want a duration up to 5m", v)
	}
	return d
}

// report logs a figure, and appends it to BFF_LEDGER_FAULTS_REPORT.
func report(t *testing.T, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf("%s: %s", t.Name(), fmt.Sprintf(format, args...))
	t.Log(line)
	path := os.Getenv("BFF_LEDGER_FAULTS_REPORT")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Errorf("BFF_LEDGER_FAULTS_REPORT: %v", err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s\n", time.Now().UTC().Format(time.RFC3339), line)
}

// slack is how much longer than its context a call may take to return
// (the race detector, two cores, many servers).
const slack = 1500 * time.Millisecond

func faultRequest(key string) ledger.Request {
	fp := sha256.Sum256([]byte("POST /v2/payments " + key))
	return ledger.Request{
		UserID: "user-1", Route: "/v2/payments", Key: key, Fingerprint: fp[:],
		SessionRef: "session-1", ClientIP: "192.0.2.1", RequestID: "req-" + key,
	}
}

func openLedger(t *testing.T, url string) *ledger.Postgres {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := ledger.Open(ctx, ledger.Options{URL: url, EncryptionKey: key32(), MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// prober claims keys while a fault happens and keeps the score: which
// calls failed when, how long the slowest took, and how many times each
// key was won.
type prober struct {
	t      *testing.T
	l      *ledger.Postgres
	prefix string

	mu        sync.Mutex
	seq       int
	wins      map[string]int // key → claims won
	keys      []string       // every key tried, in order
	oks, errs int
	firstErr  time.Time
	lastErr   time.Time
	lastOK    time.Time
	slowest   time.Duration
}

func newProber(t *testing.T, l *ledger.Postgres, prefix string) *prober {
	return &prober{t: t, l: l, prefix: prefix, wins: map[string]int{}}
}

// claim claims key once within timeout, checks how the call ended, and
// reports whether it won.
func (p *prober) claim(key string, timeout time.Duration) (won bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	c, _, err := p.l.Claim(ctx, faultRequest(key), time.Minute)
	took := time.Since(start)
	if took > timeout+slack {
		p.t.Errorf("a Claim took %v with a %v context", took, timeout)
	}
	if err != nil && !errors.Is(err, ledger.ErrUnavailable) {
		p.t.Errorf("a Claim failed with %v, not ledger.ErrUnavailable", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.slowest = max(p.slowest, took)
	end := start.Add(took)
	if err != nil {
		p.errs++
		if p.firstErr.IsZero() {
			p.firstErr = start
		}
		p.lastErr = end
		return false, err
	}
	p.oks++
	p.lastOK = end
	if c != nil {
		p.wins[key]++
	}
	return c != nil, nil
}

// run claims new keys from workers goroutines until stop is closed: each
// key twice at once, as a double click sends it.
func (p *prober) run(workers int, timeout time.Duration, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				p.mu.Lock()
				p.seq++
				key := fmt.Sprintf("%s-%d", p.prefix, p.seq)
				p.keys = append(p.keys, key)
				p.mu.Unlock()
				var both sync.WaitGroup
				for range 2 {
					both.Go(func() { _, _ = p.claim(key, timeout) })
				}
				both.Wait()
				time.Sleep(10 * time.Millisecond) // deliberate: a double click every 10 ms per worker
			}
		})
	}
	return &wg
}

// claimNew claims n new keys one by one, each of which must win.
func (p *prober) claimNew(n int, tag string) []string {
	p.t.Helper()
	var keys []string
	for i := range n {
		key := fmt.Sprintf("%s-%s-%d", p.prefix, tag, i)
		p.mu.Lock()
		p.keys = append(p.keys, key)
		p.mu.Unlock()
		won, err := p.claim(key, 5*time.Second)
		if err != nil || !won {
			p.t.Fatalf("claiming %s: won %v, %v", key, won, err)
		}
		keys = append(keys, key)
	}
	return keys
}

// waitWorking waits until a Claim succeeds, and reports when.
func (p *prober) waitWorking(limit time.Duration) time.Time {
	p.t.Helper()
	i := 0
	if !poll.Within(limit, func() bool {
		key := fmt.Sprintf("%s-probe-%d-%d", p.prefix, time.Now().UnixNano(), i)
		i++
		p.mu.Lock()
		p.keys = append(p.keys, key)
		p.mu.Unlock()
		_, err := p.claim(key, time.Second)
		return err == nil
	}) {
		p.t.Fatalf("the ledger did not work again within %v", limit)
	}
	return time.Now()
}

// waitCalls waits until n more calls have succeeded: the workers of run
// are claiming (before a fault, or again after it), however loaded the
// machine.
func (p *prober) waitCalls(n int) {
	p.t.Helper()
	p.mu.Lock()
	want := p.oks + n
	p.mu.Unlock()
	oks := func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.oks
	}
	if !poll.Within(30*time.Second, func() bool { return oks() >= want }) {
		p.t.Fatalf("%d of %d calls succeeded within 30 s", oks()-(want-n), n)
	}
}

// claimAgain claims every key tried so far once more, once the database
// answers, and returns the keys won a second time (a second payment).
func (p *prober) claimAgain() (again []string) {
	p.t.Helper()
	p.mu.Lock()
	keys := append([]string(nil), p.keys...)
	p.mu.Unlock()
	for _, k := range keys {
		if _, err := p.claim(k, 5*time.Second); err != nil {
			p.t.Fatalf("claiming %s again: %v", k, err)
		}
		p.mu.Lock()
		if p.wins[k] > 1 {
			again = append(again, k)
		}
		p.mu.Unlock()
	}
	return again
}

// failedFor is how long calls failed: from the first failed call's start
// to the last one's end (0 when none failed).
func (p *prober) failedFor() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.errs == 0 {
		return 0
	}
	return p.lastErr.Sub(p.firstErr)
}

func (p *prober) counts() (oks, errs int, slowest time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.oks, p.errs, p.slowest
}

func round(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }

// TestLedgerSurvivesRestart restarts the database (fast shutdown, start)
// under claims: those made before survive it, calls during it fail with
// ErrUnavailable within their context, and no key is won twice.
func TestLedgerSurvivesRestart(t *testing.T) {
	s := pgtest.StartServer(t, pgtest.ServerOptions{})
	p := newProber(t, openLedger(t, s.URL()), "restart")
	before := p.claimNew(20, "before")
	stop := make(chan struct{})
	wg := p.run(2, time.Second, stop)
	p.waitCalls(10)
	began := time.Now()
	s.Restart()
	restarted := time.Since(began)
	back := p.waitWorking(30 * time.Second)
	p.waitCalls(10)
	close(stop)
	wg.Wait()

	if again := p.claimAgain(); len(again) > 0 {
		t.Errorf("%d keys were won twice across a restart: %v", len(again), again)
	}
	p.mu.Lock()
	for _, k := range before {
		if p.wins[k] != 1 {
			t.Errorf("%s, claimed before the restart, was won %d times", k, p.wins[k])
		}
	}
	p.mu.Unlock()
	oks, errs, slowest := p.counts()
	if errs == 0 {
		t.Error("no call failed during the restart: the test did not see it")
	}
	report(t, "restart took %v; calls (1 s context) failed for %v (%d failed, %d succeeded, slowest %v); working again %v after the restart began; 0 keys won twice",
		round(restarted), round(p.failedFor()), errs, oks, round(slowest), round(back.Sub(began)))
}

// TestLedgerSurvivesPause freezes the database (SIGSTOP to every
// PostgreSQL process, as a stalled virtual machine) for BFF_LEDGER_PAUSE
// (2 s; make chaos: 10 s) under claims with a 3 s context (the proxy's
// budget) and a 1 s one: each call ends within its context, those that
// outlast the pause fail with ErrUnavailable, after it everything works,
// and no key is won twice.
func TestLedgerSurvivesPause(t *testing.T) {
	pause := faultPause(t)
	s := pgtest.StartServer(t, pgtest.ServerOptions{})
	l := openLedger(t, s.URL())
	p3 := newProber(t, l, "pause3s")
	p1 := newProber(t, l, "pause1s")
	before := p3.claimNew(20, "before")
	stop := make(chan struct{})
	wg3 := p3.run(2, 3*time.Second, stop)
	wg1 := p1.run(1, time.Second, stop)
	p3.waitCalls(10)
	p1.waitCalls(5)
	began := time.Now()
	s.Pause()
	time.Sleep(pause) // deliberate: the freeze's length
	s.Resume()
	back := p3.waitWorking(30 * time.Second)
	p3.waitCalls(10)
	p1.waitCalls(5)
	close(stop)
	wg3.Wait()
	wg1.Wait()

	for _, p := range []*prober{p3, p1} {
		if again := p.claimAgain(); len(again) > 0 {
			t.Errorf("%d keys were won twice across a pause: %v", len(again), again)
		}
	}
	p3.mu.Lock()
	for _, k := range before {
		if p3.wins[k] != 1 {
			t.Errorf("%s, claimed before the pause, was won %d times", k, p3.wins[k])
		}
	}
	p3.mu.Unlock()
	oks1, errs1, slowest1 := p1.counts()
	oks3, errs3, slowest3 := p3.counts()
	if pause > time.Second+slack && errs1 == 0 {
		t.Errorf("no 1 s call failed during a %v pause", pause)
	}
	if pause > 3*time.Second+slack && errs3 == 0 {
		t.Errorf("no 3 s call failed during a %v pause", pause)
	}
	report(t, "paused %v: 3 s calls failed for %v (%d failed, %d succeeded, slowest %v); 1 s calls failed for %v (%d failed, %d succeeded, slowest %v); "+
		"working again %v after the pause ended; 0 keys won twice",
		pause, round(p3.failedFor()), errs3, oks3, round(slowest3), round(p1.failedFor()), errs1, oks1, round(slowest1),
		round(back.Sub(began.Add(pause))))
}

// TestLedgerGateDuringPause: a frozen database shuts the ledger's gate.
// While it is shut a claim is refused without any pool dialling (a frozen
// server would keep each dial in its listen queue, to fork a process for
// it when it resumes), the connections of the calls that timed out are
// given back while the server is still frozen (pgx would wait 15 s on its
// cancel request and its drain), and once the server runs again the probe
// opens the gate and claims succeed.
func TestLedgerGateDuringPause(t *testing.T) {
	s := pgtest.StartServer(t, pgtest.ServerOptions{})
	l := openLedger(t, s.URL())
	claim := func(key string, within time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), within)
		defer cancel()
		_, _, err := l.Claim(ctx, faultRequest(key), time.Minute)
		return err
	}
	if err := claim("gate-before", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	s.Pause()
	resumed := false
	defer func() {
		if !resumed {
			s.Resume()
		}
	}()
	n := 0
	poll.Until(t, 30*time.Second, "the gate shut under claims with a 1 s context", func() bool {
		n++
		if err := claim(fmt.Sprintf("gate-paused-%d", n), time.Second); err != nil && !errors.Is(err, ledger.ErrUnavailable) {
			t.Fatalf("a claim against a frozen database: %v, want ErrUnavailable", err)
		}
		return l.GateShut()
	})
	poll.Until(t, 10*time.Second, "the pools giving back the connections of the calls that timed out, the server still frozen", func() bool {
		return l.Taken() == 0
	})
	made := l.Dialled()
	for i := range 20 {
		if err := claim(fmt.Sprintf("gate-shut-%d", i), time.Second); !errors.Is(err, ledger.ErrUnavailable) {
			t.Fatalf("a claim while the gate is shut: %v, want ErrUnavailable", err)
		}
	}
	if after := l.Dialled(); after != made {
		t.Errorf("%d connections dialled for claims while the gate was shut, want none", after-made)
	}
	if err := l.Ping(context.Background()); !errors.Is(err, ledger.ErrUnavailable) {
		t.Errorf("Ping with the gate shut: %v, want ErrUnavailable (bff_ledger_up 0 while claims are refused)", err)
	}
	s.Resume()
	resumed = true
	poll.Until(t, 30*time.Second, "a claim succeeding after the resume", func() bool {
		n++
		return claim(fmt.Sprintf("gate-resumed-%d", n), 3*time.Second) == nil
	})
	if l.GateShut() {
		t.Error("a claim succeeded with the gate shut")
	}
}

// TestLedgerGateProbesEveryHost: the gate's probe connects as a pool
// does, connect_timeout a host, so a multi-host URL whose first host
// accepts connections and never answers (a frozen old primary) does not
// keep the gate shut: the probe reaches the next host.
func TestLedgerGateProbesEveryHost(t *testing.T) {
	s := pgtest.StartServer(t, pgtest.ServerOptions{})
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		var held []net.Conn // accepted, never answered
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	url := strings.Replace(s.URL(), fmt.Sprintf("127.0.0.1:%d", s.Port()), fmt.Sprintf("%s,127.0.0.1:%d", silent.Addr(), s.Port()), 1)
	l := openLedger(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := l.Probe(ctx); err != nil {
		t.Fatalf("the probe with a silent first host: %v, want the second host's answer", err)
	}
}

// TestLedgerFailoverToSynchronousStandby crashes the primary of a
// synchronous pair under claims and promotes its standby; the ledger
// reaches it through the multi-host URL (target_session_attrs=read-write).
// Every claim committed before is there after: a second Claim of each key
// loses. Durability shows no doubt on the synchronous primary (fsync on,
// as it is what is shown), and the promoted standby's lack of a standby.
func TestLedgerFailoverToSynchronousStandby(t *testing.T) {
	pair := pgtest.StartPair(t, pgtest.Synchronous, pgtest.ServerOptions{Fsync: true})
	l := openLedger(t, pair.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := l.Durability(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if f := d.Findings(true); len(f) > 0 {
		t.Errorf("a synchronous pair with fsync on: findings %v (from %+v)", f, d)
	}
	if len(d.Standbys) != 1 || d.Standbys[0].Name != pgtest.StandbyName || d.Standbys[0].SyncState != "sync" {
		t.Errorf("standbys: %+v, want %s in sync", d.Standbys, pgtest.StandbyName)
	}

	p := newProber(t, l, "syncfailover")
	before := p.claimNew(20, "before")
	stop := make(chan struct{})
	wg := p.run(2, time.Second, stop)
	p.waitCalls(10)
	began := time.Now()
	pair.Primary.Crash()
	pair.Standby.Promote()
	promoted := time.Since(began)
	back := p.waitWorking(30 * time.Second)
	p.waitCalls(10)
	close(stop)
	wg.Wait()

	if again := p.claimAgain(); len(again) > 0 {
		t.Errorf("%d keys were won twice across a failover to a synchronous standby: %v", len(again), again)
	}
	p.mu.Lock()
	committed := 0
	for k, n := range p.wins {
		committed += n
		if n != 1 && strings.Contains(k, "-before-") {
			t.Errorf("%s, claimed before the failover, was won %d times", k, n)
		}
	}
	p.mu.Unlock()
	oks, errs, slowest := p.counts()

	// The pool the check reads through may still hold a connection to the
	// crashed primary, idle since before the crash: its first use fails
	// and drops it.
	var after ledger.Durability
	if !poll.Within(5*time.Second, func() bool { after, err = l.Durability(ctx); return err == nil }) {
		t.Fatal(err)
	}
	if after.InRecovery || len(after.Standbys) != 0 || !hasFinding(after.Findings(false), ledger.Warn, "replication") {
		t.Errorf("the promoted standby, alone: %+v, findings %v", after, after.Findings(false))
	}
	report(t, "crash of the primary to promoted standby: %v; calls (1 s context) failed for %v (%d failed, %d succeeded, slowest %v); "+
		"working again %v after the crash; %d claims won (%d before the failover), 0 lost, 0 won twice",
		round(promoted), round(p.failedFor()), errs, oks, round(slowest), round(back.Sub(began)), committed, len(before))
}

// TestLedgerAsyncFailoverLosesClaims is the hazard: the standby streams
// asynchronously and lags (its WAL senders held) when the primary dies and
// the standby is promoted. The claims committed in the lag are gone, and a
// second Claim of each wins: with a proxy in front, a second payment. It
// proves docs/ledger-database.md's warning, and that Durability reported
// the asynchronous standby (a warning; a refusal under
// ledger.require_synchronous_replication).
func TestLedgerAsyncFailoverLosesClaims(t *testing.T) {
	pair := pgtest.StartPair(t, pgtest.Asynchronous, pgtest.ServerOptions{Fsync: true})
	l := openLedger(t, pair.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := l.Durability(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Standbys) != 1 || d.Standbys[0].SyncState != "async" {
		t.Errorf("standbys: %+v, want one async", d.Standbys)
	}
	f := d.Findings(false)
	if len(f) != 1 || !hasFinding(f, ledger.Warn, "replication") || !strings.Contains(f[0].Message, "asynchronously") {
		t.Errorf("an asynchronous standby: findings %v, want one warning about it", f)
	}
	if !hasFinding(d.Findings(true), ledger.Refuse, "replication") {
		t.Errorf("an asynchronous standby under require_synchronous_replication: findings %v, want a refusal", d.Findings(true))
	}

	p := newProber(t, l, "asyncfailover")
	replicated := p.claimNew(20, "replicated")
	pair.Primary.WaitReplayed(10 * time.Second)
	pair.Primary.HoldWALSenders() // never released: the primary dies with them held
	inLag := p.claimNew(20, "inlag")
	began := time.Now()
	pair.Primary.Crash()
	pair.Standby.Promote()
	promoted := time.Since(began)
	p.waitWorking(30 * time.Second)

	again := p.claimAgain()
	sort.Strings(again)
	lost := map[string]bool{}
	for _, k := range again {
		lost[k] = true
	}
	for _, k := range replicated {
		if lost[k] {
			t.Errorf("%s, replicated before the lag, was lost", k)
		}
	}
	for _, k := range inLag {
		if !lost[k] {
			t.Errorf("%s, committed while the standby lagged, survived the failover: the test did not make it lag", k)
		}
	}
	report(t, "asynchronous standby lagging at the failover (promoted in %v): %d of %d claims committed in the lag lost, and each won a second time; "+
		"%d replicated claims kept", round(promoted), len(again), len(inLag), len(replicated))
}

func hasFinding(f []ledger.Finding, sev ledger.Severity, setting string) bool {
	for _, x := range f {
		if x.Severity == sev && x.Setting == setting {
			return true
		}
	}
	return false
}
