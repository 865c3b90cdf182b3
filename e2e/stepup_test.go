//go:build integration

package e2e

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/testing/pgtest"
)

// Payments the user approves (docs/payments.md, "Payments the user
// approves"), end to end through the real binary, the real OpenID provider
// (e2e/oidcprovider: rich authorization requests, acr urn:bff:acr:mfa
// earned with a one-time code) and the simulator. The HTTP-client tests
// here play the attacks; stepup_browser_test.go runs the user's path in
// Chromium.

// stepUpYAML holds EUR payments of 100.00 or more for an approval at
// urn:bff:acr:mfa.
const stepUpYAML = `
payments:
  step_up:
    enabled: true
    thresholds: ["EUR 100.00"]
    acr_values: ["urn:bff:acr:mfa"]
    max_age: 5m
    hold_for: 10m`

func stepUpEnv(t *testing.T, o options) (*env, *OP) {
	t.Helper()
	o.extraYAML += stepUpYAML
	return oidcEnvWith(t, o)
}

// eurPayment is a payment creation the simulator accepts.
func eurPayment(amount, remittance string) string {
	return fmt.Sprintf(`{"paymentInformation":{"amount":%q,"currency":"EUR","creditorName":"Jane Doe","creditorAccount":{"iban":"DE89370400440532013000"},"remittanceInformation":%q},"providerIds":["demobank-sandbox"]}`, amount, remittance)
}

// webLogin logs a browser in through the provider as user.
func webLogin(t *testing.T, e *env, user string) *client {
	t.Helper()
	b := e.browser()
	if r := b.follow(t, opLogin(t, b.http, beginLogin(t, b, "?returnTo=/"), user)); r.status != http.StatusFound {
		t.Fatalf("login callback: got %d %s", r.status, r.body)
	}
	return b
}

// held posts a payment and checks that it is held: 401 STEP_UP_REQUIRED
// with RFC 9470's challenge. It returns the step-up URL.
func held(t *testing.T, c *client, body, key string, hdr ...string) string {
	t.Helper()
	r := c.do("POST", "/api/v2/payments", body, append([]string{"Idempotency-Key", key}, hdr...)...)
	p := wantProblem(t, r, http.StatusUnauthorized, "STEP_UP_REQUIRED")
	if p["action"] != "step_up" || p["retryable"] != false {
		t.Fatalf("got %v, want action step_up, not retryable", p)
	}
	ch := r.header.Get("WWW-Authenticate")
	for _, want := range []string{`error="insufficient_user_authentication"`, `acr_values="urn:bff:acr:mfa"`, "max_age=300"} {
		if !strings.Contains(ch, want) {
			t.Fatalf("WWW-Authenticate %q lacks %s", ch, want)
		}
	}
	u, _ := p["stepUpUrl"].(string)
	if !strings.HasPrefix(u, c.e.public+"/auth/step-up?payment=") {
		t.Fatalf("stepUpUrl %q is not this BFF's step-up endpoint", u)
	}
	return u
}

// beginStepUp opens a step-up URL (with extra query) and returns where the
// BFF sent the browser: the provider's authorization endpoint.
func beginStepUp(t *testing.T, c *client, stepUpURL, extra string) string {
	t.Helper()
	u := mustURL(t, stepUpURL)
	r := c.do("GET", u.RequestURI()+extra, "")
	loc := r.header.Get("Location")
	if r.status != http.StatusFound || !strings.Contains(loc, "authorization_details=") {
		t.Fatalf("GET %s: got %d %q %s, want a redirect to the provider with authorization_details", u.RequestURI(), r.status, loc, r.body)
	}
	q := mustURL(t, loc).Query()
	if q.Get("prompt") != "login" || q.Get("acr_values") != "urn:bff:acr:mfa" || q.Get("max_age") != "300" || q.Get("code_challenge_method") != "S256" {
		t.Fatalf("the step-up authorization %s lacks prompt=login, acr_values, max_age or PKCE", loc)
	}
	return loc
}

