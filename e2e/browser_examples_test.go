//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/fintech-bff/bff/internal/testing/browsertest"
	"github.com/fintech-bff/bff/internal/upstreamsim"
)

// What the two example apps (web/app and web/react-app) tell a user, held
// to the truth in the real browser: a payment request the bank refused
// reads "Not accepted", a list that has no more pages shows no "Load more"
// and never lists a payment twice, and a page view of a visitor who is not
// signed in asks the BFF nothing that fails (no probe of the dev login, no
// 4xx, no /auth budget spent). Both apps keep the same ids for these parts
// of their pages, so one test drives either.

// exampleApps are the example apps, each built for static_dir.
var exampleApps = []struct {
	name  string
	build func(*testing.T) string
}{
	{"web-app", buildApp},
	{"react-app", buildReactApp},
}

// watchFetches records, in every page tab loads from now on, each fetch the
// page makes (method, URL, status, the answer's X-Request-Id) in
// window.__fetches: what a visitor's console would show.
func watchFetches(t *testing.T, tab context.Context) {
	t.Helper()
	browsertest.Do(t, tab, "watching the page's fetches", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
			Source: `window.__fetches = [];
const realFetch = window.fetch;
window.fetch = async function (input, init) {
  const req = input instanceof Request ? input : null;
  const rec = { method: String((init && init.method) || (req && req.method) || "GET").toUpperCase(), url: String(req ? req.url : input), status: 0, requestId: "" };
  window.__fetches.push(rec);
  const res = await realFetch.apply(this, arguments);
  rec.status = res.status;
  rec.requestId = res.headers.get("X-Request-Id") || "";
  return res;
};`,
		})
		return err
	}))
}

type pageFetch struct {
	Method, URL, RequestID string
	Status                 int
}

// fetchesOf returns the fetches the page on tab has made (watchFetches).
func fetchesOf(t *testing.T, tab context.Context) []pageFetch {
	t.Helper()
	raw := browsertest.Get(t, tab, "reading the page's fetches", chromedp.Evaluate[string](`JSON.stringify(window.__fetches || [])`))
	var out []pageFetch
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		t.Fatalf("window.__fetches: %v: %s", err, raw)
	}
	return out
}

// accessLine is one line of the BFF's access log.
type accessLine struct {
	Msg, RequestID, Method, Route, Code string
	Status                              int
}

// accessLines are the access log's lines in logs.
func accessLines(logs string) []accessLine {
	var out []accessLine
	for _, line := range strings.Split(logs, "\n") {
		var l accessLine
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "request" {
			out = append(out, l)
		}
	}
	return out
}

