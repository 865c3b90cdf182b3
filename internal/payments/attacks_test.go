package payments_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/proxy"
	"github.com/fintech-bff/bff/internal/testing/poll"
	"github.com/fintech-bff/bff/internal/testing/testclock"
	"github.com/fintech-bff/bff/internal/tokens"
	"github.com/fintech-bff/bff/internal/upstreamsim"
)

// The attacks an adversarial pass made on the settlement rules,
// each an ordinary sequence of requests against the upstream simulator;
// each paid twice or answered a false "paid" before the rules became one
// function (Conclude, conclude.go).

// simTokens mints the user's token at the simulator, as the token manager
// does, and forgets it when told.
type simTokens struct {
	base string
	mu   sync.Mutex
	have map[string]string
}

func (s *simTokens) Token(ctx context.Context, userID string) (tokens.Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v := s.have[userID]; v != "" {
		return tokens.Token{Value: v, Expiry: time.Now().Add(time.Hour)}, nil
	}
	body, _ := json.Marshal(map[string]string{"clientId": "c", "clientSecret": "s", "userId": userID})
	resp, err := http.Post(s.base+"/oauth/token", "application/json", bytes.NewReader(body))
	if err != nil {
		return tokens.Token{}, err
	}
	defer resp.Body.Close()
	var v struct{ AccessToken string }
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || v.AccessToken == "" {
		return tokens.Token{}, fmt.Errorf("mint: %d %v", resp.StatusCode, err)
	}
	s.have[userID] = v.AccessToken
	return tokens.Token{Value: v.AccessToken, Expiry: time.Now().Add(time.Hour)}, nil
}

func (s *simTokens) InvalidateToken(_ context.Context, userID, _ string) error {
	s.mu.Lock()
	delete(s.have, userID)
	s.mu.Unlock()
	return nil
}

type attack struct {
	sim   *upstreamsim.Server
	svc   *payments.Service
	fwd   *proxy.Forwarder
	led   *ledger.Memory
	clock *testclock.Clock
	base  int // the user's payments before the attack (the simulator's fixtures)
	// before, when set, runs before the simulator serves a request.
	before func(r *http.Request)
}

const attackUser = "mallory"

func newAttack(t *testing.T) *attack {
	t.Helper()
	a := &attack{sim: upstreamsim.New(upstreamsim.Options{ClientID: "c", ClientSecret: "s"}), clock: testclock.New(time.Now())}
	t.Cleanup(a.sim.Close)
	// Like most frameworks (Express, Rails, Spring), this upstream routes a
	// trailing slash like the bare path.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.before != nil {
			a.before(r)
		}
		if len(r.URL.Path) > 1 {
			r.URL.Path = strings.TrimSuffix(r.URL.Path, "/")
		}
		a.sim.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	base, _ := url.Parse(srv.URL)
	var err error
	if a.led, err = ledger.NewMemory(a.clock.Now, make([]byte, 32), nil); err != nil {
		t.Fatal(err)
	}
	a.fwd = proxy.New(proxy.Options{BaseURL: base, Routes: proxy.NewRoutes(contractRoutes), Tokens: &simTokens{base: srv.URL, have: map[string]string{}},
		Timeout: 2 * time.Second, MaxBodyBytes: 1 << 16, Retry: proxy.Retry{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}})
	a.svc = payments.New(payments.Options{Upstream: a.fwd, Timeout: 2 * time.Second, MoneyRoutes: []string{"/v2/payments", "/v2/pay"}, Ledger: a.led})
	a.base = len(a.sim.PaymentOrigins(attackUser))
	return a
}

func (a *attack) post(t *testing.T, path, body, key string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "http://bff.local/api"+path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", key)
	w := httptest.NewRecorder()
	serve(t, a.fwd, a.svc, w, r, proxy.Call{UserID: attackUser, RequestID: "req-" + key, Path: path, ClientIP: "203.0.113.9", SessionRef: "h"})
	return w
}