var (
	opPaymentRE = regexp.MustCompile(`id="op-payment-(amount|payee|iban|remittance)">([^<]*)<`)
	opActionRE  = regexp.MustCompile(`<form method="post" action="([^"]*)"`)
	opHiddenRE  = regexp.MustCompile(`<input type="hidden" name="([^"]*)" value="([^"]*)"`)
)

// opDecide drives the provider's payment page from authURL: it reads what
// the page shows, submits login, otp and decision (approve or cancel) and
// returns the first redirect that leaves the provider, and what was shown.
func opDecide(t *testing.T, ua *http.Client, authURL, login, otp, decision string) (callback string, shown map[string]string) {
	t.Helper()
	next, method := authURL, http.MethodGet
	var form url.Values
	for hop := 0; hop < 10; hop++ {
		p := opDo(t, ua, method, next, form)
		method, form = http.MethodGet, nil
		switch {
		case p.status >= 300 && p.status < 400 && p.loc != "":
			if !opSameOrigin(p.loc, authURL) {
				return p.loc, shown
			}
			next = p.loc
		case p.status == http.StatusOK && strings.Contains(p.body, "document.forms[0].submit()"):
			// The provider's self-submitting form (another account logs in
			// over the provider's session: it ends that session first), as
			// a browser runs it.
			m := opActionRE.FindStringSubmatch(p.body)
			if m == nil {
				t.Fatalf("no form on the provider's self-submitting page:\n%s", p.body)
			}
			form = url.Values{}
			for _, h := range opHiddenRE.FindAllStringSubmatch(p.body, -1) {
				form.Set(html.UnescapeString(h[1]), html.UnescapeString(h[2]))
			}
			next, method = html.UnescapeString(m[1]), http.MethodPost
		case p.status == http.StatusOK && strings.Contains(p.body, `id="op-approve"`):
			if shown != nil {
				t.Fatalf("the provider showed the payment page again:\n%s", p.body)
			}
			shown = map[string]string{}
			for _, m := range opPaymentRE.FindAllStringSubmatch(p.body, -1) {
				shown[m[1]] = html.UnescapeString(m[2])
			}
			m := opActionRE.FindStringSubmatch(p.body)
			if m == nil {
				t.Fatalf("no form on the payment page:\n%s", p.body)
			}
			action, _ := mustURL(t, next).Parse(html.UnescapeString(m[1]))
			next, method = action.String(), http.MethodPost
			form = url.Values{"login": {login}, "otp": {otp}, "decision": {decision}}
		default:
			t.Fatalf("the provider answered %d at %s, want a redirect or the payment page:\n%s", p.status, next, p.body)
		}
	}
	t.Fatalf("more than 10 hops at the provider from %s", authURL)
	return "", nil
}

// record reads the caller's payment record of key.
func record(t *testing.T, c *client, key string) map[string]any {
	t.Helper()
	r := c.do("GET", "/bff/payments/"+url.PathEscape(key), "")
	if r.status != http.StatusOK {
		t.Fatalf("GET /bff/payments/%s: got %d %s", key, r.status, r.body)
	}
	return r.json(t)
}

// wantBackTo fails t unless r (a step-up's callback) is a 302 back to the
// app at want.
func wantBackTo(t *testing.T, what string, r reply, want string) {
	t.Helper()
	if loc := r.header.Get("Location"); r.status != http.StatusFound || loc != want {
		t.Fatalf("%s: got %d %q %s, want 302 to %s", what, r.status, loc, r.body, want)
	}
}

