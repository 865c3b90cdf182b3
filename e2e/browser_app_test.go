//go:build integration

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fintech-bff/bff/internal/testing/browsertest"
	"github.com/fintech-bff/bff/internal/upstreamsim"
)

// The example app's answers to a failing or slow upstream, and its layout
// on a phone, in the real browser (docs/browser-tests.md). What a user reads is
// checked against web/app/src/messages.ts's sentences, never a raw code.

// textOf is the text of the first element css matches in tab.
func textOf(t *testing.T, tab context.Context, css string) string {
	t.Helper()
	return browsertest.Get(t, tab, "reading "+css, chromedp.Evaluate[string](
		fmt.Sprintf("(document.querySelector(%s) || {}).textContent || ''", jsString(css))))
}

// TestBrowserRetry: an upstream that fails with a retryable answer gets the
// table's sentence and a Retry; once the fault is cleared, Retry shows the
// data.
func TestBrowserRetry(t *testing.T) {
	dist := buildApp(t)
	pub := freeAddr(t)
	base := "http://" + pub
	e := browserEnv(t, pub, dist)
	// Every accounts call fails, 503 with no body: UPSTREAM_UNAVAILABLE,
	// retry_later, retried by the client twice before it shows.
	e.sim.InjectFault(upstreamsim.Fault{PathPrefix: "/v2/data/accounts", Status: 503, EmptyBody: true})
	tab := browsertest.Start(t)
	openAndSignIn(t, tab, base, browserUser, `#accounts .error button.retry`)

	box := `#accounts .error[data-code="UPSTREAM_UNAVAILABLE"]`
	if got, want := textOf(t, tab, box+" .message"), "The bank is not available right now. Try again in a moment."; got != want {
		t.Errorf("the accounts show %q, want %q", got, want)
	}
	ref := textOf(t, tab, box+" .reference")
	if !strings.Contains(ref, "Reference") || len(ref) < 20 {
		t.Errorf("the error's small print is %q, want the requestId for support", ref)
	}
	// The reference is a random id, which may hold any digits ("503"
	// too): the raw code is looked for in everything else.
	if all := strings.Replace(textOf(t, tab, "#accounts"), ref, "", 1); strings.Contains(all, "UPSTREAM") || strings.Contains(all, "503") {
		t.Errorf("the accounts show a raw code: %q", all)
	}
	browsertest.NewShots(t, os.Getenv("BFF_BROWSER_SHOTS")).Take(t, tab, "retry-offered")

	e.sim.ClearFaults()
	browsertest.Do(t, tab, "retrying",
		chromedp.Click(chromedp.CSS(`#accounts button.retry`)),
		chromedp.WaitVisible(chromedp.ID("accounts-table")))
	if n := countIn(t, tab, "#accounts .error"); n != 0 {
		t.Errorf("after the retry %d errors are left", n)
	}
}

// TestBrowserBoundedWait: an upstream slower than the client's bound gets
// "still trying" first, then the bounded failure with a Retry, not an
// endless "Loading…". The app is built with a 4 s bound (under the BFF's
// 15 s upstream.timeout) so the client's own bound is what ends the wait.
func TestBrowserBoundedWait(t *testing.T) {
	dist := buildAppWith(t, "APP_TOTAL_TIMEOUT_MS=4000", "APP_SLOW_AFTER_MS=1000")
	pub := freeAddr(t)
	base := "http://" + pub
	e := browserEnv(t, pub, dist)
	tab := browsertest.Start(t)
	browsertest.Do(t, tab, "opening the app",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.ID("oidc-login")),
		chromedp.Click(chromedp.ID("oidc-login")))
	// Longer than the bound and than any step: only the client ends it
	// (the simulator's wait ends when the BFF's request goes away).
	e.sim.InjectFault(upstreamsim.Fault{PathPrefix: "/v2/data/accounts", Delay: 2 * time.Minute})
	signIn(t, tab, browserUser, `#accounts`)

	browsertest.Until(t, tab, "still trying", `!document.getElementById("still-trying").hidden`)
	if got, want := textOf(t, tab, "#still-trying"), "Still trying… the bank is slow to answer."; got != want {
		t.Errorf("while waiting the page says %q, want %q", got, want)
	}
	shots := browsertest.NewShots(t, os.Getenv("BFF_BROWSER_SHOTS"))
	shots.Take(t, tab, "still-trying")
	box := `#accounts .error[data-code="CLIENT_TIMEOUT"]`
	browsertest.Do(t, tab, "the bounded failure", chromedp.WaitVisible(chromedp.CSS(box+" button.retry")))
	if got, want := textOf(t, tab, box+" .message"), "This is taking too long. The bank may be busy: try again in a moment."; got != want {
		t.Errorf("after the bound the accounts show %q, want %q", got, want)
	}
	browsertest.Until(t, tab, "no longer still trying", `document.getElementById("still-trying").hidden`)
	shots.Take(t, tab, "gave-up")

	e.sim.ClearFaults()
	browsertest.Do(t, tab, "retrying",
		chromedp.Click(chromedp.CSS(`#accounts button.retry`)),
		chromedp.WaitVisible(chromedp.ID("accounts-table")))
}

