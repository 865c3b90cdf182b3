package payments_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/mutant"
	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
)

// The hold checker: a model of payments the user approves, and seeded
// random histories that interleave payments, repeats, approvals (right and
// wrong ones, from the right and the wrong session, several at once),
// cancels, expiries and upstream faults on the approved send, each checked
// against the model's invariants:
//
//   - a key makes at most one payment upstream;
//   - a key the policy holds is sent only after an approval that matched it
//     (its content, its user, its session, a strong and fresh
//     authentication), and never after it was declined or expired;
//   - a key the policy does not hold is never held;
//   - a key's state never goes back (awaiting_approval, then in_flight,
//     then done or unknown; declined and done are final);
//   - an approval that succeeded names the payment its key made.
//
// A failure prints the seed; BFF_HOLD_SEED replays it. The build tag
// brokenrule breaks the approval's comparison of content, and
// TestHoldCheckerCatchesABrokenRule shows the checker fails then.

func holdSeed(t *testing.T) uint64 {
	if s := os.Getenv("BFF_HOLD_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("BFF_HOLD_SEED: %v", err)
		}
		return n
	}
	return uint64(time.Now().UnixNano())
}

// holdClock is the ledger's clock: it moves when a history lets time pass.
type holdClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *holdClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *holdClock) pass(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off += d
}

// holdKey is the model of one Idempotency-Key.
type holdKey struct {
	key     string
	session string
	amount  string
	held    bool // the policy holds it (its first answer was STEP_UP_REQUIRED)
	ref     string
	matched bool // an approval that matched it was made while it was held
	ended   bool // it was declined or expired before any matching approval
	states  []string
	paid    string // the payment id an approval or an answer named
}

type holdHistory struct {
	t     *testing.T
	seed  uint64
	rng   *rand.Rand
	f     *moneyFixture
	svcs  []*payments.Service // instances sharing the ledger
	clock *holdClock
	mu    sync.Mutex
	keys  []*holdKey
	log   []string
	bad   []string
}

func (h *holdHistory) note(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.log = append(h.log, fmt.Sprintf(format, args...))
}

func (h *holdHistory) broken(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.bad = append(h.bad, fmt.Sprintf(format, args...))
}

// body is a key's payment: its remittance names the key, so the bank's
// payments say which key made them.
func holdBody(k *holdKey) string {
	return fmt.Sprintf(`{"paymentInformation":{"amount":%q,"currency":"EUR","creditorName":"Jane Doe","creditorAccount":{"iban":"FR7630006000011234567890189"},"remittanceInformation":%q},"providerIds":["demobank-sandbox"]}`, k.amount, k.key)
}

// svc is one of the instances, at random.
func (h *holdHistory) svc() *payments.Service {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.svcs[h.rng.IntN(len(h.svcs))]
}

func (h *holdHistory) pay(k *holdKey) {
	r := httptest.NewRequest(http.MethodPost, "http://bff.local/api/v2/payments", strings.NewReader(holdBody(k)))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", k.key)
	w := httptest.NewRecorder()
	serve(h.t, h.f.fwd, h.svc(), w, r, proxy.Call{UserID: "alice", RequestID: "req-" + k.key, Path: "/v2/payments", SessionRef: k.session})
	var p struct {
		Code      string `json:"code"`
		StepUpURL string `json:"stepUpUrl"`
		ID        string `json:"id"`
	}
	_ = json.Unmarshal(w.Body.Bytes(), &p)
	h.note("pay %s %s from %s: %d %s", k.key, k.amount, k.session, w.Code, p.Code)
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case p.Code == problem.CodeStepUpRequired:
		k.held = true
		if u, err := url.Parse(p.StepUpURL); err == nil {
			k.ref = u.Query().Get("payment")
		}
		if k.amount == "50.00" {
			h.bad = append(h.bad, fmt.Sprintf("%s: a payment below the threshold was held", k.key))
		}
	case w.Code == http.StatusCreated && p.ID != "":
		if k.paid != "" && k.paid != p.ID {
			h.bad = append(h.bad, fmt.Sprintf("%s: answered payment %s, earlier %s", k.key, p.ID, k.paid))
		}
		k.paid = p.ID
	}
}