// TestBrowserAnonymousViewAsksNothingThatFails: a visitor who is not signed
// in opens the app, on several pages and more often than the address's
// /auth budget allows, with either sign-in: each time the sign-in page
// shows, with no POST /auth/dev/login (the old way to learn the sign-in
// method), no 4xx answer in the page or the access log, and no 429.
func TestBrowserAnonymousViewAsksNothingThatFails(t *testing.T) {
	// Two /auth requests a minute per address: a page view that spent any
	// would be refused by the second or third view.
	const limitsYAML = "limits: { requests_per_second: 0, auth_per_minute: 2, refresh_interval: 15m, sessions_per_user: 0 }"
	for _, app := range exampleApps {
		for _, mode := range []string{"dev", "oidc"} {
			t.Run(app.name+"/"+mode, func(t *testing.T) {
				dist := app.build(t)
				pub := freeAddr(t)
				base := "http://" + pub
				o := options{publicAddr: pub, secureCookie: true, limitsYAML: limitsYAML, extraYAML: fmt.Sprintf("static_dir: %q", dist)}
				var e *env
				signInShown := `#login-form`
				if mode == "oidc" {
					e, _ = oidcEnvWith(t, o)
					signInShown = `#oidc-login`
				} else {
					e = start(t, o)
				}
				tab := browsertest.Start(t)
				watchFetches(t, tab)
				for i, path := range []string{"/", "/payments", "/login?returnTo=%2Fpay", "/", "/pay"} {
					from := len(e.logs.String())
					browsertest.Do(t, tab, "opening "+path, chromedp.Navigate(base+path))
					browsertest.Until(t, tab, "the sign-in page or an error on "+path,
						fmt.Sprintf(`document.querySelector(%s) !== null || document.querySelector(".error") !== null`, jsString(signInShown)))
					if msg := textOf(t, tab, ".error"); msg != "" {
						t.Errorf("view %d (%s): the page shows an error: %q", i+1, path, msg)
					}
					fetches := fetchesOf(t, tab)
					for _, f := range fetches {
						if f.Status >= 400 || (f.Method == "POST" && strings.HasSuffix(f.URL, "/auth/dev/login")) {
							t.Errorf("view %d (%s): the page made %s %s, answered %d", i+1, path, f.Method, f.URL, f.Status)
						}
					}
					// An answer can reach the page before its access log
					// line is written: wait for the line of each.
					var lines []accessLine
					eventually(t, 5*time.Second, func() error {
						lines = accessLines(e.logs.String()[from:])
						logged := map[string]bool{}
						for _, l := range lines {
							logged[l.RequestID] = true
						}
						for _, f := range fetches {
							if !logged[f.RequestID] {
								return fmt.Errorf("no access log line for %s %s (X-Request-Id %q)", f.Method, f.URL, f.RequestID)
							}
						}
						return nil
					})
					for _, l := range lines {
						if l.Status >= 400 || (l.Method == "POST" && l.Route == "/auth/dev/login") {
							t.Errorf("view %d (%s): the access log has %s %s %d %s", i+1, path, l.Method, l.Route, l.Status, l.Code)
						}
					}
				}
				// What the pages read, held to api/openapi.yaml (the client's transport).
				if r := e.app("").do("GET", "/auth/methods", ""); r.status != 200 || r.json(t)["login"] != mode || r.json(t)["session"] != nil {
					t.Errorf("GET /auth/methods: got %d %s, want 200 with login %s and session null", r.status, r.body, mode)
				}
			})
		}
	}
}

