package payments_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
	"github.com/fintech-bff/bff/internal/testing/poll"
	"github.com/fintech-bff/bff/internal/upstreamsim"
)

// The money history checker: the in-process twin of e2e/history_test.go,
// for the money path alone, fast enough to run on every `go test` and
// once per mutant in `make mutants` (tools/mutants). Two payments.Service
// instances share one ledger.Memory (two BFF instances) in front of the
// upstream simulator; several users, some with several concurrent
// clients, issue seeded random money requests while upstream faults,
// clock steps and payments made at the bank directly hit them. Afterwards
// the history is quiesced (every late act landed, the clocks past every
// deadline and window, the settler run) and checked against the
// simulator's ground truth, PaymentOrigins: which request made each
// payment.
//
// The operations: creations and open-banking inits that create, inits of
// an existing listed payment, repeats of a key (on the path with or
// without a trailing slash, the amount in another accepted form), amounts
// in every accepted form (10.5, 10.50, "10.50", JPY integers, BHD with 3
// decimals) and refused bodies (too many decimals, "NaN", "Infinity",
// 1e999, 0, -5, unknown or lower-case currencies, unknown members, a
// creation naming a paymentId, an init with both paymentId and
// paymentInformation, case-variant keys); payments made at the bank
// similar or equal to an open request's. The faults, placed by operation
// count: the upstream acts then answers 401 or its typed 500, hangs up
// before or after acting, acts after the client stopped waiting (late
// act), or refuses before acting (400 PROVIDER_UNAVAILABLE); the
// simulator's clock steps a minute between a request's snapshot and its
// send. The upstream drops debtorAccount from the bodies it gets (a member
// it does not keep, as docs/payments.md allows an upstream to). Of the
// three histories of a run, the first has a user with more payments than
// a snapshot reads (never "not made"), the second the simulator's
// documented reply profile (lists normalised, no updatedAt), the third a
// list that lags its creations by 300 ms with the instances told 600 ms
// (payments.list_lag); once its late acts have landed it runs lateOther, a
// payment made at the end of one request's deadline and missing from the
// snapshot of an equal request claimed just after (the ledger's clock
// steps over the seven seconds between).
//
// One user has a single client: its faults hit exactly the request they
// are placed for, and it runs the scripted patterns (mhPatterns), each
// the shortest history that breaks one settlement rule, every one at
// least once per history at a seeded place, so a broken rule is caught on
// every run, not only on a lucky seed; no clock step lands inside one.
//
// The invariants, each checked against the ground truth:
//
//	(a) at most one payment per key;
//	(b) every 2xx of a creating request, and every record that ends done,
//	    names the payment that key's own send made, and all of them the
//	    same one. The documented assumption (docs/payments.md, "Where the
//	    guarantee ends") is counted and reported, not a violation: a
//	    payment made at the bank directly (origin "") named for a key that
//	    had made none when it was settled, equal to its content, made after
//	    its claiming request began and inside its recorded window, with no
//	    other such payment of the bank listed by then. ("Had made none"
//	    includes a key whose own payment a late act made after it was
//	    settled: no list its settling read could show it.) Anything else is
//	    a violation. An init of an existing payment names that payment and
//	    makes none;
//	(c) a key the ledger ends given back made nothing;
//	(d) liveness: a body the model accepts is never refused by the BFF's
//	    own routing or validation (404 ROUTE_NOT_FOUND, 400
//	    VALIDATION_ERROR or BAD_REQUEST, IDEMPOTENCY_KEY_REUSED for the same
//	    payment), and the first attempt of a key that no fault could reach
//	    is answered 2xx (unless it took the whole timeout: a loaded
//	    machine's, not a refusal);
//	(e) a key that provably made nothing (none of its requests made a
//	    payment, every payment similar to it existed before its claiming
//	    request began, its snapshot read the whole list) ends given back or
//	    answered, never unknown, once quiet;
//	(f) at most half the creating keys of a history end unknown: a fault
//	    is placed for about one send in three, and settling proves most of
//	    those made or not made; 30 histories ended with 6% to 22% unknown
//	    (the patterns leave a few unknown by design), so more than twice
//	    the worst of that means settling stopped concluding what the
//	    evidence proves. The fraction is reported;
//	(g) a refused body is 400 VALIDATION_ERROR, neither recorded in the
//	    ledger nor sent upstream.
//
// A failure prints the seed; BFF_MONEY_SEED replays its operations and
// faults (the scheduling is the machine's), BFF_MONEY_OPS sets the
// operations per history (default 150: three histories, about 15 s with
// -race on 2 cores). BFF_MONEY_LAG (a duration) makes every history's
// list lag that much with the instances told nothing, an upstream the
// BFF documents it cannot settle against (docs/payments.md, "The
// upstream's list is trusted to be complete within payments.list_lag"):
// the violations are then logged as that documented limit, not failed.

const (
	// mhTimeout is the instances' upstream timeout: a send after a
	// snapshot of a big user's 500 payments fits in it, with -race on
	// two loaded cores.
	mhTimeout = 2 * time.Second
	// mhLateMax bounds a late act's delay; the quiesce waits this long
	// (and a margin) for the late acts still pending.
	mhLateMax = 600 * time.Millisecond
	// mhUnknownBound is (f)'s bound on the keys left unknown.
	mhUnknownBound = 0.5
	// mhStep is the simulator's clock step: past a request's window, so
	// a payment made after it is never that request's.
	mhStep = time.Minute
)

func mhEnvInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func mhSeed(t *testing.T) uint64 {
	if s := os.Getenv("BFF_MONEY_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("BFF_MONEY_SEED: %v", err)
		}
		return n
	}
	return uint64(time.Now().UnixNano())
}

func TestMoneyHistories(t *testing.T) {
	seed := mhSeed(t)
	ops := mhEnvInt("BFF_MONEY_OPS", 150)
	untold := time.Duration(0)
	if s := os.Getenv("BFF_MONEY_LAG"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("BFF_MONEY_LAG: %v", err)
		}
		untold = d
	}
	// Three histories, each on its own simulator and ledger: the full
	// reply profile and a user past the 500 payments a snapshot reads;
	// the documented profile (lists normalised, no updatedAt); a list that
	// lags 300 ms, the instances told 600 ms (as e2e/history_test.go).
	for round := range 3 {
		s := seed + uint64(round)
		v := mhVariant{big: round == 0, documented: round == 1}
		switch {
		case untold > 0:
			v.lag = untold
		case round == 2:
			v.lag, v.told = 300*time.Millisecond, 600*time.Millisecond
		}
		t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) {
			h := runMoneyHistory(t, s, ops, v)
			h.report(t, seed)
		})
	}
}

// mhVariant is how the upstream behaves in one history.
type mhVariant struct {
	big        bool          // one user has more payments than a snapshot reads
	documented bool          // the documented reply profile
	lag        time.Duration // how long the list lags a new payment
	told       time.Duration // the lag the instances are told (payments.list_lag)
}

// mhContent is a payment's content as this checker models it, apart from
// the BFF's own model: the amount in minor units of its currency.
type mhContent struct {
	Currency string
	Minor    int64
	Creditor string
	IBAN     string
	Debtor   string // debtorAccount.iban, "" for none
	Remit    string
}

// mhDigits are the minor units of the currencies the histories pay in.
var mhDigits = map[string]int{"EUR": 2, "JPY": 0, "BHD": 3}

// decimal is the amount with all its minor digits ("10.50", "1000",
// "1.250").
func (c mhContent) decimal() string {
	d := mhDigits[c.Currency]
	s := strconv.FormatInt(c.Minor, 10)
	if d == 0 {
		return s
	}
	if len(s) <= d {
		s = strings.Repeat("0", d-len(s)+1) + s
	}
	return s[:len(s)-d] + "." + s[len(s)-d:]
}

// mhForms is how many accepted forms an amount has: amount renders each.
const mhForms = 4

// amount is the amount's JSON in form: a number with its trailing zeros
// cut (10.5), a number with all its digits (10.50), a string with all its
// digits ("10.50"), a string with its zeros cut ("10.5").
func (c mhContent) amount(form int) string {
	full := c.decimal()
	short := full
	if strings.Contains(short, ".") {
		short = strings.TrimRight(strings.TrimRight(short, "0"), ".")
	}
	switch form % mhForms {
	case 0:
		return short
	case 1:
		return full
	case 2:
		return strconv.Quote(full)
	}
	return strconv.Quote(short)
}