func TestStepUpApprovedPaymentIsSentOnce(t *testing.T) {
	t.Parallel()
	e, _ := stepUpEnv(t, options{})
	b := webLogin(t, e, "alice")

	// Below the threshold nothing changes.
	if r := b.do("POST", "/api/v2/payments", eurPayment("99.99", "small"), "Idempotency-Key", "small-1", "X-CSRF", "1"); r.status != http.StatusCreated {
		t.Fatalf("a payment below the threshold: got %d %s, want 201", r.status, r.body)
	}
	before := paymentPosts(e.sim)

	stepUp := held(t, b, eurPayment("1000.00", "Invoice 42"), "big-1", "X-CSRF", "1")
	held(t, b, eurPayment("1000.00", "Invoice 42"), "big-1", "X-CSRF", "1") // a repeat: the same answer
	if rec := record(t, b, "big-1"); rec["state"] != string(ledger.StateAwaiting) || rec["status"] != float64(401) || rec["stepUpUrl"] == nil {
		t.Fatalf("record while held: got %v", rec)
	}
	// Only the session that made it can approve it, so only it is shown
	// where: the same user's other session sees the hold, no stepUpUrl.
	other := webLogin(t, e, "alice")
	if rec := record(t, other, "big-1"); rec["state"] != string(ledger.StateAwaiting) || rec["stepUpUrl"] != nil {
		t.Fatalf("the user's other session reads %v, want the hold without its stepUpUrl", rec)
	}
	if r := other.do("GET", "/bff/payments", ""); r.status != http.StatusOK || strings.Contains(string(r.body), "stepUpUrl") {
		t.Fatalf("the user's other session lists %d %s, want no stepUpUrl", r.status, r.body)
	}
	if n := paymentPosts(e.sim); n != before {
		t.Fatalf("the held payment reached the upstream (%d creations)", n-before)
	}

	cb, shown := opDecide(t, b.http, beginStepUp(t, b, stepUp, "&returnTo=/paid"), "alice", "123456", "approve")
	if shown["amount"] != "1000.00 EUR" || shown["payee"] != "Jane Doe" || shown["iban"] != "DE89370400440532013000" || shown["remittance"] != "Invoice 42" {
		t.Fatalf("the provider showed %v, want the held payment's amount, payee, IBAN and reference", shown)
	}
	wantBackTo(t, "callback", b.follow(t, cb), "/paid?payment=big-1&stepUp=approved")
	if n := paymentPosts(e.sim); n != before+1 {
		t.Fatalf("the upstream got %d creations after the approval, want exactly 1", n-before)
	}
	if rec := record(t, b, "big-1"); rec["state"] != "done" || rec["status"] != float64(201) || rec["paymentId"] == nil {
		t.Fatalf("record after approval: got %v", rec)
	}
	// The key's repeat replays the payment; the replayed callback releases
	// nothing (its state was used).
	rp := b.do("POST", "/api/v2/payments", eurPayment("1000.00", "Invoice 42"), "Idempotency-Key", "big-1", "X-CSRF", "1")
	if rp.status != http.StatusCreated || rp.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeat after approval: got %d %v", rp.status, rp.header)
	}
	wantProblem(t, b.follow(t, cb), http.StatusBadRequest, "LOGIN_FAILED")
	if n := paymentPosts(e.sim); n != before+1 {
		t.Fatalf("the upstream got %d creations after the replays, want exactly 1", n-before)
	}
}

// A code exchange the provider refuses (a code that is not the one it
// issued: invalid_grant) brings the browser back to the app with
// stepUp=failed, not a LOGIN_FAILED page; the payment still waits, and a
// second approval sends it once.
func TestStepUpFailedExchangeComesBackFailed(t *testing.T) {
	t.Parallel()
	e, _ := stepUpEnv(t, options{})
	b := webLogin(t, e, "alice")
	stepUp := held(t, b, eurPayment("300.00", "exchange fails"), "exch-1", "X-CSRF", "1")
	cb, _ := opDecide(t, b.http, beginStepUp(t, b, stepUp, "&returnTo=/paid"), "alice", "123456", "approve")
	u := mustURL(t, cb)
	q := u.Query()
	q.Set("code", q.Get("code")+"x")
	u.RawQuery = q.Encode()
	wantBackTo(t, "callback with a code the provider refuses", b.follow(t, u.String()), "/paid?stepUp=failed")
	if rec := record(t, b, "exch-1"); rec["state"] != string(ledger.StateAwaiting) || rec["stepUpUrl"] == nil {
		t.Fatalf("record after the failed exchange: got %v, want still awaiting approval", rec)
	}
	if n := paymentPosts(e.sim); n != 0 {
		t.Fatalf("the upstream got %d creations after a failed exchange, want none", n)
	}
	cb, _ = opDecide(t, b.http, beginStepUp(t, b, stepUp, "&returnTo=/paid"), "alice", "123456", "approve")
	wantBackTo(t, "the second approval", b.follow(t, cb), "/paid?payment=exch-1&stepUp=approved")
	if n := paymentPosts(e.sim); n != 1 {
		t.Fatalf("the upstream got %d creations after the second approval, want exactly 1", n)
	}
}