// typeInto sets the input with the given id to value as typing would: the
// value through the input's own setter, then an input event, which React's
// inputs (which keep their own state) see as well as plain ones.
func typeInto(id, value string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
  const el = document.getElementById(%s);
  Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, "value").set.call(el, %s);
  el.dispatchEvent(new Event("input", { bubbles: true }));
})()`, jsString(id), jsString(value)))
}

// seedPayments makes n payments for user at the bank directly (as the
// bank's own app would), so that the payments list has more than a page.
func seedPayments(t *testing.T, e *env, user string, n int) {
	t.Helper()
	for i := range n {
		body := fmt.Sprintf(`{"paymentInformation":{"amount":"%d.00","currency":"ILS","creditorAccount":{"iban":"IL620108000000099999999"},"remittanceInformation":"Seeded %02d"},"providerIds":["demobank-sandbox"]}`, i+1, i+1)
		if _, err := e.sim.CreateDirectPayment(user, []byte(body)); err != nil {
			t.Fatalf("seeding payment %d: %v", i+1, err)
		}
	}
}

// moreHidden is true when the payments list's "Load more" is absent or not
// displayed.
const moreHidden = `(() => { const b = document.getElementById("payments-more"); return !b || b.offsetParent === null; })()`

// TestBrowserPaymentsReadTrue: in each app, a payment the bank refused
// (400, recorded by the BFF as done with that status) reads "Not accepted"
// among the recent payments, never "Sent"; one the plan refused (403
// NOT_AVAILABLE_ON_PLAN) reads there in the sentence the pay page showed;
// and the payments at the bank,
// more than one page of them, are listed once each, after which "Load
// more" is gone and a click on it (by a script: a person can no longer
// reach it) lists nothing again.
func TestBrowserPaymentsReadTrue(t *testing.T) {
	for _, app := range exampleApps {
		t.Run(app.name, func(t *testing.T) {
			dist := app.build(t)
			pub := freeAddr(t)
			base := "http://" + pub
			e := browserEnv(t, pub, dist)
			seedPayments(t, e, browserUser, 25)
			total := len(e.sim.PaymentRemittances(browserUser))
			if total <= 20 {
				t.Fatalf("%d payments at the bank, want more than a page of 20", total)
			}
			tab := browsertest.Start(t)
			openAndSignIn(t, tab, base, browserUser, "#accounts")

			// A payment the BFF cannot read (no IBAN) is refused before it is
			// recorded: the form marks the field, the payments list shows
			// nothing of it.
			browsertest.Do(t, tab, "a payment the BFF refuses",
				chromedp.Click(chromedp.CSS(`#nav a[href="/pay"]`)),
				chromedp.WaitVisible(chromedp.ID("pay-form")),
				typeInto("iban", ""),
				chromedp.Click(chromedp.CSS(`#pay-form button[type="submit"]`)),
				chromedp.WaitVisible(chromedp.CSS(`#iban[aria-invalid="true"]`)))
			// One the bank refuses is recorded, refused.
			e.sim.InjectFault(upstreamsim.Fault{Method: http.MethodPost, PathPrefix: "/v2/payments", UserID: browserUser, Times: 1, Status: 400,
				Body: `{"type":"VALIDATION_ERROR","message":"[\"\\\"paymentInformation.creditorAccount.iban\\\" is not a valid IBAN\"]"}`})
			browsertest.Do(t, tab, "a payment the bank refuses",
				chromedp.Navigate(base+"/pay"),
				chromedp.WaitVisible(chromedp.ID("pay-form")),
				chromedp.Click(chromedp.CSS(`#pay-form button[type="submit"]`)),
				chromedp.WaitVisible(chromedp.CSS(`#iban[aria-invalid="true"]`)))

			// One the plan refuses reads the same on the pay page and in the list.
			e.sim.InjectFault(upstreamsim.Fault{Method: http.MethodPost, PathPrefix: "/v2/payments", UserID: browserUser, Times: 1, Status: 403,
				Body: `{"type":"NOT_AVAILABLE_ON_PLAN","message":"Upgrade to use this endpoint"}`})
			const planRefusal = `.error[data-code="NOT_AVAILABLE_ON_PLAN"] .message`
			browsertest.Do(t, tab, "a payment the plan refuses",
				chromedp.Navigate(base+"/pay"),
				chromedp.WaitVisible(chromedp.ID("pay-form")),
				chromedp.Click(chromedp.CSS(`#pay-form button[type="submit"]`)),
				chromedp.WaitVisible(chromedp.CSS(planRefusal)))
			said := textOf(t, tab, planRefusal)

			browsertest.Do(t, tab, "opening the payments", chromedp.Click(chromedp.CSS(`#nav a[href="/payments"]`)))
			waitCount(t, tab, "#recent-payments-table tr[data-key]", 2)
			refused := browsertest.Get(t, tab, "reading the payment the plan refused", chromedp.Evaluate[[]string](
				`[...document.querySelector('#recent-payments-table tr[data-key][data-status="403"]').cells].map((c) => c.textContent)`))
			if len(refused) != 4 || refused[2] != "Not accepted" || refused[3] != said {
				t.Errorf("the payment the plan refused reads %q in the list, want %q with the pay page's %q", refused, "Not accepted", said)
			}
			cells := browsertest.Get(t, tab, "reading the refused payment's row", chromedp.Evaluate[[]string](
				`[...document.querySelector('#recent-payments-table tr[data-key][data-status="400"]').cells].map((c) => c.textContent)`))
			if len(cells) != 4 || cells[2] != "Not accepted" {
				t.Errorf("the refused payment's row reads %q, want its request %q", cells, "Not accepted")
			}
			if row := strings.Join(cells, " | "); strings.Contains(row, "Sent") || strings.Contains(row, "Not known yet") {
				t.Errorf("the refused payment's row reads %q: a refused request was not sent to be decided", row)
			}

			waitCount(t, tab, "#payments-table tr[data-payment-id]", 20)
			browsertest.Do(t, tab, "loading more", chromedp.Click(chromedp.ID("payments-more")))
			waitCount(t, tab, "#payments-table tr[data-payment-id]", total)
			browsertest.Until(t, tab, "no load running", `!document.getElementById("payments-more")?.disabled`)
			if !browsertest.Get(t, tab, "looking for Load more", chromedp.Evaluate[bool](moreHidden)) {
				t.Errorf("every payment is listed, and Load more is still shown")
			}
			// A script's click on the hidden button, then wait until any
			// load it started is over (the button is disabled while one runs).
			browsertest.Do(t, tab, "clicking the hidden Load more",
				chromedp.Evaluate[chromedp.Void](`document.getElementById("payments-more")?.click()`))
			browsertest.Until(t, tab, "no load running", `!document.getElementById("payments-more")?.disabled`)
			ids := browsertest.Get(t, tab, "reading the listed payments", chromedp.Evaluate[[]string](
				`[...document.querySelectorAll("#payments-table tr[data-payment-id]")].map((r) => r.dataset.paymentId)`))
			seen := map[string]int{}
			for _, id := range ids {
				seen[id]++
			}
			if len(ids) != total || len(seen) != total {
				var twice []string
				for id, n := range seen {
					if n > 1 {
						twice = append(twice, id)
					}
				}
				t.Errorf("%d rows for %d payments (%d listed more than once, such as %v), want each of %d once", len(ids), len(seen), len(twice), twice[:min(len(twice), 3)], total)
			}
		})
	}
}

