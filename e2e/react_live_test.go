//go:build integration

package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fintech-bff/bff/internal/testing/browsertest"
	"github.com/fintech-bff/bff/internal/upstreamsim"
)

// TestBrowserReactSeesPaymentStatusLive is TestBrowserSeesPaymentStatusLive
// for the React example (web/react-app): a payment's status, moved at the
// bank (the simulator) after the user is back in the app, shows on
// /payment-done (its outcome and its row among the recent payments) and
// then on /payments (the recent payments and the payments at the bank),
// without a reload: the page's events() stream moves them, and the page
// reads the payment again when its stream opens, so a change made before
// that is not missed either. The bank's page names the payee the form
// sent (creditorName), not only its IBAN.
func TestBrowserReactSeesPaymentStatusLive(t *testing.T) {
	dist := buildReactApp(t)
	pub := freeAddr(t)
	base := "http://" + pub
	e := liveEnv(t, pub, dist, upstreamsim.ProfileFull)
	tab := browsertest.Start(t)
	shots := browsertest.NewShots(t, os.Getenv("BFF_BROWSER_SHOTS"))

	browsertest.Do(t, tab, "opening the React app",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`main[data-app="react"] #oidc-login`)),
		chromedp.Click(chromedp.ID("oidc-login")))
	signIn(t, tab, browserUser, "#accounts-table")

	paymentID := payToTheBank(t, tab, e, "Live status")
	if page := textOf(t, tab, "body"); !strings.Contains(page, "Dana Levi") {
		t.Errorf("the bank's page does not name the form's payee, Dana Levi:\n%s", page)
	}

	// Held streams: the status moves while the page's stream opens, so
	// only a read on its opening shows it (TestBrowserSeesPaymentStatusLive).
	streams := holdStreams(t, tab)
	browsertest.Do(t, tab, "back in the app without deciding at the bank",
		chromedp.Navigate(base+"/payment-done?paymentId="+paymentID),
		chromedp.WaitVisible(chromedp.CSS(`#payment-outcome [data-status]`)))
	if st := browsertest.Get(t, tab, "the outcome's status", chromedp.Evaluate[string](
		`document.querySelector("#payment-outcome [data-status]").dataset.status`)); st != "INIT" {
		t.Fatalf("before any decision the outcome is %q, want INIT", st)
	}
	browsertest.Do(t, tab, "marking the page", chromedp.Evaluate[chromedp.Void](`window.__sameDocument = true`))

	streams.storedWhileHeld(t, e, paymentID, "ACTC")
	recentRow := fmt.Sprintf(`document.querySelector('#recent-payments-table tr[data-payment-id=%s]')`, jsString(paymentID))
	browsertest.Until(t, tab, "/payment-done showing ACTC, made before its stream opened",
		fmt.Sprintf(`document.querySelector('#payment-outcome [data-status="ACTC"]') !== null && %[1]s !== null && %[1]s.dataset.paymentStatus === "ACTC"`, recentRow))
	if got, want := textOf(t, tab, fmt.Sprintf(`#recent-payments-table tr[data-payment-id=%s] .request-state`, jsString(paymentID))), "Sent to the bank"; got != want {
		t.Errorf("the payment's request reads %q, want %q", got, want)
	}
	shots.Take(t, tab, "react-live-actc")

	// In the app (a history.pushState, not a load) to the payments.
	browsertest.Do(t, tab, "the payments",
		chromedp.Click(chromedp.CSS(`.links a[href="/payments"]`)),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#payments-table tr[data-payment-id=%s][data-status="ACTC"]`, jsString(paymentID)))))
	bankRow := fmt.Sprintf(`document.querySelector('#payments-table tr[data-payment-id=%s]')`, jsString(paymentID))
	browsertest.Until(t, tab, "the payment among the recent ones", recentRow+" !== null")
	moved := time.Now()
	simPaymentStatus(t, e, paymentID, "ACSC")
	browsertest.Until(t, tab, "/payments showing ACSC",
		fmt.Sprintf(`%[1]s !== null && %[1]s.dataset.paymentStatus === "ACSC" && %[2]s !== null && %[2]s.dataset.status === "ACSC"`, recentRow, bankRow))
	if took := time.Since(moved); took > liveWithin {
		t.Errorf("ACSC took %s to show, want within %s", took.Round(time.Millisecond), liveWithin)
	}
	if got, want := textOf(t, tab, fmt.Sprintf(`#payments-table tr[data-payment-id=%s] td:last-child`, jsString(paymentID))), "Paid"; got != want {
		t.Errorf("the payment at the bank reads %q, want %q", got, want)
	}
	if !browsertest.Get(t, tab, "checking the mark", chromedp.Evaluate[bool](`window.__sameDocument === true`)) {
		t.Fatalf("the page was loaded again to show ACSC, want it changed in place")
	}
	if loc := browsertest.Get(t, tab, "location", chromedp.Location()); loc != base+"/payments" {
		t.Errorf("the browser is at %s, want /payments", loc)
	}
	shots.Take(t, tab, "react-live-acsc")
}