// approval variants: only "match" may release a payment.
var approvalVariants = []string{"match", "match", "match", "amount", "payee", "user", "acr", "stale", "session"}

func (h *holdHistory) approve(k *holdKey, variant string) {
	h.mu.Lock()
	ref, session := k.ref, k.session
	h.mu.Unlock()
	if ref == "" {
		return
	}
	ctx := context.Background()
	svc := h.svc()
	hold, p := svc.HeldPayment(ctx, ref)
	details := hold.Details
	if p != nil {
		// No longer held: what an approval of it would have granted.
		details = json.RawMessage(fmt.Sprintf(`[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":%q},"creditorName":"Jane Doe","creditorAccount":{"iban":"FR7630006000011234567890189"},"remittanceInformationUnstructured":%q}]`, k.amount, k.key))
	}
	a := payments.Approval{UserID: "alice", ACR: "urn:bff:acr:mfa", AuthTime: h.clock.now(), Details: details, RequestID: "approve-" + k.key}
	switch variant {
	case "amount":
		a.Details = json.RawMessage(strings.Replace(string(details), `"`+k.amount+`"`, `"10.00"`, 1))
	case "payee":
		a.Details = json.RawMessage(strings.Replace(string(details), "Jane Doe", "Mallory", 1))
	case "user":
		a.UserID = "mallory"
	case "acr":
		a.ACR = "urn:bff:acr:pwd"
	case "stale":
		a.AuthTime = a.AuthTime.Add(-time.Hour)
	case "session":
		session = "thief"
	}
	h.mu.Lock()
	if variant == "match" && !k.ended {
		if _, p := svc.HeldPayment(ctx, ref); p == nil {
			k.matched = true // matched while held: the send may follow
		}
	}
	h.mu.Unlock()
	rec, p := svc.Approve(ctx, ref, "alice", session, a)
	code := ""
	if p != nil {
		code = p.Code
	}
	h.note("approve %s (%s): %s %s", k.key, variant, rec.State, code)
	h.mu.Lock()
	defer h.mu.Unlock()
	if p == nil && rec.PaymentID != "" {
		if k.paid != "" && k.paid != rec.PaymentID {
			h.bad = append(h.bad, fmt.Sprintf("%s: the approval named payment %s, earlier %s", k.key, rec.PaymentID, k.paid))
		}
		k.paid = rec.PaymentID
	}
	if p != nil && p.Code == problem.CodeStepUpDeclined && !k.matched {
		k.ended = true
	}
}