func TestStepUpCancelledPaymentIsNeverSent(t *testing.T) {
	t.Parallel()
	e, _ := stepUpEnv(t, options{})
	b := webLogin(t, e, "alice")
	stepUp := held(t, b, eurPayment("250.00", "cancel me"), "cancel-1", "X-CSRF", "1")
	cb, _ := opDecide(t, b.http, beginStepUp(t, b, stepUp, "&returnTo=/paid"), "alice", "123456", "cancel")
	wantBackTo(t, "callback after cancel", b.follow(t, cb), "/paid?stepUp=declined")
	p := wantProblem(t, b.do("POST", "/api/v2/payments", eurPayment("250.00", "cancel me"), "Idempotency-Key", "cancel-1", "X-CSRF", "1"),
		http.StatusForbidden, "STEP_UP_DECLINED")
	if !strings.Contains(fmt.Sprint(p["detail"]), "new Idempotency-Key") {
		t.Fatalf("the declined answer does not say how to pay again: %v", p)
	}
	if rec := record(t, b, "cancel-1"); rec["state"] != "declined" || rec["declined"] != "denied" || rec["status"] != float64(403) {
		t.Fatalf("record after cancel: got %v", rec)
	}
	if n := paymentPosts(e.sim); n != 0 {
		t.Fatalf("a cancelled payment reached the upstream (%d creations)", n)
	}
}