// madeBy counts the payments the upstream made for each request id.
func (a *attack) madeBy() map[string]int {
	out := map[string]int{}
	for _, rq := range a.sim.PaymentOrigins(attackUser) {
		out[rq]++
	}
	return out
}

// payments counts the payments made since the attack began.
func (a *attack) payments() int { return len(a.sim.PaymentOrigins(attackUser)) - a.base }

// listedFor is the id of the payment the request requestID made, once the
// user's list shows it ("" until then). The app picks the payment it sees
// listed; the test finds it by the simulator's ground truth, never as "the
// newest in the list": the simulator's fixtures may be newer than a payment
// that is still being made.
func (a *attack) listedFor(t *testing.T, requestID string) string {
	t.Helper()
	var id string
	for pid, origin := range a.sim.PaymentOrigins(attackUser) {
		if origin == requestID {
			id = pid
		}
	}
	if id == "" {
		return ""
	}
	r := httptest.NewRequest(http.MethodGet, "http://bff.local/api/v2/payments?limit=100", nil)
	w := httptest.NewRecorder()
	serve(t, a.fwd, a.svc, w, r, proxy.Call{UserID: attackUser, RequestID: "list", Path: "/v2/payments"})
	var page struct{ Items []struct{ ID string } }
	_ = json.Unmarshal(w.Body.Bytes(), &page)
	for _, p := range page.Items {
		if p.ID == id {
			return id
		}
	}
	return ""
}

const (
	attackInfo    = `{"amount":"40.00","currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}}`
	attackPayment = `{"paymentInformation":` + attackInfo + `,"providerIds":["demobank-sandbox"]}`
)

func attackFault(f upstreamsim.Fault) upstreamsim.Fault {
	f.UserID, f.Method, f.Times = attackUser, http.MethodPost, 1
	return f
}

// waitTaken waits until the simulator has taken the fault with this id:
// its one request is at the upstream, held.
func (a *attack) waitTaken(t *testing.T, id string) {
	t.Helper()
	poll.Until(t, 5*time.Second, "fault "+id+": its request reached the upstream", func() bool {
		return !slices.ContainsFunc(a.sim.Faults(), func(f upstreamsim.Fault) bool { return f.ID == id })
	})
}

func paidIDOf(w *httptest.ResponseRecorder) string {
	var v struct{ ID, PaymentID string }
	_ = json.Unmarshal(w.Body.Bytes(), &v)
	if v.ID != "" {
		return v.ID
	}
	return v.PaymentID
}

// 1. The app starts at the bank the payment it sees listed while the
// creation's answer is held and then refused with 401: that init names the
// payment but never owns its creation, so the creation is not resent.
func TestAttackInitOfAHeldPaymentIsNotAResend(t *testing.T) {
	a := newAttack(t)
	a.sim.InjectFault(attackFault(upstreamsim.Fault{PathPrefix: "/v2/payments", AfterActing: true, Delay: 400 * time.Millisecond, Status: 401}))
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- a.post(t, "/v2/payments", attackPayment, "K1") }()
	var id string
	poll.Until(t, 2*time.Second, "the held payment listed", func() bool {
		id = a.listedFor(t, "req-K1")
		return id != ""
	})
	if w := a.post(t, "/v2/pay/open-banking-init", `{"providerId":"demobank-sandbox","paymentId":"`+id+`"}`, "K2"); w.Code != 200 {
		t.Fatalf("the init: got %d %s", w.Code, w.Body)
	}
	w := <-done
	if n := a.madeBy()["req-K1"]; n != 1 {
		t.Fatalf("K1 made %d payments, want 1 (answered %d %s)", n, w.Code, w.Body)
	}
	if w.Code == 201 && paidIDOf(w) != id {
		t.Fatalf("K1 was answered 201 with %s, want %s", paidIDOf(w), id)
	}
}