// info is the paymentInformation object, its amount in form.
func (c mhContent) info(form int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"amount":%s,"currency":%q`, c.amount(form), c.Currency)
	if c.Creditor != "" {
		fmt.Fprintf(&b, `,"creditorName":%q`, c.Creditor)
	}
	fmt.Fprintf(&b, `,"creditorAccount":{"iban":%q}`, c.IBAN)
	if c.Debtor != "" {
		fmt.Fprintf(&b, `,"debtorAccount":{"iban":%q}`, c.Debtor)
	}
	if c.Remit != "" {
		fmt.Fprintf(&b, `,"remittanceInformation":%q`, c.Remit)
	}
	b.WriteString("}")
	return b.String()
}

func (c mhContent) creation(form int) string {
	return `{"paymentInformation":` + c.info(form) + `,"providerIds":["demobank-sandbox"]}`
}

func (c mhContent) initBody(form int) string {
	return `{"providerId":"demobank-sandbox","paymentInformation":` + c.info(form) + `}`
}

// equal: the same payment to the minor unit, every member the same.
func (c mhContent) equal(o mhContent) bool { return c == o }

// similar: the same currency and an amount within a minor unit, the
// BFF's "similar" read loosely (never stricter than the BFF's).
func (c mhContent) similar(o mhContent) bool {
	d := c.Minor - o.Minor
	return c.Currency == o.Currency && d >= -1 && d <= 1
}

// mhPaths are the money endpoints as a client may write them.
var (
	mhCreation = []string{"/v2/payments", "/v2/payments/"}
	mhInit     = []string{"/v2/pay/open-banking-init", "/v2/pay/open-banking-init/"}
)

type mhUser struct {
	name    string
	clients int
	big     bool // more payments than a snapshot reads: never "not made"
	// solo: one client, so a fault it places hits the request it is
	// placed for; it runs the scripted patterns.
	solo   bool
	faults int // faults placed for it so far (under mhHistory.mu)
}

// mhKey is one Idempotency-Key of the model.
type mhKey struct {
	user    *mhUser
	key     string
	kind    string // "create", "init" (creates), "existing" (an init of an existing payment)
	route   string // the ledger's money route
	content *mhContent
	form    int
	wantID  string // existing: the payment it starts
	pattern string // the scripted pattern it belongs to, "" for none
	// lateDirect: the bank makes a payment equal to it after every
	// window closed (the no-window pattern).
	lateDirect bool
	inFlight   int
	attempts   []*mhAttempt
}

func (k *mhKey) creates() bool { return k.content != nil }

func (k *mhKey) body(form int) string {
	switch k.kind {
	case "create":
		return k.content.creation(form)
	case "init":
		return k.content.initBody(form)
	}
	return `{"providerId":"demobank-sandbox","paymentId":"` + k.wantID + `"}`
}

func (k *mhKey) paths() []string {
	if k.kind == "create" {
		return mhCreation
	}
	return mhInit
}

// open: its last answer says its outcome is not known yet (or it has none).
func (k *mhKey) open() bool {
	if k.inFlight > 0 || len(k.attempts) == 0 {
		return true
	}
	c := k.attempts[len(k.attempts)-1].code
	return c == problem.CodePaymentOutcomeUnknown || c == problem.CodeIdempotencyInProgress
}

// mhAttempt is one request of the history and its answer.
type mhAttempt struct {
	user       *mhUser
	k          *mhKey // nil for a refused body
	key        string
	op         string
	path, body string
	reqID      string
	instance   int
	start, end time.Time
	status     int
	code       string
	fields     []problem.Field // the members a refusal names
	named      string          // the payment a 2xx names
	accepted   bool            // the model accepts the body
	first      bool            // its key's first attempt (no other runs beside it)
	faultFree  bool            // no fault was placed for its user while it ran
	failed     string          // the BFF failed the call in a way no client sees
}

func (a *mhAttempt) String() string {
	s := fmt.Sprintf("%s %s %s key=%s req=%s inst=%d -> %d %s", a.start.Format("15:04:05.000"), a.op, a.path, a.key, a.reqID, a.instance, a.status, a.code)
	if a.named != "" {
		s += " names " + a.named
	}
	if a.faultFree {
		s += " (no fault)"
	}
	return s
}

type mhViolation struct {
	key  string
	what string
}

// mhDirect is a payment made at the bank directly.
type mhDirect struct {
	content mhContent
	start   time.Time // just before it was made
	// made is when it certainly existed, on the ledger's clock (the clock
	// a record's end is stamped by).
	made time.Time
}

// mhClock is the ledger's clock: real time, moved on at the quiesce. The
// history's own times (requests, payments first seen) are read from it
// too, so they compare with the ledger's stamps.
type mhClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *mhClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *mhClock) pass(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

type mhHistory struct {
	t        *testing.T
	seed     uint64
	v        mhVariant
	sim      *upstreamsim.Server
	led      *ledger.Memory
	clock    *mhClock
	svcs     []*payments.Service
	fwds     []*proxy.Forwarder
	base     string     // the simulator's URL, behind the wrapper
	tokens   *simTokens // the checker's own, to list payments
	sends    atomic.Int64
	reqSeq   atomic.Int64
	stepEach int64 // a clock step every stepEach sends
	stepDue  atomic.Bool
	// inPattern counts the patterns running: no clock step then.
	inPattern atomic.Int32

	mu        sync.Mutex
	users     []*mhUser
	keys      []*mhKey
	pool      map[*mhUser][]*mhKey // keys published to the user's clients
	attempts  []*mhAttempt
	byReq     map[string]*mhAttempt
	sent      map[string]bool        // request ids whose money POST reached the upstream
	reads     map[string][]time.Time // request id -> when its list reads began
	firstSeen map[string]time.Time   // payment id -> when this checker first saw it listed (it existed then)
	atBank    map[string]mhDirect    // payments made at the bank directly
	faults    map[string]int
	patterns  map[string]int
	held      map[string]*mhHeld // request id -> a money POST the upstream takes and acts on later (lateOther)
	steps     int
	stepOff   time.Duration
	keySeq    int
	bad       []mhViolation
	assumed   []string
	unknown   int
	creating  int
	eChecked  int
}

func runMoneyHistory(t *testing.T, seed uint64, ops int, v mhVariant) *mhHistory {
	t.Logf("money history seed %d, %d operations, variant %+v", seed, ops, v)
	rng := rand.New(rand.NewPCG(seed, seed^0x6d6f6e6579))
	opts := upstreamsim.Options{ClientID: "c", ClientSecret: "s", ListLag: v.lag}
	if v.documented {
		opts.ReplyProfile = upstreamsim.ProfileDocumented
	}
	h := &mhHistory{t: t, seed: seed, v: v, sim: upstreamsim.New(opts), clock: &mhClock{},
		pool: map[*mhUser][]*mhKey{}, byReq: map[string]*mhAttempt{}, sent: map[string]bool{}, reads: map[string][]time.Time{},
		firstSeen: map[string]time.Time{}, atBank: map[string]mhDirect{}, faults: map[string]int{}, patterns: map[string]int{},
		held: map[string]*mhHeld{}, stepEach: int64(20 + rng.IntN(20))}
	t.Cleanup(h.sim.Close)
	srv := httptest.NewServer(http.HandlerFunc(h.upstream))
	t.Cleanup(srv.Close)
	h.base = srv.URL
	h.tokens = &simTokens{base: srv.URL, have: map[string]string{}}
	base, _ := url.Parse(srv.URL)
	var err error
	if h.led, err = ledger.NewMemory(h.clock.now, make([]byte, 32), nil); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		// Each instance has its own forwarder and token cache, as two
		// processes would.
		fwd := proxy.New(proxy.Options{BaseURL: base, Routes: proxy.NewRoutes(contractRoutes), Tokens: &simTokens{base: srv.URL, have: map[string]string{}},
			Timeout: mhTimeout, MaxBodyBytes: 1 << 16, Retry: proxy.Retry{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}})
		h.fwds = append(h.fwds, fwd)
		h.svcs = append(h.svcs, payments.New(payments.Options{Upstream: fwd, Timeout: mhTimeout, MoneyRoutes: []string{"/v2/payments", "/v2/pay"},
			Ledger: h.led, Instance: fmt.Sprintf("i%d", i), EncryptionKey: make([]byte, 32), ListLag: v.told}))
	}
	tag := strconv.FormatUint(seed%100000, 10)
	h.users = []*mhUser{{name: "mh" + tag + "-a", clients: 3}, {name: "mh" + tag + "-b", clients: 3}, {name: "mh" + tag + "-solo", clients: 1, solo: true}}
	if v.big {
		big := &mhUser{name: "mh" + tag + "-big", clients: 1, big: true}
		// 520 payments: the snapshot and settling read 500, so the
		// user's lists are never read whole.
		if err := h.sim.SeedPayments(big.name, 520, nil); err != nil {
			t.Fatal(err)
		}
		h.users = append(h.users, big)
	}
	for _, u := range h.users {
		h.observe(u, h.clock.now()) // the fixtures existed before everything
	}

	// The settlers run on both instances throughout, as in production.
	ctx, stop := context.WithCancel(context.Background())
	var settlers sync.WaitGroup
	for _, svc := range h.svcs {
		settlers.Add(1)
		go func() { defer settlers.Done(); svc.Run(ctx) }()
	}

	h.runClients(seed, ops)
	end := time.Now()
	stop()
	settlers.Wait()
	h.quiesce(rng, end)
	h.check()
	return h
}

// runClients runs the users' clients to the end of their operations: the
// solo user gets a fifth of them, the others share the rest by client.
func (h *mhHistory) runClients(seed uint64, ops int) {
	soloOps := max(ops/5, 12)
	others := 0
	for _, u := range h.users {
		if !u.solo {
			others += u.clients
		}
	}
	perClient := max((ops-soloOps)/others, 1)
	var clients sync.WaitGroup
	for ui, u := range h.users {
		for ci := range u.clients {
			n := perClient
			switch {
			case u.solo:
				n = soloOps
			case u.big:
				n = max(perClient/2, 4) // each of its snapshots reads 5 pages
			}
			crng := rand.New(rand.NewPCG(seed, uint64(ui*16+ci+1)))
			clients.Add(1)
			go func() { defer clients.Done(); h.client(u, crng, n) }()
		}
	}
	clients.Wait()
}

// upstream is the simulator as the instances reach it: a trailing slash
// routed like the bare path (as most frameworks route it), the money POSTs
// noted (what reached the upstream), the clock stepped between a
// snapshot and its send every stepEach sends, and debtorAccount dropped
// from the bodies (a member this upstream does not keep).
func (h *mhHistory) upstream(w http.ResponseWriter, r *http.Request) {
	if len(r.URL.Path) > 1 {
		r.URL.Path = strings.TrimSuffix(r.URL.Path, "/")
	}
	if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v2/pay") {
		h.mu.Lock()
		h.sent[r.Header.Get("X-Request-Id")] = true
		h.mu.Unlock()
		if h.sends.Add(1)%h.stepEach == 0 {
			h.stepDue.Store(true)
		}
		// A pattern's windows are its own: a step due while one runs
		// waits for the next send after it.
		if h.inPattern.Load() == 0 && h.stepDue.CompareAndSwap(true, false) {
			h.step()
		}
		if body, err := io.ReadAll(r.Body); err == nil {
			body = mhDropDebtor(body)
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
			if h.take(w, r, body) {
				return
			}
		}
	}
	if r.Method == http.MethodGet && r.URL.Path == "/v2/payments" {
		// Every payment existing when a list read begins is first seen
		// no later than that, and the read is noted under its request
		// id: a payment first seen after the read that settled a key (or
		// within the lag before it) was not in that read.
		now := h.clock.now()
		for _, u := range h.users {
			h.observe(u, now)
		}
		h.mu.Lock()
		id := r.Header.Get("X-Request-Id")
		h.reads[id] = append(h.reads[id], now)
		h.mu.Unlock()
	}
	h.sim.ServeHTTP(w, r)
}

// mhHeld is a money POST the upstream takes, hangs up on without acting,
// and acts on when the checker says (actHeld): the simulator's late act
// with its moment chosen by the checker.
type mhHeld struct {
	r    *http.Request // nil until the POST arrives
	body []byte
	user *mhUser
}

// take holds r, the first POST of a request id registered in held, and
// hangs up on it; false for any other request.
func (h *mhHistory) take(w http.ResponseWriter, r *http.Request, body []byte) bool {
	h.mu.Lock()
	hd := h.held[r.Header.Get("X-Request-Id")]
	ok := hd != nil && hd.r == nil
	if ok {
		hd.r, hd.body = r.Clone(context.Background()), body
	}
	h.mu.Unlock()
	if !ok {
		return false
	}
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
	return true
}

// actHeld has the simulator serve the held POST of reqID now, its reply
// thrown away (its client is gone), and reports whether it made a
// payment; false when no POST was held.
func (h *mhHistory) actHeld(reqID string) bool {
	h.mu.Lock()
	hd := h.held[reqID]
	h.mu.Unlock()
	if hd == nil || hd.r == nil {
		return false
	}
	r := hd.r.Clone(context.Background())
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(hd.body)), int64(len(hd.body))
	w := httptest.NewRecorder()
	h.sim.ServeHTTP(w, r)
	return w.Code/100 == 2
}

// step moves the simulator's clock a minute, forward or back, keeping it
// within a minute of real time (tokens and fixtures stay sane).
func (h *mhHistory) step() {
	h.mu.Lock()
	d := mhStep
	if h.stepOff > 0 {
		d = -mhStep
	}
	h.stepOff += d
	h.steps++
	h.mu.Unlock()
	h.sim.Advance(d)
}

func mhDropDebtor(body []byte) []byte {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber() // amounts pass as written
	var m map[string]any
	if d.Decode(&m) != nil {
		return body
	}
	info, ok := m["paymentInformation"].(map[string]any)
	if !ok {
		return body
	}
	if _, ok := info["debtorAccount"]; !ok {
		return body
	}
	delete(info, "debtorAccount")
	out, err := json.Marshal(m)
	if err != nil {
		return body
	}
	return out
}

// observe notes the user's payments as existing at t (just before it).
func (h *mhHistory) observe(u *mhUser, t time.Time) {
	origins := h.sim.PaymentOrigins(u.name)
	h.mu.Lock()
	defer h.mu.Unlock()
	for id := range origins {
		if _, ok := h.firstSeen[id]; !ok {
			h.firstSeen[id] = t
		}
	}
}

func (h *mhHistory) violate(key, format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.bad = append(h.bad, mhViolation{key: key, what: fmt.Sprintf(format, args...)})
}

// faultState is the user's faults placed so far and whether one is
// waiting for a request.
func (h *mhHistory) faultState(u *mhUser) (int, bool) {
	pending := slices.ContainsFunc(h.sim.Faults(), func(f upstreamsim.Fault) bool { return f.UserID == u.name })
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, hd := range h.held {
		pending = pending || (hd.user == u && hd.r == nil)
	}
	return u.faults, pending
}

// mhFaultKinds are the faults a history places, by name.
var mhFaultKinds = []string{"act401", "act500", "hangBefore", "hangAfter", "late", "refuse"}

// place puts a fault of kind on the user's next money POST.
func (h *mhHistory) place(u *mhUser, kind string, delay time.Duration) {
	f := upstreamsim.Fault{UserID: u.name, Method: http.MethodPost, PathPrefix: "/v2/pay", Times: 1}
	switch kind {
	case "act401":
		f.AfterActing, f.Status, f.Delay = true, http.StatusUnauthorized, delay
	case "act500":
		f.AfterActing, f.Status, f.Body = true, http.StatusInternalServerError, `{"type":"INTERNAL_ERROR","message":"the upstream failed"}`
	case "hangBefore":
		f.HangUp, f.Delay = true, delay
	case "hangAfter":
		f.AfterActing, f.HangUp, f.Delay = true, true, delay
	case "late":
		f.ActLate, f.HangUp, f.Delay = true, true, delay
	case "refuse":
		f.Status, f.Body = http.StatusBadRequest, `{"type":"PROVIDER_UNAVAILABLE","message":"the provider is down"}`
	}
	h.mu.Lock()
	u.faults++
	h.faults[kind]++
	h.mu.Unlock()
	h.sim.InjectFault(f)
}

// maybeFault places a random fault on the user's next money POST, about
// a third of the time, unless one is already waiting.
func (h *mhHistory) maybeFault(u *mhUser, rng *rand.Rand) {
	kind := mhFaultKinds[rng.IntN(len(mhFaultKinds))]
	delay := time.Duration(rng.IntN(200)) * time.Millisecond
	if kind == "late" {
		delay = 200*time.Millisecond + time.Duration(rng.IntN(int(mhLateMax/time.Millisecond)-200))*time.Millisecond
	}
	if rng.IntN(3) != 0 {
		return
	}
	if _, pending := h.faultState(u); pending {
		return
	}
	h.place(u, kind, delay)
}

func (h *mhHistory) newReqID(u *mhUser) string {
	return fmt.Sprintf("%s-r%d", u.name, h.reqSeq.Add(1))
}

// post sends one money request through one instance, as the edge
// dispatches it, and records it and its answer.
func (h *mhHistory) post(u *mhUser, k *mhKey, key, op, path, body, reqID string, inst int, accepted, first bool) *mhAttempt {
	if reqID == "" {
		reqID = h.newReqID(u)
	}
	a := &mhAttempt{user: u, k: k, key: key, op: op, path: path, body: body, reqID: reqID, instance: inst, accepted: accepted, first: first}
	a.start = h.clock.now()
	h.observe(u, a.start)
	faults0, pending0 := h.faultState(u)
	h.mu.Lock()
	h.attempts = append(h.attempts, a)
	h.byReq[reqID] = a
	if k != nil {
		k.inFlight++
		k.attempts = append(k.attempts, a)
	}
	h.mu.Unlock()

	r := httptest.NewRequest(http.MethodPost, "http://bff.local/api"+path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", key)
	w := httptest.NewRecorder()
	err := mhServe(h.fwds[inst], h.svcs[inst], w, r, proxy.Call{UserID: u.name, RequestID: reqID, Path: path, ClientIP: "203.0.113.7", SessionRef: "s-" + u.name})

	faults1, pending1 := h.faultState(u)
	h.mu.Lock()
	defer h.mu.Unlock()
	a.end = h.clock.now()
	a.status = w.Code
	a.faultFree = !pending0 && !pending1 && faults0 == faults1
	if err != nil {
		a.failed = err.Error()
	}
	if strings.HasPrefix(w.Header().Get("Content-Type"), problem.ContentType) {
		var p problem.Problem
		_ = json.Unmarshal(w.Body.Bytes(), &p)
		a.code, a.fields = p.Code, p.Fields
	} else if w.Code/100 == 2 {
		var v struct{ ID, PaymentID string }
		_ = json.Unmarshal(w.Body.Bytes(), &v)
		a.named = v.ID
		if a.named == "" {
			a.named = v.PaymentID
		}
	}
	if k != nil {
		k.inFlight--
	}
	return a
}

// mhServe dispatches a call as the edge does (serve, without failing a
// test from a client's goroutine): the route, then payments or the proxy,
// a failure rendered as the envelope. It reports a call that failed with
// something other than a problem, or after writing.
func mhServe(fwd *proxy.Forwarder, svc *payments.Service, w *httptest.ResponseRecorder, r *http.Request, c proxy.Call) error {
	target, p := fwd.Target(c, r.Method)
	var err error
	switch {
	case p != nil:
		err = p
	case svc.Handles(target, r.Method):
		_, err = svc.Serve(w, r, c, target)
	default:
		_, err = fwd.Forward(w, r, c, target)
	}
	if err == nil {
		return nil
	}
	pr, ok := err.(*problem.Problem)
	if !ok {
		return fmt.Errorf("the call failed with %T %v, not a *problem.Problem", err, err)
	}
	if len(w.Header()) > 0 || w.Body.Len() > 0 {
		return fmt.Errorf("the call wrote a response and failed with %v", err)
	}
	problem.Write(w, pr, c.RequestID)
	return nil
}

// newKey makes a key of the model; it is published to the user's clients
// only after its first attempt (publish), so that first attempt is the
// key's owner.
func (h *mhHistory) newKey(u *mhUser, kind string, c *mhContent, form int) *mhKey {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.keySeq++
	k := &mhKey{user: u, key: fmt.Sprintf("K%d-%s", h.keySeq, kind), kind: kind, content: c, form: form, route: "/v2/pay"}
	if kind == "create" {
		k.route = "/v2/payments"
	}
	h.keys = append(h.keys, k)
	return k
}

func (h *mhHistory) publish(k *mhKey) {
	h.mu.Lock()
	h.pool[k.user] = append(h.pool[k.user], k)
	h.mu.Unlock()
}

var (
	mhCreditors = []string{"Jane Doe", "Noa Cohen", "ACME Ltd", ""}
	mhIBANs     = []string{"FR7630006000011234567890189", "DE89370400440532013000", "GB33BUKB20201555555555"}
)

// newContent is a payment's content: mostly new, sometimes with the
// amount of another key of the user (similar) or its whole content
// (equal), since those are where settlement's rules decide.
func (h *mhHistory) newContent(u *mhUser, rng *rand.Rand) *mhContent {
	c := &mhContent{Currency: "EUR", Creditor: mhCreditors[rng.IntN(len(mhCreditors))], IBAN: mhIBANs[rng.IntN(len(mhIBANs))]}
	switch r := rng.IntN(100); {
	case r < 15:
		c.Currency, c.Minor = "JPY", int64(100+rng.IntN(100000))
	case r < 30:
		c.Currency, c.Minor = "BHD", int64(1+rng.IntN(1000000))
	default:
		c.Minor = int64(1 + rng.IntN(1000000))
	}
	if rng.IntN(2) == 0 {
		c.Remit = fmt.Sprintf("invoice %d", rng.IntN(1000))
	}
	if o := h.someKey(u, rng, false); o != nil && o.content != nil {
		switch r := rng.IntN(100); {
		case r < 10:
			*c = *o.content
		case r < 25:
			c.Currency, c.Minor = o.content.Currency, o.content.Minor
		}
	}
	return c
}

// someKey is one of the user's published keys outside the patterns,
// preferring an open one when asked; nil when there is none.
func (h *mhHistory) someKey(u *mhUser, rng *rand.Rand, preferOpen bool) *mhKey {
	h.mu.Lock()
	defer h.mu.Unlock()
	var all, open []*mhKey
	for _, k := range h.pool[u] {
		if k.pattern != "" {
			continue
		}
		all = append(all, k)
		if k.open() {
			open = append(open, k)
		}
	}
	if preferOpen && len(open) > 0 && rng.IntN(3) > 0 {
		return open[rng.IntN(len(open))]
	}
	if len(all) == 0 {
		return nil
	}
	return all[rng.IntN(len(all))]
}

func (h *mhHistory) client(u *mhUser, rng *rand.Rand, ops int) {
	// The solo user runs every pattern at least once, at seeded places
	// among its operations, and more at random: each broken rule meets
	// its pattern in every history.
	var pending []string
	if u.solo {
		for _, i := range rng.Perm(len(mhPatterns)) {
			pending = append(pending, mhPatterns[i])
		}
	}
	for op := range ops {
		switch {
		case len(pending) > 0 && (rng.IntN(3) == 0 || ops-op <= len(pending)):
			h.pattern(u, rng, pending[0])
			pending = pending[1:]
			continue
		case u.solo && rng.IntN(5) == 0:
			h.pattern(u, rng, mhPatterns[rng.IntN(len(mhPatterns))])
			continue
		}
		switch r := rng.IntN(100); {
		case r < 30:
			h.create(u, rng, "create")
		case r < 40:
			h.create(u, rng, "init")
		case r < 48:
			h.initExisting(u, rng, "")
		case r < 64:
			h.repeatSome(u, rng)
		case r < 76:
			h.refused(u, rng)
		case r < 88:
			h.direct(u, rng, nil, rng.IntN(5) < 2)
		default:
			h.create(u, rng, "create")
		}
	}
}

// create makes a new key of kind ("create" or "init") with a new content,
// places a random fault on the user's next money POST, sends the key and
// retries it as a client would.
func (h *mhHistory) create(u *mhUser, rng *rand.Rand, kind string) *mhKey {
	return h.createWith(u, rng, kind, "", h.newContent(u, rng), -1)
}

// createWith makes a new key of kind with content c (its amount in form,
// -1 any) and sends it. Outside a pattern a random fault may be placed on
// it and the client retries it; a pattern places its own faults and
// decides its repeats.
func (h *mhHistory) createWith(u *mhUser, rng *rand.Rand, kind, pattern string, c *mhContent, form int) *mhKey {
	if form < 0 {
		form = rng.IntN(mhForms)
	}
	k := h.newKey(u, kind, c, form)
	k.pattern = pattern
	k.lateDirect = pattern == "late-direct"
	paths := k.paths()
	path := paths[0]
	if rng.IntN(4) == 0 {
		path = paths[1]
	}
	if pattern == "" {
		h.maybeFault(u, rng)
	}
	a := h.post(u, k, k.key, kind, path, k.body(form), "", rng.IntN(2), true, true)
	h.publish(k)
	if pattern == "" {
		h.retry(u, rng, k, a)
	}
	return k
}

// retry is a client's retry after an answer that says to: the outcome is
// unknown, or another request with the key is still running.
func (h *mhHistory) retry(u *mhUser, rng *rand.Rand, k *mhKey, a *mhAttempt) {
	for range 2 {
		if a.code != problem.CodePaymentOutcomeUnknown && a.code != problem.CodeIdempotencyInProgress {
			return
		}
		if rng.IntN(5) < 2 {
			return
		}
		if a.code == problem.CodeIdempotencyInProgress {
			// deliberate: its Retry-After, shortened: a client's pause while
			// the first request's owner is at the upstream, in real time.
			time.Sleep(30 * time.Millisecond)
		}
		a = h.repeat(u, rng, k)
	}
}

// repeat sends k again: its body in any accepted form of the same amount
// (the same payment, so the same request), on the path with or without a
// trailing slash.
func (h *mhHistory) repeat(u *mhUser, rng *rand.Rand, k *mhKey) *mhAttempt {
	form := k.form
	if rng.IntN(4) == 0 {
		form = rng.IntN(mhForms)
	}
	paths := k.paths()
	return h.post(u, k, k.key, "repeat", paths[rng.IntN(2)], k.body(form), "", rng.IntN(2), true, false)
}

func (h *mhHistory) repeatSome(u *mhUser, rng *rand.Rand) {
	if k := h.someKey(u, rng, true); k != nil {
		h.retry(u, rng, k, h.repeat(u, rng, k))
	}
}

// initExisting starts an existing payment of the user at the bank: one of
// a key's (an open one's more often than not: the app picks the payment
// it sees listed while its creation is still unknown), or any listed.
func (h *mhHistory) initExisting(u *mhUser, rng *rand.Rand, id string) *mhKey {
	if id == "" {
		origins := h.sim.PaymentOrigins(u.name)
		if rng.IntN(2) == 0 {
			if k := h.someKey(u, rng, true); k != nil {
				h.mu.Lock()
				for pid, origin := range origins {
					if a := h.byReq[origin]; a != nil && a.k == k {
						id = pid
					}
				}
				h.mu.Unlock()
			}
		}
		if id == "" {
			ids := make([]string, 0, len(origins))
			for pid := range origins {
				ids = append(ids, pid)
			}
			sort.Strings(ids)
			// The newest 50: a big user's list is long.
			ids = ids[max(0, len(ids)-50):]
			id = ids[rng.IntN(len(ids))]
		}
	}
	k := h.newKey(u, "existing", nil, 0)
	k.wantID = id
	if rng.IntN(4) == 0 {
		h.maybeFault(u, rng)
	}
	a := h.post(u, k, k.key, "existing", mhInit[rng.IntN(2)], k.body(0), "", rng.IntN(2), true, true)
	h.publish(k)
	h.retry(u, rng, k, a)
	return k
}

// mhRefusedBodies are bodies the BFF must refuse with 400
// VALIDATION_ERROR before anything is claimed or sent, with the endpoint
// each is for (true: the init).
var mhRefusedBodies = []struct {
	init bool
	body string
	// twice: the refusal names this key as sent twice (keys compare
	// without case), not as an unknown member: the BFF and an upstream
	// that keeps the first or the last of two could read two payments.
	twice string
}{
	{false, `{"paymentInformation":{"amount":"10.0000000000000008881784197001262323389053","currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}},"providerIds":["demobank-sandbox"]}`, ""},
	{false, `{"paymentInformation":{"amount":10.0000000000000008881784197001262323389053,"currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}},"providerIds":["demobank-sandbox"]}`, ""},
	{false, `{"paymentInformation":{"amount":"NaN","currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}},"providerIds":["demobank-sandbox"]}`, ""},
	{true, `{"providerId":"demobank-sandbox","paymentInformation":{"amount":"Infinity","currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}}}`, ""},
	{false, `{"paymentInformation":{"amount":1e999,"currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}},"providerIds":["demobank-sandbox"]}`, ""},
	{false, `{"paymentInformation":{"amount":0,"currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}},"providerIds":["demobank-sandbox"]}`, ""},
	{true, `{"providerId":"demobank-sandbox","paymentInformation":{"amount":-5,"currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}}}`, ""},
	{false, `{"paymentInformation":{"amount":"10.50","currency":"XYZ","creditorAccount":{"iban":"DE89370400440532013000"}},"providerIds":["demobank-sandbox"]}`, ""},
	{false, `{"paymentInformation":{"amount":"10.50","currency":"eur","creditorAccount":{"iban":"DE89370400440532013000"}},"providerIds":["demobank-sandbox"]}`, ""},
	{false, `{"paymentInformation":{"amount":"100.5","currency":"JPY","creditorAccount":{"iban":"DE89370400440532013000"}},"providerIds":["demobank-sandbox"]}`, ""},
	{true, `{"providerId":"demobank-sandbox","paymentInformation":{"amount":1.2345,"currency":"BHD","creditorAccount":{"iban":"DE89370400440532013000"}}}`, ""},
	{false, `{"paymentInformation":{"amount":"10.50","currency":"EUR","purposeCode":"SALA","creditorAccount":{"iban":"DE89370400440532013000"}},"providerIds":["demobank-sandbox"]}`, ""},
	{false, `{"paymentInformation":{"amount":"10.50","currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}},"providerIds":["demobank-sandbox"],"paymentId":"01JPAYMENT0000000000000000"}`, ""},
	{true, `{"providerId":"demobank-sandbox","paymentId":"01JPAYMENT0000000000000000","paymentInformation":{"amount":"10.50","currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}}}`, ""},
	{false, `{"paymentInformation":{"amount":"10.50","currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}},"PaymentInformation":{"amount":1,"currency":"EUR","creditorAccount":{"iban":"X"}},"providerIds":["demobank-sandbox"]}`, "PaymentInformation"},
	{true, `{"providerId":"demobank-sandbox","paymentInformation":{"amount":"10.50","Amount":"99.00","currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}}}`, "paymentInformation.Amount"},
	{false, `{"paymentInformation":{"amount":"10.50","currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000","IBAN":"GB33BUKB20201555555555"}},"providerIds":["demobank-sandbox"]}`, "paymentInformation.creditorAccount.IBAN"},
	{false, `{"paymentInformation":{"amount":"10.50","currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}},"providerIds":["demobank-sandbox"],"purpose":"rent"}`, ""},
}

// refused sends a body the model refuses, under a new key; check finds
// it neither recorded nor sent.
func (h *mhHistory) refused(u *mhUser, rng *rand.Rand) {
	b := mhRefusedBodies[rng.IntN(len(mhRefusedBodies))]
	paths := mhCreation
	if b.init {
		paths = mhInit
	}
	h.mu.Lock()
	h.keySeq++
	key := fmt.Sprintf("K%d-refused", h.keySeq)
	h.mu.Unlock()
	a := h.post(u, nil, key, "refused", paths[rng.IntN(2)], b.body, "", rng.IntN(2), false, true)
	if a.status != http.StatusBadRequest || a.code != problem.CodeValidationError {
		h.violate(key, "(g) a refused body was answered %d %s, want 400 VALIDATION_ERROR: %s", a.status, a.code, b.body)
	}
	if b.twice != "" && !slices.ContainsFunc(a.fields, func(f problem.Field) bool {
		return f.Field == b.twice && strings.Contains(f.Message, "twice")
	}) {
		h.violate(key, "(g) a body with keys that differ only in case was refused as %+v, not as %s sent twice: %s", a.fields, b.twice, b.body)
	}
}

// direct makes a payment at the bank, outside the BFF: similar to an open
// key's content (same amount and currency, another payee or text), or
// equal to it (in another amount form) when equal is set. With no key to
// imitate it makes a new one.
func (h *mhHistory) direct(u *mhUser, rng *rand.Rand, like *mhKey, equal bool) string {
	if like == nil {
		like = h.someKey(u, rng, true)
	}
	var c mhContent
	switch {
	case like == nil || like.content == nil:
		c = *h.newContent(u, rng)
	case equal:
		c = *like.content
	default:
		c = *like.content
		if c.Creditor == "Bank App" {
			c.Creditor = "Other"
		} else {
			c.Creditor = "Bank App"
		}
	}
	c.Debtor = "" // this upstream keeps no debtorAccount
	start := h.clock.now()
	p, err := h.sim.CreateDirectPayment(u.name, []byte(c.creation(rng.IntN(mhForms))))
	if err != nil {
		h.violate("", "a payment at the bank was refused: %v", err)
		return ""
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.atBank[p.ID] = mhDirect{content: c, start: start, made: h.clock.now()}
	if _, ok := h.firstSeen[p.ID]; !ok {
		h.firstSeen[p.ID] = h.clock.now()
	}
	return p.ID
}

// mhPatterns are the scripted patterns of the solo user: each is the
// shortest history that breaks one settlement rule when the rule is
// broken, and is settled correctly (made, unknown, or given back) when
// it stands.
var mhPatterns = []string{"similar-after-lost", "equal-after-lost", "equal-after-acted", "equal-before", "late-direct", "late-repeat", "init-while-held", "sibling"}

// pattern runs one of the solo user's scripted patterns. Its faults hit
// exactly the request they are placed for: the user has one client.
func (h *mhHistory) pattern(u *mhUser, rng *rand.Rand, name string) {
	h.inPattern.Add(1)
	defer h.inPattern.Add(-1)
	h.mu.Lock()
	h.patterns[name]++
	h.mu.Unlock()
	// A content no other key of the user has: each pattern alone decides.
	c := &mhContent{Currency: "EUR", Minor: int64(2_000_000 + rng.IntN(8_000_000)), Creditor: "Pattern Payee", IBAN: mhIBANs[rng.IntN(len(mhIBANs))],
		Remit: "pattern " + name}
	maybeRepeat := func(k *mhKey, p int) {
		if rng.IntN(10) < p {
			h.repeat(u, rng, k)
		}
	}
	switch name {
	case "similar-after-lost":
		// Made needs an EQUAL payment: the bank's similar one, made while
		// the key's answer is lost, is never its.
		h.place(u, "hangBefore", 0)
		k := h.createWith(u, rng, "create", name, c, -1)
		h.direct(u, rng, k, false)
		maybeRepeat(k, 7)
	case "equal-after-lost":
		// The documented assumption: lost before the upstream acted, and
		// the bank makes the one payment equal to it inside its window; the
		// key may be answered with it (reported, not a violation).
		h.place(u, "hangBefore", 0)
		k := h.createWith(u, rng, "create", name, c, -1)
		h.direct(u, rng, k, true)
		maybeRepeat(k, 7)
	case "equal-after-acted":
		// The upstream made the key's payment and holds its answer; the
		// bank makes an equal one before the answer is lost: two fresh
		// equal payments, unknown, never the first of them.
		h.place(u, "hangAfter", 700*time.Millisecond)
		k := h.sendAside(u, rng, name, c, func(string) { h.direct(u, rng, &mhKey{content: c}, true) })
		maybeRepeat(k, 7)
	case "equal-before":
		// Fresh is by the snapshot's ids: the bank's equal payment made
		// just before the send is in the snapshot, never the key's; once
		// quiet the key is given back.
		k := &mhKey{content: c}
		h.direct(u, rng, k, true)
		h.place(u, "hangBefore", 0)
		k = h.createWith(u, rng, "create", name, c, -1)
		maybeRepeat(k, 5)
	case "late-direct":
		// Lost before the upstream acted; after every window closed the
		// bank makes an equal payment (the quiesce), which is outside the
		// key's window.
		h.place(u, "hangBefore", 0)
		h.createWith(u, rng, "create", name, c, -1)
	case "late-repeat":
		// The upstream acts after the client stopped waiting: a repeat
		// before it acts must not find the key "not made".
		h.place(u, "late", mhLateMax-time.Duration(rng.IntN(150))*time.Millisecond)
		k := h.createWith(u, rng, "create", name, c, -1)
		maybeRepeat(k, 10)
		maybeRepeat(k, 5)
	case "init-while-held":
		// The app starts at the bank the payment it sees listed while the
		// creation's answer is held, then refused with 401: that init names
		// the payment but never owns its creation (the first attack).
		h.place(u, "act401", 700*time.Millisecond)
		h.sendAside(u, rng, name, c, func(id string) { h.initExisting(u, rng, id) })
	case "sibling":
		// Two open requests, one with a debtorAccount this upstream drops:
		// its payment equals the other's content, and it could have made
		// it (judged by similarity, never by strict equality).
		o := *c
		o.Debtor = "NL91ABNA0417164300"
		h.place(u, "hangBefore", 0)
		k := h.createWith(u, rng, "create", name, c, -1)
		h.place(u, "hangAfter", 0)
		h.createWith(u, rng, "create", name, &o, -1)
		maybeRepeat(k, 7)
	}
}

// sendAside sends a new key's creation with content c while its fault
// (placed by the caller, with a delay after acting) holds the answer, and
// runs meanwhile, once the upstream has made the key's payment, with that
// payment's id.
func (h *mhHistory) sendAside(u *mhUser, rng *rand.Rand, pattern string, c *mhContent, meanwhile func(id string)) *mhKey {
	k := h.newKey(u, "create", c, rng.IntN(mhForms))
	k.pattern = pattern
	reqID := h.newReqID(u)
	done := make(chan struct{})
	inst := rng.IntN(2)
	go func() {
		defer close(done)
		h.post(u, k, k.key, "create", mhCreation[0], k.body(k.form), reqID, inst, true, true)
	}()
	var id string
	made := poll.Within(3*time.Second, func() bool {
		for pid, origin := range h.sim.PaymentOrigins(u.name) {
			if origin == reqID {
				id = pid
				return true
			}
		}
		return false
	})
	if made {
		meanwhile(id)
	}
	<-done
	h.publish(k)
	return k
}

// quiesce ends the history: the late acts land, the settlers stop, the
// clocks pass every deadline and window, the bank makes the late-direct
// payments, and the settler runs until nothing is due.
func (h *mhHistory) quiesce(rng *rand.Rand, end time.Time) {
	h.sim.ClearFaults() // those no request took
	h.mu.Lock()
	late := h.faults["late"] > 0
	h.mu.Unlock()
	if late {
		// A late act lands at most mhLateMax after its request was taken,
		// which was before the history ended: a bounded wait.
		// deliberate: the simulator's late acts run on real timers
		// (upstreamsim's ActLate), not on a clock this test can move.
		time.Sleep(time.Until(end.Add(mhLateMax + 300*time.Millisecond)))
	}
	if h.v.told > 0 && h.v.lag > 0 {
		h.lateOther(rng) // with nothing else in flight: it steps the ledger's clock
	}
	ctx := context.Background()
	recs := h.records()
	var windowEnd time.Time
	for _, r := range recs {
		if r.Send.WindowEnd.After(windowEnd) {
			windowEnd = r.Send.WindowEnd
		}
	}
	if d := windowEnd.Sub(h.sim.Now()) + 2*time.Second + h.v.lag; d > 0 {
		h.sim.Advance(d) // the upstream's clock past every window (and the lag)
	}
	h.clock.pass(time.Hour) // every claim past its deadline
	for _, k := range h.keys {
		r := recs[[2]string{k.route, k.key}]
		if k.lateDirect && r != nil && r.State == ledger.StateUnknown && len(h.own(k, nil)) == 0 {
			h.direct(k.user, rng, k, true)
		}
	}
	if h.v.lag > 0 {
		h.sim.Advance(h.v.lag + time.Second) // those listed too
	}
	for round := range 4 {
		for range 8 { // Due leases 32 records at a time
			h.svcs[round%2].SettleDue(ctx)
		}
		h.clock.pass(10 * time.Minute) // past every lease
	}
}

// lateOther is the history that settling's rule "the others are the
// requests that could still act after the claim, less the list lag"
// (evidence.go) is for. The upstream hangs up on the solo user's request
// B and makes its payment just before B's deadline; A, B's content under
// another key, is claimed just after that deadline, so its snapshot, read
// within the list's lag of B's payment, does not show it; A's send is
// lost before the upstream acts. B could have made the fresh payment A
// then finds, so A stays unknown; others taken from A's claim leave B out,
// and A adopts B's payment ((b)). The seven seconds to B's deadline (the
// timeout and the owner's margin) are a step of the ledger's clock, not a
// wait: it runs once the late acts have landed, with nothing else in
// flight, and the upstream, whose clock does not step, acts moments after
// B's hang-up, as it may.
func (h *mhHistory) lateOther(rng *rand.Rand) {
	const name = "late-other"
	i := slices.IndexFunc(h.users, func(u *mhUser) bool { return u.solo })
	u := h.users[i]
	h.inPattern.Add(1)
	defer h.inPattern.Add(-1)
	c := &mhContent{Currency: "EUR", Minor: int64(2_000_000 + rng.IntN(8_000_000)), Creditor: "Pattern Payee", IBAN: mhIBANs[rng.IntN(len(mhIBANs))],
		Remit: "pattern " + name}
	b := h.newKey(u, "create", c, rng.IntN(mhForms))
	b.pattern = name
	reqID := h.newReqID(u)
	h.mu.Lock()
	h.patterns[name]++
	h.held[reqID] = &mhHeld{user: u}
	u.faults++
	h.faults["held"]++
	h.mu.Unlock()
	h.post(u, b, b.key, "create", mhCreation[0], b.body(b.form), reqID, rng.IntN(2), true, true)
	h.publish(b)
	rec := h.records()[[2]string{b.route, b.key}]
	if rec == nil || rec.State != ledger.StateUnknown {
		h.t.Logf("%s: B ended %s, not unknown: the rule was not reached", name, mhRecord(rec))
		return
	}
	if d := rec.Deadline.Add(-50 * time.Millisecond).Sub(h.clock.now()); d > 0 {
		h.clock.pass(d)
	}
	if !h.actHeld(reqID) {
		h.violate(b.key, "the upstream made no payment for the held request %s", reqID)
		return
	}
	h.place(u, "hangBefore", 0) // A's
	if d := rec.Deadline.Sub(h.clock.now()); d >= 0 {
		h.clock.pass(d + time.Millisecond) // A's claim comes after B's deadline, on the ledger's clock
	}
	a := h.createWith(u, rng, "create", name, c, -1)
	// The rule decides only when A's snapshot left B's payment out: a
	// machine that stalled longer than the list's lag shows it, and the
	// history is then settled without the rule (nothing to fail).
	if ra := h.records()[[2]string{a.route, a.key}]; ra != nil {
		for _, id := range h.own(b, nil) {
			if slices.Contains(ra.Send.SeenBefore, id) {
				h.t.Logf("%s: A's snapshot showed B's payment %s (read over %s after it was made): the rule was not reached", name, id, h.v.lag)
			}
		}
	}
}

// records reads every record of the ledger, by route and key.
func (h *mhHistory) records() map[[2]string]*ledger.Record {
	out := map[[2]string]*ledger.Record{}
	for id := int64(1); ; id++ {
		r, err := h.led.Record(context.Background(), id)
		if errors.Is(err, ledger.ErrNoRecord) {
			return out
		}
		if err != nil {
			h.violate("", "the ledger's record %d cannot be read: %v", id, err)
			return out
		}
		out[[2]string{r.Route, r.Key}] = r
	}
}

// own is the payments k's requests made (origins: payment id -> request
// id; nil reads them).
func (h *mhHistory) own(k *mhKey, origins map[string]string) []string {
	if origins == nil {
		origins = h.sim.PaymentOrigins(k.user.name)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var ids []string
	for pid, origin := range origins {
		if a := h.byReq[origin]; a != nil && a.k == k {
			ids = append(ids, pid)
		}
	}
	sort.Strings(ids)
	return ids
}

// mhListed is a payment as the simulator lists it.
type mhListed struct {
	ID          string    `json:"id"`
	CreatedAt   time.Time `json:"createdAt"`
	RedirectURL string    `json:"redirectUrl"`
	Info        struct {
		Amount          json.Number `json:"amount"`
		Currency        string      `json:"currency"`
		CreditorName    string      `json:"creditorName"`
		CreditorAccount *struct {
			IBAN string `json:"iban"`
		} `json:"creditorAccount"`
		DebtorAccount *struct {
			IBAN string `json:"iban"`
		} `json:"debtorAccount"`
		RemittanceInformation string `json:"remittanceInformation"`
		MerchantID            string `json:"merchantId"`
	} `json:"paymentInformation"`
	content mhContent
	exact   bool // its content reads into the model
}

// list reads the user's whole payment list from the simulator.
func (h *mhHistory) list(u *mhUser) map[string]*mhListed {
	out := map[string]*mhListed{}
	tok, err := h.tokens.Token(context.Background(), u.name)
	if err != nil {
		h.violate("", "listing %s: %v", u.name, err)
		return out
	}
	next := ""
	for range 100 { // at most 10,000 payments
		q := url.Values{"limit": {"100"}}
		if next != "" {
			q.Set("nextPage", next)
		}
		req, _ := http.NewRequest(http.MethodGet, h.base+"/v2/payments?"+q.Encode(), nil)
		req.Header.Set("Authorization", "Bearer "+tok.Value)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			h.violate("", "listing %s: %v", u.name, err)
			return out
		}
		var page struct {
			Items    []*mhListed `json:"items"`
			NextPage any         `json:"nextPage"`
		}
		d := json.NewDecoder(resp.Body)
		d.UseNumber()
		err = d.Decode(&page)
		resp.Body.Close()
		if err != nil {
			h.violate("", "listing %s: %v", u.name, err)
			return out
		}
		for _, p := range page.Items {
			p.content, p.exact = p.model()
			out[p.ID] = p
		}
		switch v := page.NextPage.(type) {
		case string:
			next = v
		case json.Number:
			next = v.String()
		default:
			next = ""
		}
		if next == "" {
			return out
		}
	}
	return out
}

// model reads a listed payment into the checker's model, exactly (a
// decimal read as a rational, never a float).
func (p *mhListed) model() (mhContent, bool) {
	c := mhContent{Currency: p.Info.Currency, Creditor: p.Info.CreditorName, Remit: p.Info.RemittanceInformation}
	if p.Info.CreditorAccount != nil {
		c.IBAN = p.Info.CreditorAccount.IBAN
	}
	if p.Info.DebtorAccount != nil {
		c.Debtor = p.Info.DebtorAccount.IBAN
	}
	d, ok := mhDigits[c.Currency]
	r, okr := new(big.Rat).SetString(p.Info.Amount.String())
	if !ok || !okr || p.Info.MerchantID != "" || p.RedirectURL != "" {
		return c, false
	}
	r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d)), nil)))
	if !r.IsInt() || !r.Num().IsInt64() {
		return c, false
	}
	c.Minor = r.Num().Int64()
	return c, true
}