// TestBrowserReactSignsInAtRootAndOut: the React app signed in with the dev
// login at / (the address `make run` prints) shows the user's accounts at
// once, without a reload; its Sign out ends the session at the BFF and
// brings the sign-in back.
func TestBrowserReactSignsInAtRootAndOut(t *testing.T) {
	dist := buildReactApp(t)
	pub := freeAddr(t)
	base := "http://" + pub
	e := start(t, options{publicAddr: pub, secureCookie: true, extraYAML: fmt.Sprintf("static_dir: %q", dist)})
	// What the page reads, signed in, held to api/openapi.yaml (the client's transport).
	c := e.app("")
	c.token = c.login("methods-reader")
	if r := c.do("GET", "/auth/methods", ""); r.status != 200 || !strings.Contains(string(r.body), `"userId":"methods-reader"`) {
		t.Errorf("GET /auth/methods with a session token: got %d %s, want 200 with the session of methods-reader", r.status, r.body)
	}
	tab := browsertest.Start(t)
	browsertest.Do(t, tab, "opening /",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.ID("login-form")),
		// A reload or a navigation would lose this mark.
		chromedp.Evaluate[chromedp.Void](`window.__samePage = true`),
		typeInto("userId", browserUser),
		chromedp.Click(chromedp.CSS(`#login-form button[type="submit"]`)))
	browsertest.Until(t, tab, "signed in", `document.querySelector("#accounts") !== null && document.getElementById("who")?.textContent === `+jsString(browserUser))
	if !browsertest.Get(t, tab, "checking the mark", chromedp.Evaluate[bool](`window.__samePage === true`)) {
		t.Errorf("the page was loaded again to show the signed-in user, want it shown in place")
	}
	if loc := browsertest.Get(t, tab, "location", chromedp.Location()); loc != base+"/" {
		t.Errorf("signed in at %s, want %s/", loc, base)
	}

	browsertest.Do(t, tab, "signing out", chromedp.Click(chromedp.ID("sign-out")))
	browsertest.Until(t, tab, "signed out", `document.querySelector("#login-form") !== null && !document.getElementById("who")?.textContent`)
	session := browsertest.Get(t, tab, "asking the BFF", chromedp.Evaluate[string](
		`fetch("/auth/session", {credentials: "include"}).then((r) => String(r.status))`, chromedp.EvalAwaitPromise))
	if session != "401" {
		t.Errorf("after Sign out GET /auth/session answers %s, want 401: the session was not ended", session)
	}
	browsertest.Do(t, tab, "reloading", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("login-form")))
	if n := countIn(t, tab, "#accounts"); n != 0 {
		t.Errorf("signed out and reloaded, the page shows the accounts")
	}
}
