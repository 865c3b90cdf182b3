//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/fintech-bff/bff/internal/testing/browsertest"
	"github.com/fintech-bff/bff/internal/upstreamsim"
)

// The browser tests run the example web app (web/app) on the real bff
// binary, logged in through the real OpenID provider's login form, in
// Debian's headless chromium: what only a browser enforces (the __Host-
// cookie's flags, SameSite, CORS, CSP, the back-forward cache) is proven
// there. Set BFF_BROWSER_SHOTS to a directory to keep the screenshots;
// otherwise they go under the test's temp dir.

const (
	browserUser    = "olga"
	sessionCookieN = "__Host-bff_session"
)

// buildApp builds web/app into a temporary directory for static_dir.
func buildApp(t *testing.T) string {
	t.Helper()
	return buildAppWith(t)
}

// buildAppWith builds web/app with build-time settings (NAME=value, see
// web/app/build.mjs) into a temporary directory for static_dir.
func buildAppWith(t *testing.T, settings ...string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node (Node.js >= 20) is needed to build the example web app")
	}
	app, err := filepath.Abs("../web/app")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(app, "node_modules", "esbuild")); err != nil {
		t.Fatalf("web/app/node_modules/esbuild is missing: run `npm ci --prefix web/app` (make test does it): %v", err)
	}
	dist := t.TempDir()
	cmd := exec.Command(node, filepath.Join(app, "build.mjs"), dist)
	cmd.Env = append(os.Environ(), settings...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("building the web app: %v\n%s", err, out)
	}
	return dist
}

// servePage serves one HTML page (another origin's: no CSP of the BFF's).
func servePage(html string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(html))
	}))
}

// attackerPage is a page on another origin that tries, against the BFF at
// base, what a malicious site tries with a signed-in visitor's browser:
// cross-site form POSTs (a payment, a logout), fetches with credentials
// (reading data, a payment with the CSRF header, an opaque no-cors POST)
// and <img> GETs. It writes what its own script could see into #results
// and shows #done when every attempt has settled.
func attackerPage(base string) string {
	return `<!doctype html><title>attacker</title>
<iframe name="sink1"></iframe><iframe name="sink2"></iframe>
<form id="pay" method="POST" action="` + base + `/api/v2/payments" enctype="text/plain" target="sink1">
<input name='{"paymentInformation":{"amount":"9999","currency":"ILS","creditorAccount":{"iban":"IL620108000000099999999"},"remittanceInformation":"stolen","x":"' value='"}}'>
</form>
<form id="logout" method="POST" action="` + base + `/auth/logout" target="sink2"><input name="x" value="1"></form>
<pre id="results"></pre>
<script>
const base = ` + jsString(base) + `;
const results = {};
async function attempt(name, f) {
  try { results[name] = await f(); } catch (e) { results[name] = "blocked: " + e.name; }
}
function img(name, src) {
  return new Promise((resolve) => {
    const i = new Image();
    i.onload = () => { results[name] = "loaded"; resolve(); };
    i.onerror = () => { results[name] = "error"; resolve(); };
    i.src = src;
  });
}
function submitted(form, sink) {
  return new Promise((resolve) => {
    document.querySelector('iframe[name="' + sink + '"]').addEventListener("load", () => resolve(), { once: true });
    document.getElementById(form).submit();
  });
}
(async () => {
  // An iframe whose answer the browser refuses to show may never fire
  // load: go on after 5 s (the forms' answers take milliseconds here).
  await Promise.race([
    Promise.all([submitted("pay", "sink1"), submitted("logout", "sink2")]),
    new Promise((r) => setTimeout(r, 5000)),
  ]);
  await attempt("read accounts", async () => {
    const r = await fetch(base + "/api/v2/data/accounts", { credentials: "include" });
    return "read " + r.status + " " + (await r.text()).slice(0, 200);
  });
  await attempt("read session", async () => {
    const r = await fetch(base + "/auth/session", { credentials: "include" });
    return "read " + r.status + " " + (await r.text()).slice(0, 200);
  });
  await attempt("pay with X-CSRF", async () => {
    const r = await fetch(base + "/api/v2/payments", {
      method: "POST", credentials: "include",
      headers: { "X-CSRF": "1", "Content-Type": "application/json" },
      body: JSON.stringify({ paymentInformation: { amount: "9999", currency: "ILS", creditorAccount: { iban: "IL620108000000099999999" }, remittanceInformation: "stolen" } }),
    });
    return "read " + r.status;
  });
  await attempt("pay no-cors", async () => {
    const r = await fetch(base + "/api/v2/payments", {
      method: "POST", credentials: "include", mode: "no-cors",
      headers: { "Content-Type": "text/plain" },
      body: JSON.stringify({ paymentInformation: { amount: "9999", currency: "ILS", creditorAccount: { iban: "IL620108000000099999999" }, remittanceInformation: "stolen" } }),
    });
    return r.type === "opaque" ? "opaque" : "read " + r.status;
  });
  await img("img payments", base + "/api/v2/payments");
  await img("img logout", base + "/auth/logout");
  document.getElementById("results").textContent = JSON.stringify(results);
  const done = document.createElement("p");
  done.id = "done";
  done.textContent = "done";
  document.body.append(done);
})();
</script>`
}