// insideWindow reports whether createdAt is inside the window a send
// recorded (the rule docs/payments.md states, applied to the ledger's own
// record).
func mhInsideWindow(s ledger.SendEvidence, at time.Time) bool {
	switch {
	case at.IsZero() || s.WindowEnd.IsZero():
		return false
	case !s.SeenCut.IsZero() && !at.After(s.SeenCut):
		return false
	case !s.SeenFrom.IsZero() && at.Before(s.SeenFrom):
		return false
	}
	return !at.After(s.WindowEnd)
}

// check holds the history to the invariants.
func (h *mhHistory) check() {
	recs := h.records()
	origins := map[*mhUser]map[string]string{}
	listed := map[*mhUser]map[string]*mhListed{}
	for _, u := range h.users {
		origins[u] = h.sim.PaymentOrigins(u.name)
		listed[u] = h.list(u)
	}
	h.mu.Lock()
	attempts := slices.Clone(h.attempts)
	keys := slices.Clone(h.keys)
	sent := h.sent
	h.mu.Unlock()
	for _, a := range attempts {
		h.checkAttempt(a, recs, sent)
	}
	for _, k := range keys {
		h.checkKey(k, recs[[2]string{k.route, k.key}], origins[k.user], listed[k.user])
	}
	h.checkUnknownShare()
}

