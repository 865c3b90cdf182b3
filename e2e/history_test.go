//go:build integration

package e2e

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/mutant"
	"github.com/fintech-bff/bff/internal/testing/pgtest"
	"github.com/fintech-bff/bff/internal/upstreamsim"
	"github.com/fintech-bff/bff/internal/webhooks"
)

// The money path's guarantees hold for every interleaving, so they are
// checked over random histories, in the spirit of Jepsen: several clients
// per user on several real instances, over the simulator and PostgreSQL,
// issue random money requests (creations, open-banking inits that create
// or start an existing payment, repeats of a key, path and key-case
// variants, sub-paths the upstream does not define, bodies the money model
// refuses (inexact, non-finite or non-positive amounts, unknown members, a
// paymentId on a creation or beside a new payment's content), every form
// of amount it accepts, compressed bodies, payments made and
// statuses moved at the bank directly) while random faults hit them (the
// upstream acts and answers 401 or its typed 500 or hangs up, hangs up
// before acting, answers past the timeout or holds its answer, refuses
// before acting; its clock steps; an instance is killed; the ledger's
// PostgreSQL freezes; webhooks come twice, late and out of order). Every
// request and its answer is recorded; afterwards the history is checked
// against the simulator's ground truth (which request made each payment):
//
//   - at most once: no key made more than one payment;
//   - true answers: every 2xx of a creating request names the payment
//     that key's own send made (an init of an existing payment names it);
//   - true records: every key the ledger ends as done names its own
//     payment, every key it gives back made none; unknown is allowed, with
//     its reason in the log;
//   - statuses never go back: once a final status is seen it stays, and
//     updatedAt never decreases;
//   - no false 409 or 503: IDEMPOTENCY_IN_PROGRESS only while another
//     request with the key may be running, LEDGER_UNAVAILABLE only near an
//     instance fault;
//   - refused before anything: a body with case-variant keys, a sub-path,
//     a compressed body, a body the money model refuses are neither
//     recorded nor sent;
//   - liveness: a well-formed payment is never refused by the BFF's own
//     routing or reading.
//
// A failure prints the seed (BFF_HISTORY_SEED replays its operations and
// faults; the scheduling is the machine's) and the offending key's
// history. BFF_HISTORY_OPS sets the number of operations (make test: 240;
// make chaos: 10,000, as histories of 1,000), BFF_HISTORY_REPORT where the
// figures go.

const historyTimeout = 1500 * time.Millisecond // upstream.timeout of the instances

func TestPaymentHistories(t *testing.T) {
	seed := historySeed(t)
	total := envInt("BFF_HISTORY_OPS", 240)
	// A long run is many histories of at most historyRound operations,
	// each on fresh instances and a fresh ledger: a user's list stays
	// short enough to be read whole, as most users' are, so every verdict
	// stays reachable.
	const historyRound = 1000
	rounds, broken := 0, 0
	for done := 0; done < total; rounds++ {
		n := min(historyRound, total-done)
		s := seed + uint64(rounds)
		t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) {
			h := runHistory(t, bffBin, s, n)
			bad := h.check()
			h.report(t, bad)
			for _, v := range bad {
				t.Errorf("%s\n%s", v.what, h.around(v.key))
			}
			if len(bad) > 0 {
				t.Errorf("seed %d: %d invariant(s) broken; replay with BFF_HISTORY_SEED=%d BFF_HISTORY_OPS=%d", s, len(bad), s, n)
			}
			broken += len(bad)
		})
		done += n
	}
	writeReport(fmt.Sprintf("total: %d operations in %d histories (seeds %d to %d), invariants broken: %d\n",
		total, rounds, seed, seed+uint64(rounds)-1, broken))
}

// The checker is shown to catch a broken rule: a BFF built with the
// mutant owner-widens-not-made lets another request's naming of a payment
// conclude "not made" (the rule the first attack broke), and the same
// short run finds a key that paid twice.
func TestPaymentHistoriesCatchABrokenRule(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "bff-mutant")
	build := exec.Command("go", "build", "-ldflags=-X=github.com/fintech-bff/bff/internal/mutant.active="+mutant.OwnerWidensNotMade, "-o", bin, "../cmd/bff")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		t.Fatal(err)
	}
	seed := historySeed(t)
	var found []violation
	for run := 0; run < 3 && len(found) == 0; run++ {
		h := runHistory(t, bin, seed+uint64(run), envInt("BFF_HISTORY_OPS", 240))
		found = h.check()
	}
	if len(found) == 0 {
		t.Fatalf("seed %d: three runs against a BFF with a broken settlement rule broke no invariant", seed)
	}
	t.Logf("the broken rule was caught: %s", found[0].what)
}

func historySeed(t *testing.T) uint64 {
	if s := os.Getenv("BFF_HISTORY_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("BFF_HISTORY_SEED: %v", err)
		}
		return n
	}
	return uint64(time.Now().UnixNano())
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// event is one request of the history and its answer.
type event struct {
	user, op, key, path, body, reqID string
	client, attempt                  int
	start, end                       time.Time
	status                           int    // 0: no answer (connection failed)
	code                             string // the problem's code, when there is one
	paid                             string // the payment id a 2xx names
	wantID                           string // an init of an existing payment: the id it names
	creates                          bool
}

// observation is one read of a key's record (GET /bff/payments).
type observation struct {
	at        time.Time
	key       string
	state     string
	status    string
	updatedAt time.Time
}