// friendPage is a page on a second origin listed in cors.allowed_origins:
// it reads the user's accounts and makes a payment through the BFF with
// the browser's credentials.
func friendPage(base string) string {
	return `<!doctype html><title>partner app</title><pre id="results"></pre>
<script>
const base = ` + jsString(base) + `;
(async () => {
  const out = {};
  try {
    const r = await fetch(base + "/api/v2/data/accounts?limit=5", { credentials: "include" });
    const j = await r.json();
    out.accounts = r.status + " " + (j.items ? j.items.length : "?");
    const p = await fetch(base + "/api/v2/payments", {
      method: "POST", credentials: "include",
      headers: { "X-CSRF": "1", "Content-Type": "application/json", "Idempotency-Key": crypto.randomUUID() },
      body: JSON.stringify({ paymentInformation: { amount: "3.20", currency: "ILS", creditorAccount: { iban: "IL620108000000099999999" }, remittanceInformation: "from the partner app" }, providerIds: ["demobank-sandbox"] }),
    });
    const pj = await p.json();
    out.payment = p.status + " " + (pj.payUrl ? "payUrl" : JSON.stringify(pj));
    out.requestId = p.headers.get("X-Request-Id") || "";
  } catch (e) {
    out.error = e.name + ": " + e.message;
  }
  document.getElementById("results").textContent = JSON.stringify(out);
  const done = document.createElement("p");
  done.id = "done";
  document.body.append(done);
})();
</script>`
}