// checkAttempt holds one attempt to (g) and (d).
func (h *mhHistory) checkAttempt(a *mhAttempt, recs map[[2]string]*ledger.Record, sent map[string]bool) {
	if a.failed != "" {
		h.violate(a.key, "the BFF failed %s: %s", a.reqID, a.failed)
	}
	if !a.accepted {
		if recs[[2]string{"/v2/payments", a.key}] != nil || recs[[2]string{"/v2/pay", a.key}] != nil {
			h.violate(a.key, "(g) a refused body was recorded in the ledger: %s", a.body)
		}
		if sent[a.reqID] {
			h.violate(a.key, "(g) a refused body was sent upstream: %s", a.body)
		}
		return
	}
	switch a.code {
	case problem.CodeRouteNotFound, problem.CodeValidationError, problem.CodeBadRequest, problem.CodeIdempotencyKeyReused:
		h.violate(a.key, "(d) a body the model accepts was refused %d %s (%s %s)", a.status, a.code, a.path, a.body)
		return
	}
	// An answer that took the whole timeout is the machine's (a big
	// user's snapshot under -race on loaded cores), not a refusal.
	slow := a.end.Sub(a.start) >= mhTimeout
	if a.first && a.faultFree && a.status/100 != 2 && !slow {
		h.violate(a.key, "(d) the first attempt of a key no fault could reach was answered %d %s", a.status, a.code)
	}
}