// An approval of other content cannot release the held payment: the
// authorization request rewritten to 10.00 EUR (what a compromised page
// would show the user), a code obtained for another held payment, another
// user at the provider, a weaker authentication.
func TestStepUpApprovalMustMatchThePayment(t *testing.T) {
	t.Parallel()
	e, _ := stepUpEnv(t, options{})
	b := webLogin(t, e, "alice")
	csrf := []string{"X-CSRF", "1"}

	t.Run("an approval of 10 EUR does not release 1000 EUR", func(t *testing.T) {
		stepUp := held(t, b, eurPayment("1000.00", "tampered"), "tampered-1", csrf...)
		authURL := mustURL(t, beginStepUp(t, b, stepUp, ""))
		q := authURL.Query()
		q.Set("authorization_details", strings.Replace(q.Get("authorization_details"), `"1000.00"`, `"10.00"`, 1))
		authURL.RawQuery = q.Encode()
		cb, shown := opDecide(t, b.http, authURL.String(), "alice", "123456", "approve")
		if shown["amount"] != "10.00 EUR" {
			t.Fatalf("the rewritten request showed %v, want 10.00 EUR", shown)
		}
		if r := b.follow(t, cb); r.header.Get("Location") != "/?stepUp=declined" {
			t.Fatalf("callback: got %d %q %s, want the payment declined", r.status, r.header.Get("Location"), r.body)
		}
		if rec := record(t, b, "tampered-1"); rec["state"] != "declined" || rec["declined"] != "mismatch" {
			t.Fatalf("record: got %v, want declined (mismatch)", rec)
		}
	})

	t.Run("another held payment's approval does not release this one", func(t *testing.T) {
		big := held(t, b, eurPayment("1000.00", "big"), "swap-big", csrf...)
		small := held(t, b, eurPayment("150.00", "small"), "swap-small", csrf...)
		bigAuth := beginStepUp(t, b, big, "")
		smallCB, _ := opDecide(t, b.http, beginStepUp(t, b, small, ""), "alice", "123456", "approve")
		// The small payment's code delivered with the big payment's state:
		// its PKCE verifier is the big one's, so the provider refuses it.
		swapped := mustURL(t, smallCB)
		q := swapped.Query()
		q.Set("state", mustURL(t, bigAuth).Query().Get("state"))
		swapped.RawQuery = q.Encode()
		// The exchange fails: back to the app, the payment still held.
		if r := b.follow(t, swapped.String()); r.status != http.StatusFound || !strings.Contains(r.header.Get("Location"), "stepUp=failed") {
			t.Fatalf("the swapped code: got %d %q %s, want 302 with stepUp=failed", r.status, r.header.Get("Location"), r.body)
		}
		if rec := record(t, b, "swap-big"); rec["state"] != string(ledger.StateAwaiting) {
			t.Fatalf("the big payment after the swap: got %v, want still held", rec)
		}
	})

	t.Run("another user's approval does not release it", func(t *testing.T) {
		stepUp := held(t, b, eurPayment("500.00", "mallory"), "other-user-1", csrf...)
		// At the provider in a browser of its own (over alice's provider
		// session, the provider would end it, and with it her BFF session
		// by back-channel logout); the callback comes back to alice's.
		cb, _ := opDecide(t, opBrowser(), beginStepUp(t, b, stepUp, ""), "mallory", "123456", "approve")
		if r := b.follow(t, cb); r.header.Get("Location") != "/?stepUp=declined" {
			t.Fatalf("callback: got %d %q %s", r.status, r.header.Get("Location"), r.body)
		}
	})

	t.Run("a password without the second factor does not release it", func(t *testing.T) {
		stepUp := held(t, b, eurPayment("500.00", "no otp"), "weak-1", csrf...)
		cb, _ := opDecide(t, b.http, beginStepUp(t, b, stepUp, ""), "alice", "000000", "approve") // the provider's wrong code: acr stays pwd
		if r := b.follow(t, cb); r.header.Get("Location") != "/?stepUp=declined" {
			t.Fatalf("callback: got %d %q %s", r.status, r.header.Get("Location"), r.body)
		}
	})

	if n := paymentPosts(e.sim); n != 0 {
		t.Fatalf("mismatched approvals sent %d payments, want none", n)
	}
}

// A session token (or cookie) alone, replayed by a thief from another
// client, cannot move money over the threshold: the payment is held, the
// thief's approval (without the user's second factor, or as another
// user) declines it, and another session cannot approve it at all.
func TestStepUpStolenSessionCannotMoveMoney(t *testing.T) {
	t.Parallel()
	e, _ := stepUpEnv(t, options{})
	verifier, challenge := pkcePair()
	code := mobileCode(t, e, challenge, "alice")
	r := e.app("").do("POST", "/auth/mobile/token", fmt.Sprintf(`{"code":%q,"codeVerifier":%q}`, code, verifier))
	token, _ := r.json(t)["sessionToken"].(string)
	if token == "" {
		t.Fatalf("mobile token: %d %s", r.status, r.body)
	}
	thief := e.app(token) // the token, copied to another client

	stepUp := held(t, thief, eurPayment("900.00", "stolen"), "stolen-1")
	// The thief approves in their own browser: alice's password, but not
	// her second factor.
	ua := opBrowser()
	app := "&client=mobile&redirect_uri=" + url.QueryEscape(mobileRedirect) + "&code_challenge=" + challenge + "&code_challenge_method=S256&state=s1"
	loc := opDo(t, ua, http.MethodGet, e.public+mustURL(t, stepUp).RequestURI()+app, nil).loc
	cb, _ := opDecide(t, ua, loc, "alice", "000000", "approve")
	toApp := opDo(t, ua, http.MethodGet, cb, nil).loc
	codeQ := mustURL(t, toApp).Query()
	if codeQ.Get("code") == "" || codeQ.Get("state") != "s1" {
		t.Fatalf("the approval's redirect to the app: %q", toApp)
	}
	wantProblem(t, thief.do("POST", "/auth/step-up/token", fmt.Sprintf(`{"code":%q,"codeVerifier":%q}`, codeQ.Get("code"), verifier)),
		http.StatusForbidden, "STEP_UP_DECLINED")

	// Another session of the same user (a second device, or the thief's
	// own login) cannot start or finish the approval of this payment.
	stepUp2 := held(t, thief, eurPayment("800.00", "stolen 2"), "stolen-2")
	other := webLogin(t, e, "alice")
	wantProblem(t, other.do("GET", mustURL(t, stepUp2).RequestURI(), ""), http.StatusNotFound, "NOT_FOUND")

	if n := paymentPosts(e.sim); n != 0 {
		t.Fatalf("the stolen session moved money: %d creations", n)
	}
	// Below the threshold a session still pays alone: the policy's line.
	if r := thief.do("POST", "/api/v2/payments", eurPayment("20.00", "small"), "Idempotency-Key", "small-stolen"); r.status != http.StatusCreated {
		t.Fatalf("below the threshold: got %d %s", r.status, r.body)
	}
}