// postCodes returns the route and error code of each POST in the BFF's
// access log lines in logs.
func postCodes(logs string) []string {
	var codes []string
	for _, line := range strings.Split(logs, "\n") {
		var l struct{ Msg, Method, Route, Code string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "request" && l.Method == "POST" {
			codes = append(codes, l.Route+" "+l.Code)
		}
	}
	return codes
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// pageResults navigates tab to link and returns the JSON the page wrote
// into #results once it shows #done.
func pageResults(t *testing.T, tab context.Context, link string) map[string]string {
	t.Helper()
	browsertest.Do(t, tab, "opening "+link, chromedp.Navigate(link), chromedp.WaitReady(chromedp.ID("done")))
	raw := browsertest.Get(t, tab, "reading #results", chromedp.TextContent(chromedp.ID("results")))
	var out map[string]string
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		t.Fatalf("%s wrote %q: %v", link, raw, err)
	}
	return out
}

// browserEnv is the deployment the browser tests use: the BFF on
// http://127.0.0.1:pub's port with Secure __Host- cookies (chromium
// accepts them from a loopback address), the app built in dist as
// static_dir, OpenID login, the refresh guard on, and origins in
// cors.allowed_origins. Build the app before picking pub: the port is
// free when picked and taken only when the BFF starts.
func browserEnv(t *testing.T, pub, dist string, origins ...string) *env {
	t.Helper()
	base := "http://" + pub
	corsYAML := ""
	if len(origins) > 0 {
		list, _ := json.Marshal(origins)
		corsYAML = "\ncors:\n  allowed_origins: " + string(list)
	}
	e, _ := oidcEnvWith(t, options{
		publicAddr:   pub,
		secureCookie: true,
		sim:          upstreamsim.Options{AllowedRedirectURLs: []string{base + "/payment-done", base + "/connection-done"}},
		limitsYAML:   "limits: { requests_per_second: 0, auth_per_minute: 0, refresh_interval: 15m, sessions_per_user: 0 }",
		extraYAML:    fmt.Sprintf("static_dir: %q", dist) + corsYAML,
	})
	return e
}

// signIn logs in at the provider's form that tab shows, as user, and waits
// for the app to show want; a problem answer from the BFF (a failed
// callback) fails t at once with its body.
func signIn(t *testing.T, tab context.Context, user, want string) {
	t.Helper()
	browsertest.Do(t, tab, "signing in at the provider as "+user,
		chromedp.WaitVisible(chromedp.CSS(`input[name="login"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="login"]`), user),
		chromedp.Click(chromedp.CSS(`button[type="submit"]`)))
	browsertest.Until(t, tab, "back from the provider",
		fmt.Sprintf(`document.querySelector(%s) !== null || document.contentType === "application/problem+json"`, jsString(want)))
	if body := browsertest.Get(t, tab, "reading the answer", chromedp.Evaluate[string](
		`document.contentType === "application/problem+json" ? document.body.innerText : ""`)); body != "" {
		t.Fatalf("signing in as %s: the BFF answered %s", user, body)
	}
}

// openAndSignIn opens the app at base, follows its OpenID sign-in link and
// signs in at the provider as user, until want is on the page.
func openAndSignIn(t *testing.T, tab context.Context, base, user, want string) {
	t.Helper()
	browsertest.Do(t, tab, "opening the app",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.ID("oidc-login")),
		chromedp.Click(chromedp.ID("oidc-login")))
	signIn(t, tab, user, want)
}

// setInput sets the value of the input with the given id.
func setInput(id, value string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf("document.getElementById(%s).value = %s", jsString(id), jsString(value)))
}

// countIn evaluates a selector's match count in tab.
func countIn(t *testing.T, tab context.Context, css string) int {
	t.Helper()
	return browsertest.Get(t, tab, "counting "+css, chromedp.Evaluate[int](fmt.Sprintf("document.querySelectorAll(%s).length", jsString(css))))
}

// waitCount waits until css matches n elements in tab.
func waitCount(t *testing.T, tab context.Context, css string, n int) {
	t.Helper()
	browsertest.Until(t, tab, fmt.Sprintf("waiting for %d of %s", n, css),
		fmt.Sprintf("document.querySelectorAll(%s).length === %d", jsString(css), n))
}