// checkKey holds one key to (a), (b), (c) and (e); rec is its ledger
// record (nil: never claimed).
func (h *mhHistory) checkKey(k *mhKey, rec *ledger.Record, origins map[string]string, listed map[string]*mhListed) {
	own := h.own(k, origins)
	if len(own) > 1 {
		h.violate(k.key, "(a) the key made %d payments: %v", len(own), own)
	}
	named := map[string]string{} // payment id -> who named it
	for _, a := range k.attempts {
		if a.named != "" && a.status/100 == 2 {
			named[a.named] = "the answer to " + a.reqID
		}
	}
	if rec != nil && rec.State == ledger.StateDone && rec.PaymentID != "" {
		named[rec.PaymentID] = "the ledger's record"
	}
	if len(named) > 1 {
		h.violate(k.key, "(b) the key's answers and record name several payments: %v", named)
	}
	if !k.creates() {
		if len(own) > 0 {
			h.violate(k.key, "(b) an init of the existing payment %s made %v", k.wantID, own)
		}
		for id, by := range named {
			if id != k.wantID {
				h.violate(k.key, "(b) %s names %s, the init started %s", by, id, k.wantID)
			}
		}
		return
	}
	for id, by := range named {
		h.checkNamed(k, rec, own, id, by, origins, listed)
	}
	if rec == nil {
		return // never claimed (every attempt refused before its claim)
	}
	h.checkRecord(k, rec, own, origins, listed)
}