// The native flow (RFC 8252): the app opens the step-up URL in the system
// browser with its own PKCE challenge, gets a one-time code, and redeems it
// in the session that made the payment. A login's code is not an approval,
// nor the other way round.
func TestStepUpNativeApp(t *testing.T) {
	t.Parallel()
	e, _ := stepUpEnv(t, options{})
	verifier, challenge := pkcePair()
	code := mobileCode(t, e, challenge, "nina")
	r := e.app("").do("POST", "/auth/mobile/token", fmt.Sprintf(`{"code":%q,"codeVerifier":%q}`, code, verifier))
	token, _ := r.json(t)["sessionToken"].(string)
	app := e.app(token)

	// A login's code (a fresh one) is refused as an approval.
	loginCode := mobileCode(t, e, challenge, "nina")
	wantProblem(t, app.do("POST", "/auth/step-up/token", fmt.Sprintf(`{"code":%q,"codeVerifier":%q}`, loginCode, verifier)), http.StatusBadRequest, "INVALID_GRANT")

	events := openStream(t, e.public, token, "")
	defer events.close()
	stepUp := held(t, app, eurPayment("300.00", "native"), "native-1")
	if ev := events.next(t, 10*time.Second); ev.Data.Key != "native-1" || ev.Data.State != string(ledger.StateAwaiting) || ev.Data.Status != 401 {
		t.Fatalf("the stream's first event: got %+v, want native-1 awaiting_approval (401)", ev.Data)
	}
	ua := opBrowser()
	q := "&client=mobile&redirect_uri=" + url.QueryEscape(mobileRedirect) + "&code_challenge=" + challenge + "&code_challenge_method=S256&state=s2"
	start := opDo(t, ua, http.MethodGet, e.public+mustURL(t, stepUp).RequestURI()+q, nil)
	cb, shown := opDecide(t, ua, start.loc, "nina", "654321", "approve")
	if shown["amount"] != "300.00 EUR" {
		t.Fatalf("the provider showed %v", shown)
	}
	toApp := mustURL(t, opDo(t, ua, http.MethodGet, cb, nil).loc)
	approval := toApp.Query().Get("code")
	// The approval's code is not a login.
	wantProblem(t, e.app("").do("POST", "/auth/mobile/token", fmt.Sprintf(`{"code":%q,"codeVerifier":%q}`, approval, verifier)), http.StatusBadRequest, "INVALID_GRANT")

	// That refusal used the code up: approve again for a fresh one.
	start = opDo(t, ua, http.MethodGet, e.public+mustURL(t, stepUp).RequestURI()+q, nil)
	cb, _ = opDecide(t, ua, start.loc, "nina", "654321", "approve")
	approval = mustURL(t, opDo(t, ua, http.MethodGet, cb, nil).loc).Query().Get("code")
	out := app.do("POST", "/auth/step-up/token", fmt.Sprintf(`{"code":%q,"codeVerifier":%q}`, approval, verifier))
	var got struct {
		Payment map[string]any `json:"payment"`
	}
	if out.status != http.StatusOK || json.Unmarshal(out.body, &got) != nil || got.Payment["state"] != "done" || got.Payment["status"] != float64(201) {
		t.Fatalf("redeeming the approval: got %d %s, want 200 with the payment done", out.status, out.body)
	}
	if n := paymentPosts(e.sim); n != 1 {
		t.Fatalf("the upstream got %d creations, want exactly 1", n)
	}
	for ev := events.next(t, 10*time.Second); ev.Data.State != "done"; ev = events.next(t, 10*time.Second) {
		if ev.Data.Key != "native-1" || ev.Data.State != string(ledger.StateAwaiting) {
			t.Fatalf("the stream after the approval: got %+v, want native-1 done", ev.Data)
		}
	}
	// Redeemed once: a replay is refused and sends nothing.
	wantProblem(t, app.do("POST", "/auth/step-up/token", fmt.Sprintf(`{"code":%q,"codeVerifier":%q}`, approval, verifier)), http.StatusBadRequest, "INVALID_GRANT")
	if n := paymentPosts(e.sim); n != 1 {
		t.Fatalf("the upstream got %d creations after a replay, want exactly 1", n)
	}

	// Cancelled at the provider: the app's redirect carries the refusal in
	// a code, and only the session that made the payment declines it.
	stepUp = held(t, app, eurPayment("400.00", "native cancel"), "native-2")
	start = opDo(t, ua, http.MethodGet, e.public+mustURL(t, stepUp).RequestURI()+q, nil)
	cb, _ = opDecide(t, ua, start.loc, "nina", "654321", "cancel")
	refusal := mustURL(t, opDo(t, ua, http.MethodGet, cb, nil).loc).Query()
	if refusal.Get("error") != "access_denied" || refusal.Get("code") == "" || refusal.Get("state") != "s2" {
		t.Fatalf("the app's redirect after a cancel: %v, want error=access_denied with a code and the app's state", refusal)
	}
	other := e.app(mobileToken(t, e, "nina"))
	wantProblem(t, other.do("POST", "/auth/step-up/token", fmt.Sprintf(`{"code":%q,"codeVerifier":%q}`, refusal.Get("code"), verifier)), http.StatusNotFound, "NOT_FOUND")
	if rec := record(t, app, "native-2"); rec["state"] != string(ledger.StateAwaiting) {
		t.Fatalf("another session's redemption of the refusal: the payment is %v, want still held", rec["state"])
	}
	// That code is used up; cancelling again gives the app its own.
	start = opDo(t, ua, http.MethodGet, e.public+mustURL(t, stepUp).RequestURI()+q, nil)
	cb, _ = opDecide(t, ua, start.loc, "nina", "654321", "cancel")
	refusal = mustURL(t, opDo(t, ua, http.MethodGet, cb, nil).loc).Query()
	wantProblem(t, app.do("POST", "/auth/step-up/token", fmt.Sprintf(`{"code":%q,"codeVerifier":%q}`, refusal.Get("code"), verifier)), http.StatusForbidden, "STEP_UP_DECLINED")
	if rec := record(t, app, "native-2"); rec["state"] != "declined" || rec["declined"] != "denied" {
		t.Fatalf("after the app redeemed its refusal: got %v, want declined (denied)", rec)
	}
	if n := paymentPosts(e.sim); n != 1 {
		t.Fatalf("a cancelled payment reached the upstream (%d creations in all, want 1)", n)
	}
}