type history struct {
	t        *testing.T
	seed     uint64
	sim      *upstreamsim.Server
	users    []string
	fronts   []*env
	mu       sync.Mutex
	events   []event
	obs      []observation
	faults   map[string]int
	incident []time.Time    // instance kills and ledger pauses
	pg       *pgtest.Server // the ledger's own server, paused now and then
	simURL   string
	secret   string // the webhooks' signing secret
	final    map[string]map[string]any
	keysOf   map[string]map[string]bool // user -> keys
	// assumed are the keys answered with a direct payment equal to their
	// content that they did not make (the documented assumption).
	assumed map[string]string
	// unknownShare is the share of the ledger's keys that ended unknown.
	unknownShare float64
	// direct are the payments made at the bank directly, true for those
	// whose content equals a request's (the one assumption settling rests
	// on: such a payment inside a lost request's window can pass for it).
	direct map[string]bool
	// ops counts the clients' operations; tick fires the global faults by
	// that count, not by wall time, so a seed replays where they land.
	ops     atomic.Int64
	tick    chan struct{}
	stepRng *rand.Rand // guarded by mu
}

type violation struct{ key, what string }

func runHistory(t *testing.T, bin string, seed uint64, ops int) *history {
	t.Logf("history seed %d, %d operations (BFF_HISTORY_SEED=%d replays it)", seed, ops, seed)
	saved := bffBin
	bffBin = bin
	defer func() { bffBin = saved }()
	pg := pgtest.StartServer(t, pgtest.ServerOptions{})
	hookKey := make([]byte, 32)
	for i := range hookKey {
		hookKey[i] = byte(seed >> (8 * (i % 8)))
	}
	secret := "whsec_" + base64.StdEncoding.EncodeToString(hookKey)
	// Every other history runs against an upstream that sends only what
	// the API documents and lists payments normalised (no updatedAt;
	// unknown members, empties and nulls dropped; amounts as numbers), and
	// every third against one whose list lags its creations (and a BFF told
	// so: payments.list_lag).
	simOpts := upstreamsim.Options{Control: true}
	profile, lag := upstreamsim.ProfileFull, time.Duration(0)
	if seed%2 == 1 {
		profile = upstreamsim.ProfileDocumented
	}
	if seed%3 == 2 {
		lag = 300 * time.Millisecond
	}
	simOpts.ReplyProfile, simOpts.ListLag = profile, lag
	o := options{sim: simOpts, ledgerURL: pg.URL(), upstream: "timeout: " + historyTimeout.String(),
		extraYAML: fmt.Sprintf("trusted_proxies: [\"127.0.0.1/32\"]\npayments: { watch_interval: 300ms, watch_max_interval: 1s, webhook_path: /webhooks/payments, webhook_secrets: [%q], list_lag: %s }", secret, 2*lag)}
	t.Logf("upstream reply profile %s, list lag %s", profile, lag)
	a := start(t, o)
	b := a.another(o)
	// The bank's status changes reach the first instance as webhooks (the
	// second is the one killed).
	hook := a.public + "/webhooks/payments"
	if _, err := a.sim.UpdateSettings(upstreamsim.SettingsPatch{WebhookURL: &hook, WebhookSecret: &secret}); err != nil {
		t.Fatal(err)
	}
	h := &history{t: t, seed: seed, sim: a.sim, fronts: []*env{a, b}, faults: map[string]int{}, direct: map[string]bool{},
		tick: make(chan struct{}, 1), stepRng: rand.New(rand.NewPCG(seed, 7)),
		final: map[string]map[string]any{}, keysOf: map[string]map[string]bool{}, pg: pg, simURL: a.simURL, secret: secret}
	const users, perUser = 4, 3
	tokens := map[string]string{}
	for i := 0; i < users; i++ {
		u := fmt.Sprintf("hist-%d-%d", seed%100000, i)
		h.users = append(h.users, u)
		tokens[u] = a.app("").login(u)
		h.keysOf[u] = map[string]bool{}
	}
	// One user has more payments than one page of the list holds: the
	// snapshot and settling read them page by page.
	if err := h.sim.SeedPayments(h.users[0], 150, nil); err != nil {
		t.Fatal(err)
	}
	// The upstream's clock steps now and then just after a payment list
	// was read: between a snapshot and the send it was read for.
	a.bearers.setAfter(func(r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/v2/payments" {
			return
		}
		h.mu.Lock()
		step := h.stepRng.IntN(50) == 0
		d := time.Duration(h.stepRng.IntN(90)-30) * time.Second
		if step {
			h.faults["clock-step-after-list"]++
		}
		h.mu.Unlock()
		if step {
			h.sim.Advance(d)
		}
	})
	defer a.bearers.setAfter(nil)
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(2)
	go func() { defer bg.Done(); h.watchRecords(tokens, stop) }()
	go func() { defer bg.Done(); h.globalFaults(rand.New(rand.NewPCG(seed, 99)), stop) }()
	var wg sync.WaitGroup
	per := (ops + users*perUser - 1) / (users * perUser)
	for i, u := range h.users {
		for c := 0; c < perUser; c++ {
			wg.Add(1)
			go func(client int) {
				defer wg.Done()
				cl := &histClient{h: h, user: u, token: tokens[u], id: client, rng: rand.New(rand.NewPCG(seed, uint64(client))),
					http: &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{}}}
				for n := 0; n < per; n++ {
					cl.step()
				}
			}(i*perUser + c)
		}
	}
	wg.Wait()
	close(stop)
	bg.Wait()
	for _, f := range h.fronts {
		if f.cmd == nil {
			f.relaunch()
		}
	}
	h.sim.ClearFaults()
	// Quiescence: every claim past its deadline, the settlers' early looks
	// done; then each key is repeated once, which settles what it can.
	// Deliberate: a claim's deadline is on the ledger's clock (PostgreSQL's
	// now(), the real one): timeout plus 5 s, and a second more.
	time.Sleep(historyTimeout + 6*time.Second)
	h.settleAll(tokens)
	h.readFinal(tokens)
	return h
}