// 2. A creation hung up before the upstream acted is never answered with
// the payment an open-banking init of the same content made meanwhile and
// was refused with the typed 500 for.
func TestAttackAnInitsPaymentIsNeverAnotherRequests(t *testing.T) {
	a := newAttack(t)
	held := a.sim.InjectFault(attackFault(upstreamsim.Fault{PathPrefix: "/v2/payments", Delay: 400 * time.Millisecond, HangUp: true}))
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- a.post(t, "/v2/payments", attackPayment, "K1") }()
	a.waitTaken(t, held) // K1 is at the upstream, held before acting
	a.sim.InjectFault(attackFault(upstreamsim.Fault{PathPrefix: "/v2/pay/", AfterActing: true, Status: 500}))
	a.post(t, "/v2/pay/open-banking-init", `{"providerId":"demobank-sandbox","paymentInformation":`+attackInfo+`}`, "K3")
	w := <-done
	if n := a.madeBy()["req-K1"]; n != 0 {
		t.Fatalf("K1 made %d payments, want 0", n)
	}
	if w.Code == 201 {
		t.Fatalf("K1 was answered 201 %s with the payment K3 made", w.Body)
	}
	if again := a.post(t, "/v2/pay/open-banking-init", `{"providerId":"demobank-sandbox","paymentInformation":`+attackInfo+`}`, "K3"); a.payments() != 1 {
		t.Fatalf("K3's repeat (%d %s) made the user %d payments, want 1", again.Code, again.Body, a.payments())
	}
}

// 3. A trailing slash is the creation: claimed, sent as the creation, and
// settled as one, so its typed 500 after acting does not give the key back.
func TestAttackTrailingSlashIsTheCreation(t *testing.T) {
	a := newAttack(t)
	a.sim.InjectFault(attackFault(upstreamsim.Fault{PathPrefix: "/v2/payments", AfterActing: true, Status: 500}))
	first := a.post(t, "/v2/payments/", attackPayment, "K1")
	again := a.post(t, "/v2/payments/", attackPayment, "K1")
	if n := a.payments(); n != 1 {
		t.Fatalf("one key made %d payments (answers %d, %d), want 1", n, first.Code, again.Code)
	}
	if w := a.post(t, "/v2/payments/01JPAY/x", attackPayment, "K9"); w.Code != 404 {
		t.Fatalf("a sub-path the upstream does not define: got %d %s, want 404", w.Code, w.Body)
	}
}

// 4. The upstream's clock steps between the snapshot and the creation,
// forward or back (an NTP step, a resumed VM): the payment falls outside
// the window, which may stop adopting it but never makes it "not made".
func TestAttackClockStepIsNeverNotMade(t *testing.T) {
	for _, step := range []time.Duration{time.Minute, -time.Minute} {
		t.Run(step.String(), func(t *testing.T) {
			a := newAttack(t)
			a.sim.InjectFault(attackFault(upstreamsim.Fault{PathPrefix: "/v2/payments", AfterActing: true, Status: 401}))
			var once sync.Once
			a.before = func(r *http.Request) {
				if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v2/payments") { // the creation, not the token's POST
					once.Do(func() { a.sim.Advance(step) })
				}
			}
			w := a.post(t, "/v2/payments", attackPayment, "K1")
			if n := a.payments(); n != 1 {
				t.Fatalf("one key made %d payments (answered %d %s), want 1", n, w.Code, w.Body)
			}
		})
	}
}