// TestBrowserJourney is the whole example app in a real browser: the
// provider's login form, accounts, transactions paging, the refresh guard,
// a validation error, a payment through the bank's consent page, the
// payments list, connecting a bank, ending another device's session, and
// logging out, after which the back button shows no data.
func TestBrowserJourney(t *testing.T) {
	dist := buildApp(t)
	pub := freeAddr(t)
	base := "http://" + pub
	friend := servePage(friendPage(base))
	t.Cleanup(friend.Close)
	e := browserEnv(t, pub, dist, friend.URL)
	browser := browsertest.Start(t)
	shots := browsertest.NewShots(t, os.Getenv("BFF_BROWSER_SHOTS"))
	t.Logf("screenshots in %s", shots.Dir)
	began := time.Now()
	// The steps build on each other: after a failed one, stop.
	step := func(name string, f func(t *testing.T)) {
		t.Helper()
		if !t.Run(name, f) {
			t.FailNow()
		}
	}

	tab := browser
	// Marks a page the back-forward cache brings back, for goBack's report.
	browsertest.Do(t, tab, "watching the back-forward cache", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
			Source: `addEventListener("pageshow", (e) => { if (e.persisted) document.documentElement.dataset.restored = "bfcache"; });`,
		})
		return err
	}))
	browsertest.Do(t, tab, "opening the app", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.ID("oidc-login")))
	shots.Take(t, tab, "sign-in")
	browsertest.Do(t, tab, "following the OpenID link",
		chromedp.Click(chromedp.CSS(`a[href^="/auth/login"]`)),
		chromedp.WaitVisible(chromedp.CSS(`input[name="login"]`)))
	shots.Take(t, tab, "provider-login")
	signIn(t, tab, browserUser, "#accounts-table")
	shots.Take(t, tab, "accounts")

	step("the session cookie is __Host-, HttpOnly, Secure, SameSite=Lax and sent", func(t *testing.T) {
		cookies := browsertest.Get[[]*network.Cookie](t, tab, "reading cookies", func(ctx context.Context, _ *chromedp.Target) ([]*network.Cookie, error) {
			res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/"}})
			return res.Cookies, err
		})
		var session *network.Cookie
		for _, ck := range cookies {
			switch {
			case ck.Name == sessionCookieN:
				session = ck
			case strings.HasPrefix(ck.Name, "__Host-bff_login"):
				t.Errorf("login binding cookie %s is left after the login", ck.Name)
			}
		}
		if session == nil {
			t.Fatalf("no %s cookie among %d", sessionCookieN, len(cookies))
		}
		// The __Host- prefix itself makes the browser refuse the cookie with
		// a Domain, a Path other than / or without Secure.
		if !session.HTTPOnly || !session.Secure || session.SameSite != network.CookieSameSiteLax || !session.Session {
			t.Errorf("cookie flags: HttpOnly=%t Secure=%t SameSite=%s Session=%t, want HttpOnly, Secure, Lax, a session cookie",
				session.HTTPOnly, session.Secure, session.SameSite, session.Session)
		}
		visible := browsertest.Get(t, tab, "reading document.cookie", chromedp.Evaluate[string]("document.cookie"))
		if strings.Contains(visible, "bff_session") || strings.Contains(visible, session.Value) {
			t.Errorf("document.cookie shows the session cookie: %q", visible)
		}
		who := browsertest.Get(t, tab, "reading who", chromedp.TextContent(chromedp.ID("who")))
		if !strings.Contains(who, browserUser) {
			t.Errorf("the app shows %q, want the signed-in user %s (the cookie was not sent)", who, browserUser)
		}
	})

	step("transactions page by page", func(t *testing.T) {
		waitCount(t, tab, "#transactions tbody tr", 20)
		browsertest.Do(t, tab, "loading more", chromedp.Click(chromedp.ID("load-more")))
		waitCount(t, tab, "#transactions tbody tr", 40)
		shots.Take(t, tab, "transactions-page-2")
	})

	step("refresh, then the credit guard's answer", func(t *testing.T) {
		browsertest.Do(t, tab, "refreshing",
			chromedp.Click(chromedp.ID("refresh")),
			chromedp.WaitVisible(chromedp.CSS("#refresh-status .ok")),
			chromedp.Click(chromedp.ID("refresh")),
			chromedp.WaitVisible(chromedp.CSS(`#refresh-status [data-code="REFRESH_TOO_SOON"]`)))
		shots.Take(t, tab, "refresh-too-soon")
	})

	var paymentID string
	step("a validation error next to its field, then a payment through the bank", func(t *testing.T) {
		browsertest.Do(t, tab, "opening the payment form",
			chromedp.Click(chromedp.CSS(`#nav a[href="/pay"]`)),
			chromedp.WaitVisible(chromedp.ID("pay-form")),
			setInput("iban", ""),
			chromedp.Click(chromedp.CSS(`#pay-form button[type="submit"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#iban[aria-invalid="true"]`)))
		// The words of web/app/src/messages.ts (fieldMessages.iban), not the upstream's.
		if msg := browsertest.Get(t, tab, "reading the field error", chromedp.TextContent(chromedp.ID("iban-error"))); !strings.HasPrefix(msg, "Enter the IBAN") {
			t.Errorf("the IBAN field shows %q, want the app's own words about it", msg)
		}
		shots.Take(t, tab, "validation-error")
		browsertest.Do(t, tab, "paying",
			setInput("iban", "IL620108000000099999999"),
			setInput("remittance", "Browser journey"),
			chromedp.Click(chromedp.CSS(`#pay-form button[type="submit"]`)))
		approveAtBank(t, tab, shots, "bank-payment-consent", `#payment-outcome [data-status="ACSC"]`)
		shots.Take(t, tab, "payment-done")
		loc := browsertest.Get(t, tab, "location", chromedp.Location())
		paymentID = mustURL(t, loc).Query().Get("paymentId")
		if !strings.HasPrefix(loc, base+"/payment-done?") || paymentID == "" {
			t.Fatalf("back from the bank at %s, want %s/payment-done?paymentId=…", loc, base)
		}
	})

	step("the payments list", func(t *testing.T) {
		browsertest.Do(t, tab, "opening the payments",
			chromedp.Click(chromedp.CSS(`#nav a[href="/payments"]`)),
			chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#payments-table tr[data-payment-id=%s][data-status="ACSC"]`, jsString(paymentID)))))
		shots.Take(t, tab, "payments")
	})

	step("connecting a bank", func(t *testing.T) {
		browsertest.Do(t, tab, "connecting",
			chromedp.Click(chromedp.CSS(`#nav a[href="/connections"]`)),
			chromedp.WaitVisible(chromedp.ID("connect-form")),
			chromedp.Click(chromedp.ID("connect")))
		approveAtBank(t, tab, shots, "bank-connection-consent", `#connection-outcome[data-status="ACTIVE"]`)
		shots.Take(t, tab, "bank-connected")
	})

	step("ending another device's session", func(t *testing.T) {
		other := browsertest.Profile(t, browser)
		browsertest.Do(t, other, "opening the app on another device",
			chromedp.Navigate(base+"/sessions"),
			chromedp.WaitVisible(chromedp.ID("oidc-login")),
			chromedp.Click(chromedp.CSS(`a[href^="/auth/login"]`)))
		signIn(t, other, browserUser, "#sessions table")
		browsertest.Do(t, tab, "opening the sessions",
			chromedp.Click(chromedp.CSS(`#nav a[href="/sessions"]`)))
		waitCount(t, tab, "#sessions tr[data-session-id]", 2)
		shots.Take(t, tab, "sessions")
		browsertest.Do(t, tab, "ending the other session",
			chromedp.Click(chromedp.CSS(`#sessions tr[data-session-id]:not([data-current]) button.revoke`)))
		waitCount(t, tab, "#sessions tr[data-session-id]", 1)
		// The sign-in page asks how to sign in with a GET (/auth/methods):
		// no POST of its own for the next step to count.
		browsertest.Do(t, other, "reloading the other device",
			chromedp.Reload(),
			chromedp.WaitVisible(chromedp.ID("oidc-login")))
	})

	step("an attacker's page changes nothing and reads nothing", func(t *testing.T) {
		attacker := servePage(attackerPage(base))
		t.Cleanup(attacker.Close)
		before := len(e.sim.PaymentRemittances(browserUser))
		// localhost is another site than 127.0.0.1: SameSite=Lax keeps the
		// cookie off every cross-site subrequest and POST. The same server
		// at 127.0.0.1 is the same site (another port), unlisted in
		// cors.allowed_origins: the cookie goes along, and the CSRF check
		// and CORS stop it.
		cross := strings.Replace(attacker.URL, "127.0.0.1", "localhost", 1)
		if cross == attacker.URL {
			t.Fatalf("the attacker's server is at %s, not 127.0.0.1: no cross-site address for it", attacker.URL)
		}
		for _, tt := range []struct{ link, why string }{
			{cross + "/", "SESSION_REQUIRED"}, // no cookie went along
			{attacker.URL + "/", "CSRF_REJECTED"},
		} {
			link := tt.link
			logged := len(e.logs.String())
			got := pageResults(t, tab, link)
			// Three POSTs reach the BFF: the two forms and the no-cors
			// fetch (the fetch with X-CSRF stops at its preflight). An
			// opaque answer reaches the page before its access log line is
			// written: wait for the three lines.
			var codes []string
			_ = poll(5*time.Second, func() error { // the count is checked below
				if codes = postCodes(e.logs.String()[logged:]); len(codes) < 3 {
					return errors.New("fewer than three POSTs logged")
				}
				return nil
			})
			t.Logf("%s: the page saw %v; the BFF answered %v", link, got, codes)
			if len(codes) != 3 || slices.ContainsFunc(codes, func(c string) bool { return !strings.HasSuffix(c, " "+tt.why) }) {
				t.Errorf("%s: the BFF answered its POSTs with %v, want 3, each %s", link, codes, tt.why)
			}
			for name, v := range got {
				if !strings.HasPrefix(v, "blocked") && v != "opaque" && v != "error" {
					t.Errorf("%s: %q could be read: %q", link, name, v)
				}
			}
			if len(got) != 6 {
				t.Errorf("%s: %d attempts reported, want 6: %v", link, len(got), got)
			}
		}
		shots.Take(t, tab, "attacker-page")
		if after := e.sim.PaymentRemittances(browserUser); len(after) != before {
			t.Fatalf("the attacker's pages made %d payments: %v", len(after)-before, after)
		}
		browsertest.Do(t, tab, "back in the app, still signed in",
			chromedp.Navigate(base+"/"),
			chromedp.WaitVisible(chromedp.ID("accounts-table")))
	})

	step("a second origin in cors.allowed_origins works with credentials", func(t *testing.T) {
		before := len(e.sim.PaymentRemittances(browserUser))
		got := pageResults(t, tab, friend.URL+"/")
		if got["accounts"] == "" || !strings.HasPrefix(got["accounts"], "200 ") || got["payment"] != "201 payUrl" || got["requestId"] == "" {
			t.Fatalf("the partner page got %v, want its accounts read, a payment created and X-Request-Id exposed", got)
		}
		if after := len(e.sim.PaymentRemittances(browserUser)); after != before+1 {
			t.Fatalf("%d payments made from the partner page, want 1", after-before)
		}
	})

	step("logout, then the back button shows no data", func(t *testing.T) {
		browsertest.Do(t, tab, "logging out",
			chromedp.Navigate(base+"/sessions"),
			chromedp.WaitVisible(chromedp.CSS("#sessions table")),
			chromedp.Click(chromedp.ID("logout")),
			chromedp.WaitVisible(chromedp.CSS(`button[name="logout"][value="yes"]`)))
		shots.Take(t, tab, "provider-logout")
		browsertest.Do(t, tab, "confirming at the provider",
			chromedp.Click(chromedp.CSS(`button[name="logout"][value="yes"]`)),
			chromedp.WaitVisible(chromedp.ID("oidc-login")))
		shots.Take(t, tab, "signed-out")
		// Two steps back: the provider's logout page, then the sessions page
		// as it was left, from the back-forward cache or the network.
		goBack(t, tab, 2, "/sessions")
		shots.Take(t, tab, "back-after-logout")
	})

	step("a page left with data, then a logout in another tab, then back", func(t *testing.T) {
		// A click by script: chromedp's view of the DOM does not follow a
		// page brought back from the back-forward cache.
		browsertest.Do(t, tab, "signing in again",
			chromedp.Evaluate[chromedp.Void](`setTimeout(() => document.querySelector('a[href^="/auth/login"]').click(), 0)`))
		browsertest.Until(t, tab, "at the provider", `document.querySelector('input[name="login"]') !== null`)
		signIn(t, tab, browserUser, "#sessions table")
		browsertest.Do(t, tab, "opening the payments, then another site",
			chromedp.Click(chromedp.CSS(`#nav a[href="/payments"]`)),
			chromedp.WaitVisible(chromedp.ID("payments-table")),
			chromedp.Navigate(friend.URL+"/"),
			chromedp.WaitReady(chromedp.ID("done")))
		other := browsertest.Tab(t, browser)
		browsertest.Do(t, other, "logging out everywhere in another tab",
			chromedp.Navigate(base+"/sessions"),
			chromedp.WaitVisible(chromedp.CSS("#sessions table")),
			chromedp.Click(chromedp.ID("logout-everywhere")),
			chromedp.WaitVisible(chromedp.ID("oidc-login")))
		goBack(t, tab, 1, "/payments")
	})
	t.Logf("browser journey took %s", time.Since(began).Round(time.Millisecond))
}