// histClient is one client of one user: it picks operations from its own
// seeded generator.
type histClient struct {
	h     *history
	user  string
	token string
	id    int
	rng   *rand.Rand
	http  *http.Client
	n     int
	keys  []event // the requests it may repeat
	seen  []string
}

var historyContents = []string{
	`{"amount":"10.00","currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}}`,
	`{"amount":10,"currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"},"remittanceInformation":"rent"}`,
	`{"amount":25.5,"currency":"EUR","creditorAccount":{"iban":"FR1420041010050500013M02606"}}`,
	`{"amount":"25.50","currency":"EUR","creditorAccount":{"iban":"FR1420041010050500013M02606"}}`,
	`{"amount":7,"currency":"ILS","creditorName":"1e3","creditorAccount":{"iban":"IL620108000000099999999"}}`,
	`{"amount":7,"currency":"ILS","creditorName":"1000","creditorAccount":{"iban":"IL620108000000099999999"}}`,
	// Every form of amount the model accepts: a member that is null or ""
	// is absent, and these two are one payment.
	`{"amount":"1.250","currency":"BHD","creditorAccount":{"iban":"BH67BMAG00001299123456"},"remittanceInformation":""}`,
	`{"amount":1.25,"currency":"BHD","creditorAccount":{"iban":"BH67BMAG00001299123456"},"debtorAccount":null}`,
	`{"amount":1500,"currency":"JPY","creditorAccount":{"iban":"DE89370400440532013000"}}`,
}

// refusedBodies are creation bodies the model refuses with 400
// VALIDATION_ERROR before anything is claimed or sent: amounts that are
// not exact, finite and positive in their currency's minor units, members
// the model does not know, a creation naming a paymentId.
var refusedBodies = []string{
	`{"paymentInformation":{"amount":"10.0000000000000008881784197001262323389053","currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}}}`,
	`{"paymentInformation":{"amount":"10.009999999999998898658759571845711899757385254","currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}}}`,
	`{"paymentInformation":{"amount":"NaN","currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}}}`,
	`{"paymentInformation":{"amount":1e999,"currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}}}`,
	`{"paymentInformation":{"amount":0,"currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}}}`,
	`{"paymentInformation":{"amount":-5,"currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}}}`,
	`{"paymentInformation":{"amount":10.5,"currency":"JPY","creditorAccount":{"iban":"DE89370400440532013000"}}}`,
	`{"paymentInformation":{"amount":10,"currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}},"purposeCode":"OTHR"}`,
	`{"paymentInformation":{"amount":10,"currency":"EUR","endToEndId":"E2E-1","creditorAccount":{"iban":"DE89370400440532013000"}}}`,
	`{"paymentId":"01JSTRAY0001","paymentInformation":{"amount":10,"currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}}}`,
}

func (c *histClient) newKey() string {
	c.n++
	return fmt.Sprintf("k%d-%d-%d", c.h.seed%100000, c.id, c.n)
}

func (c *histClient) step() {
	if n := c.h.ops.Add(1); n%globalFaultEvery == 0 {
		select {
		case c.h.tick <- struct{}{}:
		default: // one is pending
		}
	}
	if c.rng.IntN(100) < 35 {
		c.h.injectFault(c.rng, c.user)
	}
	info := historyContents[c.rng.IntN(len(historyContents))]
	create := `{"paymentInformation":` + info + `,"providerIds":["` + upstreamsim.ProviderSandbox + `"]}`
	switch r := c.rng.IntN(100); {
	case r < 25:
		c.send("create", "/api/v2/payments", create, c.newKey(), true, "")
	case r < 35:
		c.send("create/", "/api/v2/payments/", create, c.newKey(), true, "")
	case r < 50:
		body := `{"providerId":"` + upstreamsim.ProviderSandbox + `","paymentInformation":` + info + `}`
		if c.rng.IntN(3) == 0 { // the trailing slash is the init itself
			c.send("init-new/", "/api/v2/pay/open-banking-init/", body, c.newKey(), true, "")
		} else {
			c.send("init-new", "/api/v2/pay/open-banking-init", body, c.newKey(), true, "")
		}
	case r < 62 && len(c.seen) > 0:
		id := c.seen[len(c.seen)-1-c.rng.IntN(min(3, len(c.seen)))]
		body := `{"providerId":"` + upstreamsim.ProviderSandbox + `","paymentId":"` + id + `"}`
		c.send("init-id", "/api/v2/pay/open-banking-init", body, c.newKey(), false, id)
	case r < 70 && len(c.keys) > 0:
		e := c.keys[c.rng.IntN(len(c.keys))]
		c.send("repeat", e.path, e.body, e.key, e.creates, e.wantID)
	case r < 74:
		c.race(create)
	case r < 82:
		body := `{"paymentInformation":` + info + `,"PaymentInformation":{"amount":1,"currency":"EUR","creditorAccount":{"iban":"X"}},"providerIds":["` + upstreamsim.ProviderSandbox + `"]}`
		c.send("dup-key", "/api/v2/payments", body, c.newKey(), false, "")
	case r < 86:
		// The user pays at the bank directly: a similar payment (same
		// amount and currency), never an equal one (the one assumption).
		// A third of them equal a request's content: settling must then
		// never answer a key that made its own payment with this one, and
		// never adopt two equal payments (made-of-two-equal).
		var m map[string]any
		_ = json.Unmarshal([]byte(info), &m)
		equal := c.rng.IntN(3) == 0
		if !equal {
			m["remittanceInformation"] = fmt.Sprintf("at the bank %d", c.rng.IntN(1000))
		}
		b, _ := json.Marshal(map[string]any{"paymentInformation": m, "providerIds": []string{upstreamsim.ProviderSandbox}})
		if p, err := c.h.sim.CreateDirectPayment(c.user, b); err == nil {
			c.seen = append(c.seen, p.ID)
			c.h.mu.Lock()
			c.h.direct[p.ID] = equal
			if equal {
				c.h.faults["direct-equal"]++
			}
			c.h.mu.Unlock()
		}
	case r < 89:
		// A sub-path the upstream does not define: refused before anything
		// is claimed.
		path := []string{"/api/v2/payments/confirm", "/api/v2/payments/x/y", "/api/v2/pay/open-banking-init/x"}[c.rng.IntN(3)]
		c.send("sub-path", path, create, c.newKey(), false, "")
	case r < 92 && len(c.seen) > 0:
		c.bankStatus(c.seen[c.rng.IntN(len(c.seen))])
	case r < 95 && len(c.seen) > 0:
		c.lateWebhook(c.seen[c.rng.IntN(len(c.seen))])
	case r < 97:
		// A body the model refuses: 400 VALIDATION_ERROR, neither recorded
		// nor sent (the BFF sends what it read, and reads only exact,
		// documented payments); an init naming both an existing payment
		// and a new one's content too.
		if c.rng.IntN(4) == 0 {
			id := fmt.Sprintf("01JSTRAY%04d", c.rng.IntN(10000))
			if len(c.seen) > 0 {
				id = c.seen[c.rng.IntN(len(c.seen))]
			}
			body := `{"providerId":"` + upstreamsim.ProviderSandbox + `","paymentId":"` + id + `","paymentInformation":` + info + `}`
			c.send("refused-body", "/api/v2/pay/open-banking-init", body, c.newKey(), false, "")
			break
		}
		if c.rng.IntN(6) == 0 {
			// A well-formed payment with a query: the upstream defines
			// none, and one that merged it into the body would act on what
			// the BFF never read.
			c.send("refused-body", "/api/v2/payments?amount=99999", create, c.newKey(), false, "")
			break
		}
		body := refusedBodies[c.rng.IntN(len(refusedBodies))]
		c.send("refused-body", "/api/v2/payments", body, c.newKey(), false, "")
	case r < 98:
		// A compressed body: refused before anything is claimed (the BFF
		// reads what it records and settles).
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		_, _ = zw.Write([]byte(create))
		_ = zw.Close()
		c.send("encoded", "/api/v2/payments", gz.String(), c.newKey(), false, "", "Content-Encoding", "gzip")
	default:
		c.list()
	}
}