// noOverflow is true when the page is no wider than the screen and the
// menu's links sit on one line.
const noOverflow = `document.documentElement.scrollWidth <= window.innerWidth &&
	new Set([...document.querySelectorAll("#nav a")].map((a) => Math.round(a.getBoundingClientRect().top))).size <= 1`

// TestBrowserPhoneLayout: at 390 × 844 every page of the app fits the
// screen (no sideways scrolling of the page) and the menu is one line.
func TestBrowserPhoneLayout(t *testing.T) {
	dist := buildApp(t)
	pub := freeAddr(t)
	base := "http://" + pub
	browserEnv(t, pub, dist)
	tab := browsertest.Start(t)
	shots := browsertest.NewShots(t, os.Getenv("BFF_BROWSER_SHOTS"))
	check := func(name string) {
		t.Helper()
		shots.Take(t, tab, "phone-"+name)
		if !browsertest.Get(t, tab, "measuring "+name, chromedp.Evaluate[bool](noOverflow)) {
			w := browsertest.Get(t, tab, "measuring", chromedp.Evaluate[string](
				`document.documentElement.scrollWidth + " > " + window.innerWidth + "; menu tops " + [...document.querySelectorAll("#nav a")].map((a) => Math.round(a.getBoundingClientRect().top))`))
			t.Errorf("%s at 390 px: %s", name, w)
		}
	}
	browsertest.Do(t, tab, "opening the app on a phone",
		chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.ID("oidc-login")))
	check("sign-in")
	browsertest.Do(t, tab, "signing in", chromedp.Click(chromedp.ID("oidc-login")))
	signIn(t, tab, browserUser, "#accounts-table")
	waitCount(t, tab, "#transactions tbody tr", 20)
	check("accounts")

	browsertest.Do(t, tab, "paying",
		chromedp.Navigate(base+"/pay"),
		chromedp.WaitVisible(chromedp.ID("pay-form")),
		setInput("iban", ""),
		chromedp.Click(chromedp.CSS(`#pay-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#iban[aria-invalid="true"]`)))
	check("payment-form")
	browsertest.Do(t, tab, "paying",
		setInput("iban", "IL620108000000099999999"),
		setInput("remittance", "A rather long description of a payment made from a phone"),
		chromedp.Click(chromedp.CSS(`#pay-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("approve")),
		chromedp.Click(chromedp.ID("approve")),
		chromedp.WaitVisible(chromedp.CSS(`#payment-outcome [data-status]`)))
	check("payment-done")

	browsertest.Do(t, tab, "connecting a bank",
		chromedp.Navigate(base+"/connections"),
		chromedp.WaitVisible(chromedp.ID("connect-form")),
		chromedp.Click(chromedp.ID("connect")),
		chromedp.WaitVisible(chromedp.ID("approve")),
		chromedp.Click(chromedp.ID("approve")),
		chromedp.WaitVisible(chromedp.CSS(`#connection-outcome[data-status]`)))
	check("connection-done")

	for _, p := range []struct{ path, want string }{
		{"/payments", `#payments-table tr[data-payment-id]`},
		{"/connections", `#connections-table tr[data-connection-id]`},
		{"/sessions", `#sessions table`},
	} {
		browsertest.Do(t, tab, "opening "+p.path, chromedp.Navigate(base+p.path), chromedp.WaitVisible(chromedp.CSS(p.want)))
		check(strings.TrimPrefix(p.path, "/"))
	}
}
