//go:build integration

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/fintech-bff/bff/internal/testing/browsertest"
	"github.com/fintech-bff/bff/internal/upstreamsim"
)

// appStepUpOptions is an example app (its build in dist) served by a BFF
// on pub that holds payments for approval, with its status followed live.
func appStepUpOptions(pub, dist string) options {
	base := "http://" + pub
	return options{
		publicAddr:   pub,
		secureCookie: true,
		sim:          upstreamsim.Options{AllowedRedirectURLs: []string{base + "/payment-done", base + "/connection-done"}, Control: true},
		limitsYAML:   "limits: { requests_per_second: 0, auth_per_minute: 0, refresh_interval: 15m, sessions_per_user: 0 }",
		extraYAML: fmt.Sprintf(`static_dir: %q
payments:
  watch_interval: %s
  step_up:
    enabled: true
    thresholds: ["EUR 100.00"]
    acr_values: ["urn:bff:acr:mfa"]
    max_age: 5m
    hold_for: 10m`, dist, liveWatchInterval),
	}
}

// TestStepUpInTheExampleApps: both example apps (web/app and
// web/react-app, served by the BFF) handle STEP_UP_REQUIRED. A payment the
// policy holds (the apps pay in ILS, a currency with no threshold: always
// held) shows "needs your approval"; Approve goes to the provider, which
// shows the payment; back in the app the payment is sent, exactly once,
// and its status moves live from the event stream; a second payment
// cancelled at the provider shows as not sent, and sends nothing.
func TestStepUpInTheExampleApps(t *testing.T) {
	for _, app := range []struct {
		name  string
		build func(*testing.T) string
	}{{"plain", buildApp}, {"react", buildReactApp}} {
		t.Run(app.name, func(t *testing.T) {
			dist := app.build(t)
			pub := freeAddr(t)
			base := "http://" + pub
			e, _ := oidcEnvWith(t, appStepUpOptions(pub, dist))
			tab := browsertest.Start(t)
			openAndSignIn(t, tab, base, browserUser, "#nav")

			// pay submits the app's payment form and waits for its
			// approval box; it returns the payment's Idempotency-Key.
			pay := func(remittance string) string {
				t.Helper()
				browsertest.Do(t, tab, "paying "+remittance,
					chromedp.Navigate(base+"/pay"),
					chromedp.WaitVisible(chromedp.ID("pay-form")),
					typeInto("remittance", remittance),
					chromedp.Click(chromedp.CSS(`#pay-form button[type="submit"]`)),
					chromedp.WaitVisible(chromedp.ID("step-up")))
				key := browsertest.Get(t, tab, "the held payment's key", chromedp.Evaluate[string](`document.getElementById("step-up").dataset.key`))
				if key == "" {
					t.Fatal("the approval box names no key")
				}
				return key
			}

			key := pay("Approve me")
			if n := paymentPosts(e.sim); n != 0 {
				t.Fatalf("the held payment reached the upstream (%d creations)", n)
			}
			browsertest.Do(t, tab, "approving",
				chromedp.Click(chromedp.ID("step-up-approve")),
				chromedp.WaitVisible(chromedp.ID("op-approve")))
			if amount := browsertest.Get(t, tab, "the provider's amount", chromedp.TextContent(chromedp.ID("op-payment-amount"))); !strings.HasSuffix(amount, " ILS") {
				t.Fatalf("the provider shows %q, want the payment's ILS amount", amount)
			}
			if remit := browsertest.Get(t, tab, "the provider's reference", chromedp.TextContent(chromedp.ID("op-payment-remittance"))); remit != "Approve me" {
				t.Fatalf("the provider shows the reference %q, want %q", remit, "Approve me")
			}
			// The form's payee name (creditorName), not the IBAN alone.
			if payee := browsertest.Get(t, tab, "the provider's payee", chromedp.TextContent(chromedp.ID("op-payment-payee"))); payee != "Dana Levi" {
				t.Fatalf("the provider shows the payee %q, want the form's %q", payee, "Dana Levi")
			}
			approveAtTheProvider(t, tab, e)
			paymentID := browsertest.Get(t, tab, "the payment's id", chromedp.Evaluate[string](fmt.Sprintf(
				`fetch("/bff/payments/" + encodeURIComponent(%s), {credentials: "include"}).then((r) => r.json()).then((r) => r.paymentId || "")`,
				jsString(key)), chromedp.EvalAwaitPromise))
			if paymentID == "" {
				t.Fatal("the approved payment's record names no payment")
			}
			simPaymentStatus(t, e, paymentID, "ACSC")
			browsertest.Until(t, tab, "the app showing the bank's status live",
				`document.querySelector('#step-up-approved[data-payment-status="ACSC"]') !== null`)

			pay("Cancel me")
			browsertest.Do(t, tab, "cancelling at the provider",
				chromedp.Click(chromedp.ID("step-up-approve")),
				chromedp.WaitVisible(chromedp.ID("op-cancel")),
				chromedp.Click(chromedp.ID("op-cancel")))
			browsertest.Until(t, tab, "the app showing the payment not sent",
				`document.querySelector('#step-up-declined[data-declined="denied"]') !== null`)
			if n := paymentPosts(e.sim); n != 1 {
				t.Fatalf("a cancelled payment reached the upstream (%d creations in all, want 1)", n)
			}
		})
	}
}

// approveAtTheProvider approves the held payment on the provider's page
// open in tab (its one-time code), waits for the app to show it sent, and
// requires that the upstream got exactly one creation.
func approveAtTheProvider(t *testing.T, tab context.Context, e *env) {
	t.Helper()
	browsertest.Do(t, tab, "approving at the provider",
		chromedp.SendKeys(chromedp.ID("op-otp"), "246810"),
		chromedp.Click(chromedp.ID("op-approve")))
	browsertest.Until(t, tab, "the app showing the payment sent",
		`document.querySelector('#step-up-approved[data-state="done"]') !== null`)
	if n := paymentPosts(e.sim); n != 1 {
		t.Fatalf("the upstream got %d creations after the approval, want exactly 1", n)
	}
}