// bankStatus moves a payment's status at the bank, a second after the
// last change (the upstream stamps updatedAt to the second): forward, or
// back from a final status as a misbehaving bank might. The BFF hears of it
// by webhook or poll, and a final status it has stored must stay.
func (c *histClient) bankStatus(id string) {
	st := []string{"ACTC", "ACSP", "ACSC", "RJCT", "INIT"}[c.rng.IntN(5)]
	c.h.sim.Advance(time.Second)
	if c.h.sim.SetPaymentStatus(c.user, id, st) == nil {
		c.h.mu.Lock()
		c.h.faults["bank-status"]++
		c.h.mu.Unlock()
	}
}

// lateWebhook sends the BFF a webhook out of order: one the simulator
// already delivered, again (a duplicate), or a new one with a status and
// updatedAt older than the payment's (late, out of order).
func (c *histClient) lateWebhook(id string) {
	if c.rng.IntN(2) == 0 {
		var sent []string
		for _, d := range c.h.sim.Webhooks() {
			if d.Delivered {
				sent = append(sent, d.ID)
			}
		}
		if len(sent) == 0 {
			return
		}
		resp, err := c.http.Post(c.h.simURL+"/_sim/webhooks/"+sent[c.rng.IntN(len(sent))]+"/redeliver", "application/json", nil)
		if err == nil {
			resp.Body.Close()
		}
		c.h.mu.Lock()
		c.h.faults["webhook-duplicated"]++
		c.h.mu.Unlock()
		return
	}
	// PAID is no status of the upstream's: one it might add, acknowledged
	// and ignored.
	st := []string{"INIT", "RCVD", "ACTC", "ACSP", "PAID"}[c.rng.IntN(5)]
	updated := c.h.sim.Now().Add(-time.Duration(c.rng.IntN(90)) * time.Second)
	now := time.Now()
	body := fmt.Sprintf(`{"type":"payment.status_changed","timestamp":%q,"data":{"id":%q,"status":%q,"updatedAt":%q}}`,
		now.UTC().Format(time.RFC3339), id, st, updated.UTC().Format(time.RFC3339))
	msgID := fmt.Sprintf("msg_late_%d_%d", c.id, c.rng.Uint64())
	sig, err := webhooks.Sign(c.h.secret, msgID, now, []byte(body))
	if err != nil {
		c.h.t.Error(err)
		return
	}
	req, _ := http.NewRequest(http.MethodPost, c.h.front(c.rng).public+"/webhooks/payments", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", msgID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	if resp, err := c.http.Do(req); err == nil {
		resp.Body.Close()
	}
	c.h.mu.Lock()
	c.h.faults["webhook-late"]++
	c.h.mu.Unlock()
}

