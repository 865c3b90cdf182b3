//go:build integration

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/fintech-bff/bff/internal/testing/browsertest"
	"github.com/fintech-bff/bff/internal/upstreamsim"
)

// buildReactApp builds web/react-app into a temporary directory for
// static_dir. Without node or the app's node_modules it fails, saying
// what to run: the React example is tested, never skipped.
func buildReactApp(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node (Node.js >= 20) is needed to build the React example app")
	}
	app, err := filepath.Abs("../web/react-app")
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range []string{"esbuild", "react", "react-dom"} {
		if _, err := os.Stat(filepath.Join(app, "node_modules", dep)); err != nil {
			t.Fatalf("web/react-app/node_modules/%s is missing: run `npm ci --prefix web/react-app` (make test does it): %v", dep, err)
		}
	}
	dist := t.TempDir()
	out, err := exec.Command(node, filepath.Join(app, "build.mjs"), dist).CombinedOutput()
	if err != nil {
		t.Fatalf("building the React app: %v\n%s", err, out)
	}
	return dist
}

// TestBrowserReactJourney is the React example (web/react-app) served by
// the BFF: the OpenID sign-in, accounts after a failure and its Retry, a
// validation error in the table's words, a payment through the bank's
// consent page and back, the payments list, and Sign out through the
// provider's logout page.
func TestBrowserReactJourney(t *testing.T) {
	dist := buildReactApp(t)
	pub := freeAddr(t)
	base := "http://" + pub
	e := browserEnv(t, pub, dist)
	e.sim.InjectFault(upstreamsim.Fault{PathPrefix: "/v2/data/accounts", Status: 503, EmptyBody: true})
	tab := browsertest.Start(t)
	shots := browsertest.NewShots(t, os.Getenv("BFF_BROWSER_SHOTS"))

	browsertest.Do(t, tab, "opening the React app",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`main[data-app="react"] #oidc-login`)))
	if n := countIn(t, tab, "#login-form"); n != 0 {
		t.Errorf("the OpenID deployment shows the dev login form")
	}
	shots.Take(t, tab, "react-sign-in")
	browsertest.Do(t, tab, "following the OpenID link", chromedp.Click(chromedp.ID("oidc-login")))
	signIn(t, tab, browserUser, `#accounts .error button.retry`)
	if got, want := textOf(t, tab, `#accounts .error[data-code="UPSTREAM_UNAVAILABLE"] .message`), "The bank is not available right now. Try again in a moment."; got != want {
		t.Errorf("the accounts show %q, want %q", got, want)
	}
	shots.Take(t, tab, "react-retry")
	e.sim.ClearFaults()
	browsertest.Do(t, tab, "retrying",
		chromedp.Click(chromedp.CSS(`#accounts button.retry`)),
		chromedp.WaitVisible(chromedp.ID("accounts-table")))
	if who := textOf(t, tab, "#who"); who != browserUser {
		t.Errorf("the header shows %q, want %s", who, browserUser)
	}

	browsertest.Do(t, tab, "a refused payment",
		chromedp.Click(chromedp.CSS(`#nav a[href="/pay"]`)),
		chromedp.WaitVisible(chromedp.ID("pay-form")),
		chromedp.SendKeys(chromedp.ID("iban"), strings.Repeat("\b", 30)),
		chromedp.Click(chromedp.CSS(`#pay-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#iban[aria-invalid="true"]`)))
	if msg := textOf(t, tab, "#iban-error"); !strings.HasPrefix(msg, "Enter the IBAN") {
		t.Errorf("the IBAN field shows %q, want the app's own words", msg)
	}
	shots.Take(t, tab, "react-validation")
	before := len(e.sim.PaymentRemittances(browserUser))
	browsertest.Do(t, tab, "paying",
		chromedp.SendKeys(chromedp.ID("iban"), "IL620108000000099999999"),
		chromedp.Click(chromedp.CSS(`#pay-form button[type="submit"]`)))
	approveAtBank(t, tab, shots, "react-bank-consent", `#payment-outcome [data-status="ACSC"]`)
	loc := browsertest.Get(t, tab, "location", chromedp.Location())
	paymentID := mustURL(t, loc).Query().Get("paymentId")
	if !strings.HasPrefix(loc, base+"/payment-done?") || paymentID == "" {
		t.Fatalf("back from the bank at %s, want %s/payment-done?paymentId=…", loc, base)
	}
	browsertest.Do(t, tab, "the payments list",
		chromedp.Click(chromedp.CSS(`.links a[href="/payments"]`)),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#payments-table tr[data-payment-id=%s][data-status="ACSC"]`, jsString(paymentID)))))
	if made := len(e.sim.PaymentRemittances(browserUser)) - before; made != 1 {
		t.Errorf("%d payments made, want 1", made)
	}
	shots.Take(t, tab, "react-payments")

	browsertest.Do(t, tab, "signing out",
		chromedp.Click(chromedp.ID("sign-out")),
		chromedp.WaitVisible(chromedp.CSS(`button[name="logout"][value="yes"]`)))
	shots.Take(t, tab, "react-provider-logout")
	browsertest.Do(t, tab, "confirming at the provider",
		chromedp.Click(chromedp.CSS(`button[name="logout"][value="yes"]`)),
		chromedp.WaitVisible(chromedp.CSS(`main[data-app="react"] #oidc-login`)))
	if who := textOf(t, tab, "#who"); who != "" {
		t.Errorf("signed out, the header shows %q", who)
	}
}