// approveAtBank waits for the simulator's consent page in tab, takes its
// screenshot as shot, approves, and waits for want on the app's page the
// bank sends the browser back to.
func approveAtBank(t *testing.T, tab context.Context, shots *browsertest.Shots, shot, want string) {
	t.Helper()
	browsertest.Do(t, tab, "at the bank's consent page", chromedp.WaitVisible(chromedp.ID("approve")))
	shots.Take(t, tab, shot)
	browsertest.Do(t, tab, "approving at the bank",
		chromedp.Click(chromedp.ID("approve")),
		chromedp.WaitVisible(chromedp.CSS(want)))
}

// goBack goes steps back in tab's history to the app's page at path, which
// must then check the session again and show the sign-in page (returnTo
// path) with none of the user's data, whether the browser brought the page
// back from its back-forward cache or loaded it again.
func goBack(t *testing.T, tab context.Context, steps int, path string) {
	t.Helper()
	browsertest.Do(t, tab, "going back",
		// Later, so the evaluation answers before its page goes.
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf("setTimeout(() => history.go(-%d), 0)", steps)))
	browsertest.Until(t, tab, "back on "+path,
		fmt.Sprintf(`location.pathname === "/login" && new URLSearchParams(location.search).get("returnTo") === %s && document.querySelector("#oidc-login") !== null`, jsString(path)))
	if n := countIn(t, tab, "#sessions table, #accounts-table, #payments-table, #transactions tbody tr"); n != 0 {
		t.Errorf("signed out and back on %s, the page still shows %d of the user's tables", path, n)
	}
	// The page must come from the back-forward cache: that is the case the
	// app's pageshow handler is for (a page loaded again checks anyway).
	if !browsertest.Get(t, tab, "how the page came back", chromedp.Evaluate[bool](`document.documentElement.dataset.restored === "bfcache"`)) {
		t.Errorf("back on %s, but not from the back-forward cache: the test no longer covers it", path)
	}
}