// race is the app's own flow against a held answer: a creation whose
// answer the upstream holds (and then refuses with 401 or its typed 500)
// while the app lists the payments and starts the newest at the bank.
func (c *histClient) race(create string) {
	f := upstreamsim.Fault{Method: http.MethodPost, PathPrefix: "/v2/payments", UserID: c.user, Times: 1, AfterActing: true,
		Delay: 600 * time.Millisecond, Status: 401}
	name := "raced-held-401"
	if c.rng.IntN(2) == 0 {
		f.Status, name = 500, "raced-held-500"
	}
	held := c.h.sim.InjectFault(f)
	c.h.mu.Lock()
	c.h.faults[name]++
	c.h.mu.Unlock()
	other := &histClient{h: c.h, user: c.user, token: c.token, id: c.id + 1000, rng: rand.New(rand.NewPCG(c.h.seed, uint64(c.id+1000+c.n))),
		http: c.http, n: c.n}
	key := c.newKey()
	done := make(chan struct{})
	go func() { defer close(done); other.send("create", "/api/v2/payments", create, key, true, "") }()
	// The creation is at the upstream, its answer held: the fault is taken
	// (the upstream acts at once after). A creation that never gets there
	// (its instance killed meanwhile) is a history too: the race goes on.
	_ = poll(5*time.Second, func() error {
		select {
		case <-done:
			return nil
		default:
		}
		if slices.ContainsFunc(c.h.sim.Faults(), func(f upstreamsim.Fault) bool { return f.ID == held }) {
			return errors.New("the creation is not at the upstream yet")
		}
		return nil
	})
	if id := c.list(); id != "" {
		c.send("init-id", "/api/v2/pay/open-banking-init", `{"providerId":"`+upstreamsim.ProviderSandbox+`","paymentId":"`+id+`"}`, c.newKey(), false, id)
	}
	<-done
	c.keys = append(c.keys, other.keys...)
}

// list reads the user's payments through the BFF, as the app does, and
// remembers the ids (an init of an existing payment picks one).
func (c *histClient) list() (newest string) {
	f := c.h.front(c.rng)
	req, _ := http.NewRequest(http.MethodGet, f.public+"/api/v2/payments?limit=5", nil)
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var page struct{ Items []struct{ ID string } }
	if json.NewDecoder(resp.Body).Decode(&page) == nil {
		if len(page.Items) > 0 {
			newest = page.Items[0].ID
		}
		for _, it := range page.Items {
			if !slices.Contains(c.seen, it.ID) {
				c.seen = append(c.seen, it.ID)
			}
		}
	}
	return newest
}

func (c *histClient) send(op, path, body, key string, creates bool, wantID string, hdr ...string) {
	e := event{user: c.user, op: op, key: key, path: path, body: body, client: c.id, creates: creates, wantID: wantID}
	c.h.mu.Lock()
	c.h.keysOf[c.user][key] = true
	for _, x := range c.h.events {
		if x.key == key {
			e.attempt++
		}
	}
	c.h.mu.Unlock()
	e.reqID = fmt.Sprintf("%s-a%d", key, e.attempt)
	f := c.h.front(c.rng)
	req, _ := http.NewRequest(http.MethodPost, f.public+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("X-Request-Id", e.reqID)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	e.start = time.Now()
	resp, err := c.http.Do(req)
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		e.status = resp.StatusCode
		var v struct {
			Code      string `json:"code"`
			ID        string `json:"id"`
			PaymentID string `json:"paymentId"`
		}
		_ = json.Unmarshal(b, &v)
		e.code = v.Code
		if e.status < 300 {
			e.paid = v.ID
			if e.paid == "" {
				e.paid = v.PaymentID
			}
			c.seen = append(c.seen, e.paid)
		}
	}
	e.end = time.Now()
	if e.code != "IDEMPOTENCY_KEY_REUSED" && !refusedOp(op) && op != "repeat" {
		c.keys = append(c.keys, e)
	}
	c.h.mu.Lock()
	c.h.events = append(c.h.events, e)
	c.h.mu.Unlock()
}

// refusedOp reports whether op sends a request the BFF refuses before
// anything is claimed: such a key is never repeated nor settled.
func refusedOp(op string) bool {
	return op == "dup-key" || op == "sub-path" || op == "encoded" || op == "refused-body"
}

// front picks an instance at random: a killed one is not skipped, and its
// requests get no answer (status 0), as a client of a dead instance does.
func (h *history) front(rng *rand.Rand) *env {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fronts[rng.IntN(len(h.fronts))]
}

// injectFault arms one fault for the user's next money POST.
func (h *history) injectFault(rng *rand.Rand, user string) {
	f := upstreamsim.Fault{Method: http.MethodPost, PathPrefix: "/v2/pay", UserID: user, Times: 1}
	var name string
	switch rng.IntN(11) {
	case 10:
		// The upstream acts a second after the BFF stopped waiting (within
		// the 5 s the window allows it).
		name, f.ActLate, f.Delay = "acted-late", true, historyTimeout+time.Second
	case 0:
		name, f.AfterActing, f.Status = "acted-401", true, 401
	case 1:
		name, f.AfterActing, f.Status = "acted-500", true, 500
	case 2:
		name, f.AfterActing, f.HangUp = "acted-hangup", true, true
	case 3:
		name, f.HangUp = "hangup-before", true
	case 4:
		name, f.AfterActing, f.Delay = "acted-answer-late", true, historyTimeout+500*time.Millisecond
	case 5:
		name, f.AfterActing, f.Delay, f.Status = "acted-held-401", true, 700*time.Millisecond, 401
	case 6:
		name, f.Status, f.Body = "refused-mcp-503", 503, `{"type":"MCP_TEMPORARILY_UNAVAILABLE","message":"verification failing"}`
	case 7:
		name, f.Status, f.Body = "refused-provider-400", 400, `{"type":"PROVIDER_UNAVAILABLE","message":"the bank is down"}`
	case 8:
		name, f.Status, f.Body = "refused-mcp-403", 403, `{"type":"MCP_FORBIDDEN","message":"not allowed"}`
	default:
		name, f.AfterActing, f.Delay, f.Status = "acted-held-500", true, 700*time.Millisecond, 500
	}
	h.sim.InjectFault(f)
	h.mu.Lock()
	h.faults[name]++
	h.mu.Unlock()
}