// checkNamed holds to (b) a creating key's answer or record (by) naming
// the payment id, the key having made own.
func (h *mhHistory) checkNamed(k *mhKey, rec *ledger.Record, own []string, id, by string, origins map[string]string, listed map[string]*mhListed) {
	u := k.user
	switch {
	case len(own) > 0 && id != own[0]:
		if origins[id] == "" && h.hiddenWhenSettled(k, own[0]) && h.assumption(k, rec, id, listed) == "" {
			// The key's own payment came after the list read that
			// settled it (a late act), or within the lag before:
			// as far as settling could see the key had made none,
			// and the bank's payment was the one equal to it in
			// its window.
			h.mu.Lock()
			h.assumed = append(h.assumed, k.key+" -> "+id+" (its own "+own[0]+" came later)")
			h.mu.Unlock()
			return
		}
		h.violate(k.key, "(b) %s names %s, the key made %s\n      named: %s\n      own:   %s\n      record: %s",
			by, id, own[0], h.describe(u, id, origins, listed), h.describe(u, own[0], origins, listed), mhRecord(rec))
	case len(own) > 0:
	case origins[id] != "":
		h.violate(k.key, "(b) %s names %s, which request %s made, the key made none", by, id, origins[id])
	default:
		if why := h.assumption(k, rec, id, listed); why != "" {
			h.violate(k.key, "(b) %s names %s, made at the bank, and the key made none: %s", by, id, why)
		} else {
			h.mu.Lock()
			h.assumed = append(h.assumed, k.key+" -> "+id)
			h.mu.Unlock()
		}
	}
}