// mobileToken logs user in through the native flow and returns the
// session token.
func mobileToken(t *testing.T, e *env, user string) string {
	t.Helper()
	verifier, challenge := pkcePair()
	code := mobileCode(t, e, challenge, user)
	r := e.app("").do("POST", "/auth/mobile/token", fmt.Sprintf(`{"code":%q,"codeVerifier":%q}`, code, verifier))
	token, _ := r.json(t)["sessionToken"].(string)
	if token == "" {
		t.Fatalf("mobile token: %d %s", r.status, r.body)
	}
	return token
}

// A held payment lives in the ledger, not in an instance: the instance that
// held it is killed, and another instance (sharing Redis and the ledger)
// takes the provider's callback and sends it, once.
func TestStepUpSurvivesARestartAndAnotherInstanceReleasesIt(t *testing.T) {
	t.Parallel()
	e, _ := stepUpEnv(t, options{})
	b := webLogin(t, e, "alice")
	stepUp := held(t, b, eurPayment("700.00", "restart"), "restart-1", "X-CSRF", "1")
	authURL := beginStepUp(t, b, stepUp, "&returnTo=/paid")
	o := e.opts
	o.publicAddr, o.adminAddr = "", ""
	other := e.another(o)
	e.kill()

	cb, _ := opDecide(t, b.http, authURL, "alice", "123456", "approve")
	// The browser's cookies (its session, the approval's binding) go to
	// the other instance with the callback, as a load balancer would
	// send them.
	onOther := &client{e: other, http: b.http}
	if r := onOther.follow(t, cb); r.header.Get("Location") != "/paid?payment=restart-1&stepUp=approved" {
		t.Fatalf("callback on the other instance: got %d %q %s", r.status, r.header.Get("Location"), r.body)
	}
	if rec := record(t, onOther, "restart-1"); rec["state"] != "done" || rec["status"] != float64(201) {
		t.Fatalf("record: got %v", rec)
	}
	if n := paymentPosts(e.sim); n != 1 {
		t.Fatalf("the upstream got %d creations, want exactly 1", n)
	}
}