// 5. Bodies are read as the upstream reads them: two keys that differ only
// in case are refused before anything is claimed, and content is compared
// exactly, so a payment to "1000" is never a request's for "1e3".
func TestAttackBodiesReadAsTheUpstreamReadsThem(t *testing.T) {
	a := newAttack(t)
	body := `{"paymentInformation":` + attackInfo + `,"PaymentInformation":{"amount":1,"currency":"EUR","creditorAccount":{"iban":"X"}},"providerIds":["demobank-sandbox"]}`
	w := a.post(t, "/v2/payments", body, "K1")
	if p := decodeProblem(t, w); w.Code != 400 || p.Code != "VALIDATION_ERROR" || len(p.Fields) != 1 || p.Fields[0].Field != "PaymentInformation" {
		t.Fatalf("got %d %s, want 400 VALIDATION_ERROR naming PaymentInformation", w.Code, w.Body)
	}
	if n := a.payments(); n != 0 {
		t.Fatalf("the upstream made %d payments, want 0", n)
	}
	if _, rec, _ := a.led.Claim(context.Background(), ledger.Request{UserID: attackUser, Route: "/v2/payments", Key: "K1", Fingerprint: []byte("x")}, time.Minute); rec != nil {
		t.Fatalf("the refused body was claimed: %+v", rec)
	}

	info := `{"amount":5,"currency":"EUR","creditorName":"1e3","creditorAccount":{"iban":"DE89370400440532013000"}}`
	held := a.sim.InjectFault(attackFault(upstreamsim.Fault{PathPrefix: "/v2/payments", Delay: 300 * time.Millisecond, HangUp: true}))
	done := make(chan *httptest.ResponseRecorder)
	go func() {
		done <- a.post(t, "/v2/payments", `{"paymentInformation":`+info+`,"providerIds":["demobank-sandbox"]}`, "K2")
	}()
	a.waitTaken(t, held) // K2 is at the upstream
	other := `{"paymentInformation":` + strings.Replace(info, `"1e3"`, `"1000"`, 1) + `,"providerIds":["demobank-sandbox"]}`
	if _, err := a.sim.CreateDirectPayment(attackUser, []byte(other)); err != nil {
		t.Fatal(err)
	}
	if w := <-done; w.Code == 201 {
		t.Fatalf("K2 was answered 201 %s with a payment to another creditor", w.Body)
	}
}

// 7. The upstream's own "cannot verify the caller right now", before it
// acts, is its 503 to the client and gives the key back.
func TestAttackPreActionRefusalGivesTheKeyBack(t *testing.T) {
	a := newAttack(t)
	a.sim.InjectFault(attackFault(upstreamsim.Fault{PathPrefix: "/v2/payments", Status: 503, Body: `{"type":"MCP_TEMPORARILY_UNAVAILABLE","message":"try again"}`}))
	w := a.post(t, "/v2/payments", attackPayment, "K1")
	if p := decodeProblem(t, w); w.Code != 503 || p.Code != "MCP_TEMPORARILY_UNAVAILABLE" || p.Action != "retry_later" {
		t.Fatalf("got %d %s, want 503 MCP_TEMPORARILY_UNAVAILABLE retry_later", w.Code, w.Body)
	}
	if again := a.post(t, "/v2/payments", attackPayment, "K1"); again.Code != 201 || a.payments() != 1 {
		t.Fatalf("the retry: got %d %s and %d payments, want 201 and 1", again.Code, again.Body, a.payments())
	}
}

// 8. An owner killed after its send mark, while the upstream had not acted
// yet: once the window has passed and no similar payment is listed, the
// settler gives the key back and the repeat runs it.
func TestAttackUnknownNeverMadeIsGivenBack(t *testing.T) {
	a := newAttack(t)
	req := ledger.Request{UserID: attackUser, Route: "/v2/payments", Key: "K1",
		Fingerprint: payments.Fingerprint(http.MethodPost, "/v2/payments", "", []byte(attackPayment)),
		Content:     payments.PaymentContent([]byte(attackPayment)), RequestID: "req-dead"}
	c, _, err := a.led.Claim(context.Background(), req, 7*time.Second)
	if err != nil || c == nil {
		t.Fatal(c, err)
	}
	now := a.sim.Now()
	if ok, err := a.led.Sending(context.Background(), c, ledger.SendEvidence{Snapshot: true, SeenFrom: now.Add(-2 * time.Second), WindowEnd: now.Add(8 * time.Second)}); !ok || err != nil {
		t.Fatal(ok, err)
	}
	// The instance dies here; the upstream never acts.
	a.clock.Advance(8 * time.Second)
	a.sim.Advance(10 * time.Second)
	a.svc.SettleDue(context.Background())
	w := a.post(t, "/v2/payments", attackPayment, "K1")
	if w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "" || a.payments() != 1 {
		t.Fatalf("got %d %s and %d payments, want a fresh 201 and 1 payment", w.Code, w.Body, a.payments())
	}
}