// checkRecord holds a creating key's ledger record to (c) and (e), and
// counts it for (f).
func (h *mhHistory) checkRecord(k *mhKey, rec *ledger.Record, own []string, origins map[string]string, listed map[string]*mhListed) {
	h.mu.Lock()
	h.creating++
	if rec.State == ledger.StateUnknown {
		h.unknown++
	}
	h.mu.Unlock()
	if rec.State == ledger.StateReleased && len(own) > 0 {
		h.violate(k.key, "(c) the ledger gave the key back (%s), yet it made %v", rec.Ending, own)
	}
	if rec.State == ledger.StateDone && rec.PaymentID == "" && len(own) > 0 {
		h.violate(k.key, "(c) the ledger ended the key answered %d without a payment, yet it made %v", rec.UpstreamStatus, own)
	}
	if len(own) == 0 && h.provablyNotMade(k, rec, origins, listed) {
		h.mu.Lock()
		h.eChecked++
		h.mu.Unlock()
		if rec.State == ledger.StateUnknown {
			h.violate(k.key, "(e) the key made nothing, every payment similar to it existed before its claim, and it was left unknown")
		}
	}
}

// checkUnknownShare holds the history to (f): the share of creating keys
// left unknown is bounded.
func (h *mhHistory) checkUnknownShare() {
	h.mu.Lock()
	frac := 0.0
	if h.creating > 0 {
		frac = float64(h.unknown) / float64(h.creating)
	}
	h.mu.Unlock()
	if frac > mhUnknownBound {
		h.violate("", "(f) %.0f%% of the creating keys ended unknown, over the bound of %.0f%%", 100*frac, 100*mhUnknownBound)
	}
}