func (h *holdHistory) cancel(k *holdKey, asThief bool) {
	h.mu.Lock()
	ref, session := k.ref, k.session
	h.mu.Unlock()
	if ref == "" {
		return
	}
	if asThief {
		session = "thief" // another session cannot cancel it
	}
	declined, err := h.svc().DeclineHold(context.Background(), ref, "alice", session)
	if err == nil {
		h.note("cancel %s: declined %s", k.key, declined.Ending)
	} else {
		h.note("cancel %s: %v", k.key, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil && !k.matched {
		k.ended = true
	}
}

// observe reads every key's record and checks that no state went back.
func (h *holdHistory) observe() {
	order := map[string]int{"awaiting_approval": 0, "in_flight": 1, "unknown": 2, "declined": 3, "done": 3}
	for _, k := range h.keys {
		rec, err := h.svc().Record(context.Background(), "alice", k.key)
		if err != nil {
			continue // not claimed yet, or given back
		}
		h.mu.Lock()
		if n := len(k.states); n > 0 && rec.State == "awaiting_approval" && (k.states[n-1] == "in_flight" || k.states[n-1] == "unknown") &&
			h.madeUpstream(k.key) == 0 {
			// Given back (the approved send never left, or settling
			// proved it made nothing) and held again by a repeat: a new
			// hold, which needs an approval of its own.
			k.states, k.matched, k.ended = nil, false, false
		}
		if n := len(k.states); n > 0 {
			last := k.states[n-1]
			if order[rec.State] < order[last] || (last == "declined" || last == "done") && rec.State != last {
				h.bad = append(h.bad, fmt.Sprintf("%s: state went from %s to %s", k.key, last, rec.State))
			}
		}
		if rec.State == "declined" && !k.matched {
			k.ended = true
		}
		k.states = append(k.states, rec.State)
		h.mu.Unlock()
	}
}

// madeUpstream counts the bank's payments of key.
func (h *holdHistory) madeUpstream(key string) int {
	h.f.bank.mu.Lock()
	defer h.f.bank.mu.Unlock()
	n := 0
	for _, p := range h.f.bank.payments {
		info, _ := p["paymentInformation"].(map[string]any)
		if info["remittanceInformation"] == key {
			n++
		}
	}
	return n
}

// check compares the bank's payments with the model.
func (h *holdHistory) check() {
	made := map[string][]string{}
	h.f.bank.mu.Lock()
	for _, p := range h.f.bank.payments {
		info, _ := p["paymentInformation"].(map[string]any)
		remit, _ := info["remittanceInformation"].(string)
		made[remit] = append(made[remit], p["id"].(string))
	}
	h.f.bank.mu.Unlock()
	for _, k := range h.keys {
		ids := made[k.key]
		switch {
		case len(ids) > 1:
			h.broken("%s: %d payments upstream, want at most one", k.key, len(ids))
		case len(ids) == 1 && k.held && !k.matched:
			h.broken("%s: sent without an approval that matched it", k.key)
		case len(ids) == 1 && k.held && k.ended:
			h.broken("%s: sent after it was declined or expired", k.key)
		case len(ids) == 1 && k.paid != "" && k.paid != ids[0]:
			h.broken("%s: answered payment %s, the key made %s", k.key, k.paid, ids[0])
		}
	}
}

// holdRun is how a history runs: on which ledger, with how many
// instances, and whether time may pass (only a ledger on the test's clock).
type holdRun struct {
	ledger     payments.Ledger // nil: an in-process ledger on the history's clock
	instances  int
	timePasses bool
}

func runHoldHistory(t *testing.T, seed uint64, ops int, run holdRun) *holdHistory {
	clock := &holdClock{}
	led := run.ledger
	if led == nil {
		m, err := ledger.NewMemory(clock.now, make([]byte, 32), nil)
		if err != nil {
			t.Fatal(err)
		}
		led = m
	}
	f := newMoneyFixture(t, led)
	var svcs []*payments.Service
	for range max(run.instances, 1) {
		svcs = append(svcs, payments.New(payments.Options{Upstream: f.fwd, Timeout: 300 * time.Millisecond,
			MoneyRoutes: []string{"/v2/payments", "/v2/pay"}, Ledger: led, EncryptionKey: make([]byte, 32),
			StepUp: &payments.StepUp{Thresholds: map[string]string{"EUR": "100.00"}, ACRValues: []string{"urn:bff:acr:mfa"},
				MaxAge: 5 * time.Minute, HoldFor: 10 * time.Minute, URL: "https://app.example/auth/step-up", Now: clock.now}}))
	}
	h := &holdHistory{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), f: f, svcs: svcs, clock: clock}
	for range 8 {
		h.newKey()
	}
	faults := []string{"", "", "", "hangup", "500", "401", "slow"}
	for done := 0; done < ops; {
		// A batch of one to four operations at once.
		n := 1 + h.rng.IntN(4)
		var wg sync.WaitGroup
		for range n {
			h.mu.Lock()
			k := h.open()
			var op func()
			switch r := h.rng.IntN(100); {
			case r < 20:
				nk := h.newKey()
				op = func() { h.pay(nk) }
			case r < 35:
				op = func() { h.pay(k) }
			case r < 75:
				v := approvalVariants[h.rng.IntN(len(approvalVariants))]
				if fault := faults[h.rng.IntN(len(faults))]; fault != "" {
					f.bank.after.Store(fault) // the next creation misbehaves after acting
				}
				op = func() { h.approve(k, v) }
			case r < 85:
				thief := h.rng.IntN(5) == 0
				op = func() { h.cancel(k, thief) }
			case r < 90 && run.timePasses:
				op = func() {
					clock.pass(11 * time.Minute) // a hold's time runs out
					h.note("11 minutes pass")
				}
			default:
				op = func() { h.pay(k) }
			}
			h.mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); op() }()
			done++
		}
		wg.Wait()
		h.observe()
	}
	h.check()
	return h
}

