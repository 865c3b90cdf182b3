//go:build integration

package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/fintech-bff/bff/internal/testing/browsertest"
)

// TestStepUpInChromium: the user's path in a real browser, with the BFF's
// own pages only (the example apps' are in browser_examples_test.go). A
// payment over the threshold is held; the provider's page shows its amount
// and payee; Approve sends exactly one payment and the browser comes back
// to returnTo; Cancel sends none; below the threshold nothing changes.
func TestStepUpInChromium(t *testing.T) {
	t.Parallel()
	e, _ := stepUpEnv(t, options{})
	tab := browsertest.Start(t)
	browsertest.Do(t, tab, "starting a login", chromedp.Navigate(e.public+"/auth/login?returnTo=/auth/session"))
	browsertest.Do(t, tab, "signing in at the provider",
		chromedp.WaitVisible(chromedp.CSS(`input[name="login"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="login"]`), "carla"),
		chromedp.Click(chromedp.CSS(`button[type="submit"]`)))
	browsertest.Until(t, tab, "signed in", `document.body && document.body.innerText.includes('"userId":"carla"')`)

	// pay posts a payment from the page, as the app's fetch would.
	pay := func(amount, key string) (int, string) {
		t.Helper()
		out := browsertest.Get(t, tab, "paying "+amount, chromedp.Evaluate[string](fmt.Sprintf(
			`fetch("/api/v2/payments", {method: "POST", credentials: "include",
			   headers: {"Content-Type": "application/json", "X-CSRF": "1", "Idempotency-Key": %s}, body: %s})
			 .then(async (r) => r.status + " " + await r.text())`, jsString(key), jsString(eurPayment(amount, "Invoice "+key))), chromedp.EvalAwaitPromise))
		status, body, _ := strings.Cut(out, " ")
		var n int
		fmt.Sscan(status, &n)
		return n, body
	}
	stepUpURL := func(body string) string {
		t.Helper()
		i := strings.Index(body, `"stepUpUrl":"`)
		if i < 0 {
			t.Fatalf("no stepUpUrl in %s", body)
		}
		rest := body[i+len(`"stepUpUrl":"`):]
		return rest[:strings.Index(rest, `"`)]
	}

	if status, body := pay("42.00", "chromium-small"); status != 201 {
		t.Fatalf("below the threshold: got %d %s, want 201", status, body)
	}
	before := paymentPosts(e.sim)

	status, body := pay("1000.00", "chromium-big")
	if status != 401 || !strings.Contains(body, `"code":"STEP_UP_REQUIRED"`) {
		t.Fatalf("over the threshold: got %d %s, want 401 STEP_UP_REQUIRED", status, body)
	}
	browsertest.Do(t, tab, "opening the step-up URL",
		chromedp.Navigate(stepUpURL(body)+"&returnTo=/bff/payments/chromium-big"),
		chromedp.WaitVisible(chromedp.ID("op-approve")))
	for id, want := range map[string]string{"op-payment-amount": "1000.00 EUR", "op-payment-payee": "Jane Doe",
		"op-payment-iban": "DE89370400440532013000", "op-payment-remittance": "Invoice chromium-big"} {
		if got := browsertest.Get(t, tab, "reading "+id, chromedp.TextContent(chromedp.ID(id))); got != want {
			t.Fatalf("the provider's page shows %s %q, want %q", id, got, want)
		}
	}
	browsertest.Do(t, tab, "approving with the one-time code",
		chromedp.SendKeys(chromedp.ID("op-otp"), "246810"),
		chromedp.Click(chromedp.ID("op-approve")))
	browsertest.Until(t, tab, "back at returnTo with the payment done",
		`location.pathname === "/bff/payments/chromium-big" && location.search.includes("stepUp=approved") && document.body.innerText.includes('"state":"done"')`)
	if n := paymentPosts(e.sim); n != before+1 {
		t.Fatalf("the upstream got %d creations after the approval, want exactly 1", n-before)
	}

	status, body = pay("300.00", "chromium-cancel")
	if status != 401 {
		t.Fatalf("got %d %s, want 401", status, body)
	}
	browsertest.Do(t, tab, "cancelling at the provider",
		chromedp.Navigate(stepUpURL(body)+"&returnTo=/bff/payments/chromium-cancel"),
		chromedp.WaitVisible(chromedp.ID("op-cancel")),
		chromedp.Click(chromedp.ID("op-cancel")))
	browsertest.Until(t, tab, "back at returnTo with the payment declined",
		`location.search.includes("stepUp=declined") && document.body.innerText.includes('"state":"declined"')`)
	if n := paymentPosts(e.sim); n != before+1 {
		t.Fatalf("a cancelled payment reached the upstream (%d creations after the approval)", n-before-1)
	}
}