// TestBrowserLoginAcrossTabs: a login started in one tab and finished in
// another, and two logins under way in two tabs, both finishing.
func TestBrowserLoginAcrossTabs(t *testing.T) {
	dist := buildApp(t)
	pub := freeAddr(t)
	base := "http://" + pub
	browserEnv(t, pub, dist)
	browser := browsertest.Start(t)

	t.Run("started in one tab, finished in another", func(t *testing.T) {
		first := browsertest.Profile(t, browser)
		browsertest.Do(t, first, "starting a login",
			chromedp.Navigate(base+"/auth/login?returnTo=/payments"),
			chromedp.WaitVisible(chromedp.CSS(`input[name="login"]`)))
		at := browsertest.Get(t, first, "reading the provider's page", chromedp.Location())
		second := browsertest.Tab(t, first)
		browsertest.Do(t, second, "opening the provider's page in another tab", chromedp.Navigate(at))
		signIn(t, second, browserUser, "#payments-table")
		browsertest.Do(t, first, "the first tab is signed in too",
			chromedp.Navigate(base+"/"),
			chromedp.WaitVisible(chromedp.ID("accounts-table")))
	})

	t.Run("two logins under way in two tabs both finish", func(t *testing.T) {
		a := browsertest.Profile(t, browser)
		b := browsertest.Tab(t, a)
		browsertest.Do(t, a, "starting the first login",
			chromedp.Navigate(base+"/auth/login?returnTo=/payments"),
			chromedp.WaitVisible(chromedp.CSS(`input[name="login"]`)))
		browsertest.Do(t, b, "starting the second login",
			chromedp.Navigate(base+"/auth/login?returnTo=/connections"),
			chromedp.WaitVisible(chromedp.CSS(`input[name="login"]`)))
		signIn(t, a, browserUser, "#payments-table")
		signIn(t, b, browserUser, "#connections-table")
	})
}