// holdAmounts are the amounts a history's keys pay: under, over and far
// over the threshold (EUR 100.00).
var holdAmounts = []string{"50.00", "150.00", "1000.00"}

// newKey adds a key to the history, of the next session and a random
// amount; h.mu is held (or the history not started).
func (h *holdHistory) newKey() *holdKey {
	i := len(h.keys)
	k := &holdKey{key: fmt.Sprintf("k%d-%d", h.seed%1000, i), session: []string{"s1", "s2"}[i%2], amount: holdAmounts[h.rng.IntN(len(holdAmounts))]}
	h.keys = append(h.keys, k)
	return k
}

// open picks a key held now more often than not: approvals and cancels
// of live holds are where the races are; h.mu is held.
func (h *holdHistory) open() *holdKey {
	var live []*holdKey
	for _, k := range h.keys {
		if k.ref != "" && !k.ended && k.paid == "" {
			live = append(live, k)
		}
	}
	if len(live) > 0 && h.rng.IntN(4) > 0 {
		return live[h.rng.IntN(len(live))]
	}
	return h.keys[h.rng.IntN(len(h.keys))]
}

func TestHoldHistories(t *testing.T) {
	seed := holdSeed(t)
	// Short in make test (with -race, about 10 s); BFF_HOLD_OPS runs it
	// longer (make chaos).
	ops := 300
	if s := os.Getenv("BFF_HOLD_OPS"); s != "" {
		ops, _ = strconv.Atoi(s)
	}
	for round := range 2 {
		s := seed + uint64(round)
		h := runHoldHistory(t, s, ops, holdRun{instances: 1, timePasses: true})
		reportHold(t, h)
	}
}

// reportHold fails t with h's broken invariants, its seed and its end.
func reportHold(t *testing.T, h *holdHistory) {
	t.Helper()
	tally := map[string]int{}
	for _, l := range h.log {
		verb, rest, _ := strings.Cut(l, " ")
		_, outcome, _ := strings.Cut(rest, ": ")
		tally[verb+" "+strings.TrimSpace(strings.SplitN(outcome, ":", 2)[0])]++
	}
	made := 0
	for _, k := range h.keys {
		made += h.madeUpstream(k.key)
	}
	t.Logf("seed %d: %d operations, %d payments made upstream; answers %v", h.seed, len(h.log), made, tally)
	if len(h.bad) > 0 {
		t.Errorf("seed %d: %d invariant(s) broken; replay with BFF_HOLD_SEED=%d:\n  %s\nhistory (last 40):\n  %s", h.seed, len(h.bad), h.seed,
			strings.Join(h.bad, "\n  "), strings.Join(h.log[max(0, len(h.log)-40):], "\n  "))
	}
}

// TestHoldCheckerCatchesABrokenRule builds this package's tests with the
// mutant approval-content-unchecked (an approval's content is not
// compared) and requires the checker to fail with a seed.
func TestHoldCheckerCatchesABrokenRule(t *testing.T) {
	cmd := exec.Command("go", "test", "-count=1", "-ldflags=-X=github.com/fintech-bff/bff/internal/mutant.active="+mutant.ApprovalContentUnchecked,
		"-run", "^TestHoldHistories$", ".")
	cmd.Env = append(os.Environ(), "BFF_HOLD_OPS=400")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the hold checker passed against a broken approval rule:\n%s", out)
	}
	if !strings.Contains(string(out), "sent without an approval that matched it") || !strings.Contains(string(out), "BFF_HOLD_SEED=") {
		t.Fatalf("the checker failed, but not on the broken rule:\n%s", out)
	}
}