// describe is a payment as a violation's report shows it: who made it,
// when, and its content.
func (h *mhHistory) describe(u *mhUser, id string, origins map[string]string, listed map[string]*mhListed) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	who := "at the bank"
	if o := origins[id]; o != "" {
		who = "by " + o
		if a := h.byReq[o]; a != nil && a.k != nil {
			who += " of " + a.k.key
		}
	} else if d, ok := h.atBank[id]; ok {
		who += ", started " + d.start.Format("15:04:05.000")
	}
	s := id + " made " + who
	if p := listed[id]; p != nil {
		s += fmt.Sprintf(", createdAt %s, %+v", p.CreatedAt.Format("15:04:05"), p.content)
	}
	if seen, ok := h.firstSeen[id]; ok {
		s += ", first seen " + seen.Format("15:04:05.000")
	}
	return s
}

// mhRecord is a record as a violation's report shows it.
func mhRecord(r *ledger.Record) string {
	if r == nil {
		return "none"
	}
	return fmt.Sprintf("%s %s by %s, payment %q, send: snapshot=%v seenBefore=%v seenFrom=%s windowEnd=%s seenCut=%s",
		r.State, r.Ending, r.RequestID, r.PaymentID, r.Send.Snapshot, r.Send.SeenBefore, r.Send.SeenFrom.Format("15:04:05"),
		r.Send.WindowEnd.Format("15:04:05"), r.Send.SeenCut.Format("15:04:05"))
}

// hiddenWhenSettled reports whether payment id may have been missing from
// the list read that settled k: the last list read, by one of k's
// requests or by the settler for it, before its record's end (on the
// ledger's clock), began before the payment was first seen, or within
// the list's lag after.
func (h *mhHistory) hiddenWhenSettled(k *mhKey, id string) bool {
	e, found, err := h.led.Get(context.Background(), k.user.name, k.key)
	if err != nil || !found {
		return false
	}
	read := h.lastRead(k, e.UpdatedAt)
	h.mu.Lock()
	defer h.mu.Unlock()
	seen, ok := h.firstSeen[id]
	return read.IsZero() || !ok || seen.After(read.Add(-h.v.lag))
}

// lastRead is when the last list read for k (by one of its requests, or
// by the settler for it) that began at or before settled began; zero when
// there was none.
func (h *mhHistory) lastRead(k *mhKey, settled time.Time) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	var read time.Time
	for reqID, at := range h.reads {
		base, _, _ := strings.Cut(reqID, "-settle-")
		if a := h.byReq[base]; a == nil || a.k != k {
			continue
		}
		for _, t := range at {
			if !t.After(settled) && t.After(read) {
				read = t
			}
		}
	}
	return read
}

// claimStart is when the request that made rec's claim began ("" when
// none of the history's did).
func (h *mhHistory) claimStart(rec *ledger.Record) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a := h.byReq[rec.RequestID]
	if a == nil {
		return time.Time{}, false
	}
	return a.start, true
}

// assumption is "" when the bank's payment id, named for k (which made
// none), is the documented assumption: equal to its content, made after
// its claiming request began (so after its snapshot) and inside its
// recorded window, and the only such payment of the bank certainly made
// after its send; else why not.
func (h *mhHistory) assumption(k *mhKey, rec *ledger.Record, id string, listed map[string]*mhListed) string {
	p := listed[id]
	switch {
	case p == nil:
		return "it is not listed"
	case !p.exact || !p.content.equal(*k.content):
		return "its content is not equal to the key's"
	case rec == nil:
		return "the key has no record"
	case !rec.Send.Snapshot:
		return "the key's send had no snapshot"
	case !mhInsideWindow(rec.Send, p.CreatedAt):
		return fmt.Sprintf("it was made at %s, outside the key's window [%s, %s]", p.CreatedAt.Format(time.RFC3339), rec.Send.SeenFrom.Format(time.RFC3339), rec.Send.WindowEnd.Format(time.RFC3339))
	}
	start, ok := h.claimStart(rec)
	if !ok {
		return "the key's claim was made by no request of the history"
	}
	// When it was settled: the record's last change (its end, on the
	// ledger's clock).
	e, found, err := h.led.Get(context.Background(), k.user.name, k.key)
	if err != nil || !found {
		return "the key's record cannot be read"
	}
	// The last list read that settled it: a payment is in it when it was
	// made before the read began, and a lagging list's lag before.
	read := h.lastRead(k, e.UpdatedAt)
	h.mu.Lock()
	defer h.mu.Unlock()
	if seen, ok := h.firstSeen[id]; ok && !seen.After(start.Add(-h.v.lag)) {
		return "it existed (and was listed) before the key's claiming request began: it is in its snapshot"
	}
	var end time.Time
	if a := h.byReq[rec.RequestID]; a != nil {
		end = a.end
	}
	for other, d := range h.atBank {
		q := listed[other]
		// Another equal payment of the bank that was certainly fresh (made
		// after the send was answered) and listed in the read that settled
		// the key.
		if other != id && q != nil && d.content.equal(*k.content) && !end.IsZero() && d.start.After(end) &&
			!read.IsZero() && d.made.Before(read.Add(-h.v.lag)) && mhInsideWindow(rec.Send, q.CreatedAt) {
			return "another payment equal to it (" + other + ") was made at the bank inside the window after the send, before the key was settled"
		}
	}
	return ""
}

// provablyNotMade: the evidence settling reads proves k made nothing —
// its send's snapshot read the whole list, and every payment similar to
// it was listed before its claiming request began (first seen a lag
// before), so the snapshot has them all; a quiet request is then "not
// made". A payment not listed at the end counts as similar.
func (h *mhHistory) provablyNotMade(k *mhKey, rec *ledger.Record, origins map[string]string, listed map[string]*mhListed) bool {
	if k.user.big || !rec.Send.Snapshot || !rec.Send.SeenCut.IsZero() {
		return false
	}
	start, ok := h.claimStart(rec)
	if !ok {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for id := range origins {
		if p := listed[id]; p != nil && p.exact && !p.content.similar(*k.content) {
			continue
		}
		if seen, ok := h.firstSeen[id]; !ok || seen.After(start.Add(-h.v.lag)) {
			return false // it may be fresh
		}
	}
	return true
}

// report logs the history's figures and fails the test on a broken
// invariant, with the seed and the offending keys' histories.
func (h *mhHistory) report(t *testing.T, base uint64) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	answers := map[string]int{}
	for _, a := range h.attempts {
		answers[fmt.Sprintf("%s %d %s", a.op, a.status, a.code)]++
	}
	made := 0
	for _, u := range h.users {
		for _, origin := range h.sim.PaymentOrigins(u.name) {
			if h.byReq[origin] != nil {
				made++
			}
		}
	}
	frac := 0.0
	if h.creating > 0 {
		frac = float64(h.unknown) / float64(h.creating)
	}
	t.Logf("seed %d: %d requests, %d sends upstream, %d payments made by them, %d at the bank; %d creating keys claimed, %d unknown (%.0f%%, bound %.0f%%); "+
		"%d named by the documented assumption %v; %d provably not made (e); faults %v; %d clock steps; patterns %v",
		h.seed, len(h.attempts), h.sends.Load(), made, len(h.atBank), h.creating, h.unknown, 100*frac, 100*mhUnknownBound,
		len(h.assumed), h.assumed, h.eChecked, h.faults, h.steps, h.patterns)
	lines := make([]string, 0, len(answers))
	for k, n := range answers {
		lines = append(lines, fmt.Sprintf("%4d  %s", n, k))
	}
	sort.Strings(lines)
	t.Logf("answers:\n  %s", strings.Join(lines, "\n  "))
	if len(h.bad) == 0 {
		return
	}
	var b strings.Builder
	for _, v := range h.bad {
		fmt.Fprintf(&b, "%s: %s\n", v.key, v.what)
		for _, a := range h.attempts {
			if v.key != "" && a.key == v.key {
				fmt.Fprintf(&b, "    %s\n", a)
			}
		}
	}
	if h.v.lag > h.v.told {
		t.Logf("seed %d, under a list lag of %s the instances were not told (a documented limit, not failed): %d invariant(s) broken:\n%s", h.seed, h.v.lag, len(h.bad), b.String())
		return
	}
	t.Errorf("seed %d: %d invariant(s) broken; replay with BFF_MONEY_SEED=%d BFF_MONEY_OPS=%d:\n%s", h.seed, len(h.bad), base, mhEnvInt("BFF_MONEY_OPS", 150), b.String())
}