// globalFaultEvery is how many operations of the clients pass between two
// global faults.
const globalFaultEvery = 12

// globalFaults steps the upstream's clock, kills an instance or freezes
// the ledger every globalFaultEvery operations, until stop.
func (h *history) globalFaults(rng *rand.Rand, stop chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-h.tick:
		}
		switch rng.IntN(4) {
		case 0:
			d := time.Duration(rng.IntN(120)-40) * time.Second
			h.sim.Advance(d)
			h.mu.Lock()
			h.faults["clock-step"]++
			h.mu.Unlock()
		case 1:
			f := h.fronts[1]
			f.kill()
			h.mu.Lock()
			h.incident = append(h.incident, time.Now())
			h.faults["instance-killed"]++
			h.mu.Unlock()
			time.Sleep(300 * time.Millisecond) // deliberate: the instance stays dead a while
			f.relaunch()
		case 2:
			// The ledger's server freezes, as a stopped VM does, and wakes.
			h.mu.Lock()
			h.incident = append(h.incident, time.Now())
			h.faults["ledger-paused"]++
			h.mu.Unlock()
			h.pg.Pause()
			time.Sleep(time.Duration(300+rng.IntN(1200)) * time.Millisecond) // deliberate: the freeze's length
			h.pg.Resume()
		}
	}
}

// watchRecords reads every user's records until stop, for the status
// invariant.
func (h *history) watchRecords(tokens map[string]string, stop chan struct{}) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	for {
		select {
		case <-stop:
			return
		case <-time.After(250 * time.Millisecond):
		}
		for _, u := range h.users {
			h.readRecords(client, u, tokens[u], false)
		}
	}
}

func (h *history) readRecords(client *http.Client, user, token string, final bool) {
	cursor := ""
	pages := 1 // while the history runs: the newest records, where statuses move
	if final {
		pages = 1000
	}
	for page := 0; page < pages; page++ {
		req, _ := http.NewRequest(http.MethodGet, h.fronts[0].public+"/bff/payments?limit=100&cursor="+cursor, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			return
		}
		var p struct {
			Items      []map[string]any
			NextCursor string
		}
		err = json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		if err != nil {
			return
		}
		now := time.Now()
		h.mu.Lock()
		for _, it := range p.Items {
			key, _ := it["key"].(string)
			o := observation{at: now, key: key}
			o.state, _ = it["state"].(string)
			o.status, _ = it["paymentStatus"].(string)
			if s, ok := it["updatedAt"].(string); ok {
				o.updatedAt, _ = time.Parse(time.RFC3339Nano, s)
			}
			h.obs = append(h.obs, o)
			if final {
				h.final[key] = it
			}
		}
		h.mu.Unlock()
		if p.NextCursor == "" {
			return
		}
		cursor = p.NextCursor
	}
}

// settleAll repeats every key that is not done, once, as an app that was
// told to check the status would.
func (h *history) settleAll(tokens map[string]string) {
	h.mu.Lock()
	last := map[string]event{}
	for _, e := range h.events {
		if !refusedOp(e.op) {
			last[e.key] = e
		}
	}
	h.mu.Unlock()
	keys := make([]string, 0, len(last))
	for k := range last {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		e := last[k]
		if e.status >= 200 && e.status < 300 {
			continue
		}
		c := &histClient{h: h, user: e.user, token: tokens[e.user], id: e.client, rng: rand.New(rand.NewPCG(h.seed, 7)),
			http: &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{}}}
		c.send("settle-repeat", e.path, e.body, e.key, e.creates, e.wantID)
	}
}

func (h *history) readFinal(tokens map[string]string) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
	for _, u := range h.users {
		h.readRecords(client, u, tokens[u], true)
	}
}

var finalStatuses = map[string]bool{"ACSC": true, "ACCC": true, "RJCT": true, "CANC": true, "ERROR": true}

// check holds the history to the invariants.
// maxUnknownShare bounds the share of keys a history may leave unknown.
// The workload here is adversarial: a few contents repeated by four
// clients at once (so several equal payments, and other requests that
// could have made one, are the rule), a fault on a third of the requests,
// clock steps between a snapshot and its send; about 35% of its keys end
// unknown (bench/histories.txt). Far more means settling stopped proving
// what it can.
const maxUnknownShare = 0.5