// The ledger's database freezes (SIGSTOP, as a stopped VM) just as the
// provider's callback brings an approval: the approval cannot be taken, the
// browser comes back with stepUp=failed within the ledger's timeout,
// nothing is sent, and the payment still waits. Once the database wakes,
// an approval sends it, once.
func TestStepUpLedgerFrozenAtTheApproval(t *testing.T) {
	t.Parallel()
	pg := pgtest.StartServer(t, pgtest.ServerOptions{})
	e, _ := stepUpEnv(t, options{ledgerURL: pg.URL()})
	b := webLogin(t, e, "alice")
	stepUp := held(t, b, eurPayment("600.00", "frozen"), "frozen-1", "X-CSRF", "1")
	cb, _ := opDecide(t, b.http, beginStepUp(t, b, stepUp, "&returnTo=/paid"), "alice", "123456", "approve")
	pg.Pause()
	r := b.follow(t, cb)
	pg.Resume()
	wantBackTo(t, "the callback with the ledger frozen", r, "/paid?stepUp=failed")
	if n := paymentPosts(e.sim); n != 0 {
		t.Fatalf("an approval the ledger could not take sent %d payments", n)
	}
	if rec := record(t, b, "frozen-1"); rec["state"] != string(ledger.StateAwaiting) {
		t.Fatalf("after the freeze: got %v, want the payment still held", rec)
	}
	cb, _ = opDecide(t, b.http, beginStepUp(t, b, stepUp, "&returnTo=/paid"), "alice", "123456", "approve")
	if r := b.follow(t, cb); r.header.Get("Location") != "/paid?payment=frozen-1&stepUp=approved" {
		t.Fatalf("the approval after the freeze: got %d %q %s", r.status, r.header.Get("Location"), r.body)
	}
	if n := paymentPosts(e.sim); n != 1 {
		t.Fatalf("the upstream got %d creations, want exactly 1", n)
	}
}