func (h *history) check() []violation {
	var bad []violation
	h.assumed = map[string]string{}
	origin := map[string]string{} // payment id -> request id that made it
	for _, u := range h.users {
		for id, rq := range h.sim.PaymentOrigins(u) {
			origin[id] = rq
		}
	}
	keyOfRequest := map[string]string{}
	for _, e := range h.events {
		keyOfRequest[e.reqID] = e.key
	}
	made := map[string][]string{} // key -> payments its sends made
	for id, rq := range origin {
		if k, ok := keyOfRequest[rq]; ok {
			made[k] = append(made[k], id)
		} else if base, _, ok := strings.Cut(rq, "-settle-"); ok && keyOfRequest[base] != "" {
			bad = append(bad, violation{keyOfRequest[base], fmt.Sprintf("payment %s was made by a settler's request %q", id, rq)})
		}
	}
	for k, ids := range made {
		if len(ids) > 1 {
			bad = append(bad, violation{k, fmt.Sprintf("key %s made %d payments: %v", k, len(ids), ids)})
		}
	}
	for _, e := range h.events {
		if e.status < 200 || e.status >= 300 {
			continue
		}
		switch {
		case e.op == "dup-key":
			bad = append(bad, violation{e.key, fmt.Sprintf("a body with case-variant keys was answered %d", e.status)})
		case e.op == "encoded":
			bad = append(bad, violation{e.key, fmt.Sprintf("a compressed body was answered %d", e.status)})
		case e.op == "refused-body":
			bad = append(bad, violation{e.key, fmt.Sprintf("a body the model refuses was answered %d", e.status)})
		case e.creates && len(made[e.key]) <= 1 && h.direct[e.paid]:
			// The one assumption settling rests on, broken on purpose: a
			// payment equal to the request's, made at the bank inside its
			// window, passed for the lost request's (docs/payments.md,
			// "Where the guarantee ends"). Counted, not a violation. The
			// key's own payment, when there is one, is one the upstream
			// made late (after the answer was lost), not yet listed when
			// settling concluded: two equal payments listed are never
			// concluded made (the Go checker, TestMoneyHistories, tells
			// those apart by the list reads, and its mutants hold it).
			h.assumed[e.key] = e.paid
		case e.creates && (len(made[e.key]) != 1 || made[e.key][0] != e.paid):
			bad = append(bad, violation{e.key, fmt.Sprintf("request %s was answered %d with payment %s, but its key made %v", e.reqID, e.status, e.paid, made[e.key])})
		case !e.creates && e.wantID != "" && e.paid != e.wantID:
			bad = append(bad, violation{e.key, fmt.Sprintf("an init of payment %s was answered with payment %s", e.wantID, e.paid)})
		}
	}
	for _, e := range h.events {
		// Status 0 is no answer at all: the instance was killed mid-request.
		if e.op == "dup-key" && e.status != 0 && (e.status != 400 || e.code != "VALIDATION_ERROR") {
			bad = append(bad, violation{e.key, fmt.Sprintf("a body with case-variant keys got %d %s, want 400 VALIDATION_ERROR", e.status, e.code)})
		}
		if e.op == "dup-key" && h.final[e.key] != nil {
			bad = append(bad, violation{e.key, "a body with case-variant keys was recorded in the ledger"})
		}
		if e.op == "sub-path" && e.status != 0 && (e.status != 404 || e.code != "ROUTE_NOT_FOUND") {
			bad = append(bad, violation{e.key, fmt.Sprintf("a POST to %s got %d %s, want 404 ROUTE_NOT_FOUND", e.path, e.status, e.code)})
		}
		if e.op == "encoded" && e.status != 0 && (e.status != 400 || e.code != "BAD_REQUEST") {
			bad = append(bad, violation{e.key, fmt.Sprintf("a compressed body got %d %s, want 400 BAD_REQUEST", e.status, e.code)})
		}
		if e.op == "encoded" && (h.final[e.key] != nil || len(made[e.key]) > 0) {
			bad = append(bad, violation{e.key, fmt.Sprintf("a compressed body was recorded or made a payment (%v)", made[e.key])})
		}
		if e.op == "refused-body" && e.status != 0 && (e.status != 400 || e.code != "VALIDATION_ERROR") {
			bad = append(bad, violation{e.key, fmt.Sprintf("a body the model refuses got %d %s, want 400 VALIDATION_ERROR", e.status, e.code)})
		}
		if e.op == "refused-body" && (h.final[e.key] != nil || len(made[e.key]) > 0) {
			bad = append(bad, violation{e.key, fmt.Sprintf("a body the model refuses was recorded or made a payment (%v)", made[e.key])})
		}
		// Liveness: a well-formed payment is never refused by the BFF's own
		// routing or reading (the upstream's own 400s carry its types, and
		// the faults here never answer VALIDATION_ERROR or 404).
		if e.creates && (e.code == "ROUTE_NOT_FOUND" || e.code == "VALIDATION_ERROR" || e.code == "BAD_REQUEST") {
			bad = append(bad, violation{e.key, fmt.Sprintf("a well-formed payment to %s was refused %d %s by the BFF", e.path, e.status, e.code)})
		}
		if e.op == "sub-path" && (h.final[e.key] != nil || len(made[e.key]) > 0) {
			bad = append(bad, violation{e.key, fmt.Sprintf("a POST to %s was recorded or made a payment (%v)", e.path, made[e.key])})
		}
	}
	for k, rec := range h.final {
		state, _ := rec["state"].(string)
		pid, _ := rec["paymentId"].(string)
		creates := false
		for _, e := range h.events {
			if e.key == k {
				creates = e.creates
			}
		}
		if state == "done" && creates && pid != "" && len(made[k]) <= 1 && h.direct[pid] {
			h.assumed[k] = pid // as above: the documented assumption
		} else if state == "done" && creates && pid != "" && (len(made[k]) != 1 || made[k][0] != pid) {
			bad = append(bad, violation{k, fmt.Sprintf("the ledger ended key %s done with payment %s, but its key made %v", k, pid, made[k])})
		}
		if state == "done" && creates && pid == "" && len(made[k]) > 0 {
			bad = append(bad, violation{k, fmt.Sprintf("the ledger ended key %s done without a payment, but its key made %v", k, made[k])})
		}
	}
	for _, u := range h.users {
		for k := range h.keysOf[u] {
			if h.final[k] == nil && len(made[k]) > 0 {
				bad = append(bad, violation{k, fmt.Sprintf("key %s was given back, but it made %v", k, made[k])})
			}
		}
	}
	// Unknown outcomes stay few: a history where most keys end unknown
	// would hold every invariant and tell the user nothing.
	unknown, ended := 0, 0
	for k, rec := range h.final {
		state, _ := rec["state"].(string)
		if state == "" || k == "" {
			continue
		}
		ended++
		if state == "unknown" {
			unknown++
		}
	}
	h.unknownShare = 0
	if ended > 0 {
		h.unknownShare = float64(unknown) / float64(ended)
	}
	if h.unknownShare > maxUnknownShare {
		bad = append(bad, violation{"", fmt.Sprintf("%d of %d keys (%.0f%%) ended unknown, over the %.0f%% bound", unknown, ended, 100*h.unknownShare, 100*maxUnknownShare)})
	}
	// Statuses never go back.
	lastSeen := map[string]observation{}
	for _, o := range h.obs {
		prev, ok := lastSeen[o.key]
		if ok && finalStatuses[prev.status] && o.status != prev.status {
			bad = append(bad, violation{o.key, fmt.Sprintf("key %s's payment status went from final %s to %q", o.key, prev.status, o.status)})
		}
		if ok && !o.updatedAt.IsZero() && o.updatedAt.Before(prev.updatedAt) {
			bad = append(bad, violation{o.key, fmt.Sprintf("key %s's updatedAt went back from %v to %v", o.key, prev.updatedAt, o.updatedAt)})
		}
		lastSeen[o.key] = o
	}
	// No false 409 or 503.
	deadline := historyTimeout + 5*time.Second + time.Second
	for i, e := range h.events {
		switch e.code {
		case "IDEMPOTENCY_IN_PROGRESS":
			running := false
			for j, x := range h.events {
				if j != i && x.key == e.key && x.start.Before(e.end) && (x.end.After(e.start) || (x.status == 0 && e.start.Sub(x.start) < deadline)) {
					running = true
				}
			}
			if !running && !h.incidentNear(e.start, deadline) {
				bad = append(bad, violation{e.key, fmt.Sprintf("request %s got 409 IDEMPOTENCY_IN_PROGRESS with no other request of its key running", e.reqID)})
			}
		case "LEDGER_UNAVAILABLE":
			if !h.incidentNear(e.start, deadline) {
				bad = append(bad, violation{e.key, fmt.Sprintf("request %s got 503 LEDGER_UNAVAILABLE with the ledger up and no instance fault", e.reqID)})
			}
		}
	}
	return bad
}

func (h *history) incidentNear(t time.Time, within time.Duration) bool {
	for _, k := range h.incident {
		if t.After(k.Add(-time.Second)) && t.Sub(k) < within {
			return true
		}
	}
	return false
}

// around is the shortest history that shows a violation: every request of
// the key's user whose body asks for the same payment, or that names the
// same key, in order.
func (h *history) around(key string) string {
	var user, body string
	for _, e := range h.events {
		if e.key == key {
			user, body = e.user, e.body
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "history of %s (seed %d):\n", key, h.seed)
	for _, e := range h.events {
		if e.user != user || (e.key != key && !sharesPayment(e.body, body)) {
			continue
		}
		fmt.Fprintf(&b, "  %s +%4dms c%d %-13s %-30s %s -> %d %s %s\n", e.start.Format("15:04:05.000"), e.end.Sub(e.start).Milliseconds(),
			e.client, e.op, e.path, e.reqID, e.status, e.code, e.paid)
	}
	origins := h.sim.PaymentOrigins(user)
	ids := make([]string, 0, len(origins))
	for id := range origins {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if strings.HasPrefix(origins[id], key+"-") {
			fmt.Fprintf(&b, "  upstream payment %s made by %s\n", id, origins[id])
		}
	}
	return b.String()
}

func sharesPayment(a, b string) bool {
	var x, y struct {
		PaymentInformation json.RawMessage `json:"paymentInformation"`
	}
	_ = json.Unmarshal([]byte(a), &x)
	_ = json.Unmarshal([]byte(b), &y)
	return len(x.PaymentInformation) > 0 && string(x.PaymentInformation) == string(y.PaymentInformation)
}

// report writes what was explored and held.
func (h *history) report(t *testing.T, bad []violation) {
	counts := map[string]int{}
	answers := map[string]int{}
	for _, e := range h.events {
		counts[e.op]++
		a := strconv.Itoa(e.status)
		if e.code != "" {
			a += " " + e.code
		}
		answers[a]++
	}
	states := map[string]int{}
	for _, rec := range h.final {
		s, _ := rec["state"].(string)
		states[s]++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d requests on %d instances for %d users, %d record reads; invariants broken: %d\n",
		h.seed, len(h.events), len(h.fronts), len(h.users), len(h.obs), len(bad))
	fmt.Fprintf(&b, "unknown: %.1f%% of the keys the ledger ended; answered with an equal payment made at the bank (the documented assumption): %d\n",
		100*h.unknownShare, len(h.assumed))
	for _, m := range []struct {
		name string
		m    map[string]int
	}{{"operations", counts}, {"answers", answers}, {"faults", h.faults}, {"final records", states}} {
		keys := make([]string, 0, len(m.m))
		for k := range m.m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintf(&b, "%s:", m.name)
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%d", k, m.m[k])
		}
		b.WriteString("\n")
	}
	reasons := map[string]int{}
	for _, f := range h.fronts {
		for _, line := range strings.Split(f.logs.String(), "\n") {
			if strings.Contains(line, "the outcome stays unknown") {
				var v struct{ Reason string }
				_ = json.Unmarshal([]byte(line), &v)
				reasons[v.Reason]++
			}
		}
	}
	fmt.Fprintf(&b, "why settling left outcomes unknown (per look):")
	for r, n := range reasons {
		fmt.Fprintf(&b, " %q=%d", r, n)
	}
	b.WriteString("\n")
	t.Log(b.String())
	writeReport(b.String())
}

// writeReport appends s to the file BFF_HISTORY_REPORT names, if any.
func writeReport(s string) {
	if path := os.Getenv("BFF_HISTORY_REPORT"); path != "" {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			_, _ = f.WriteString(s)
			f.Close()
		}
	}
}
