//go:build integration

package e2e

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"

	"github.com/fintech-bff/bff/internal/receipts"
	"github.com/fintech-bff/bff/internal/testing/browsertest"
	"github.com/fintech-bff/bff/internal/upstreamsim"
)

// TestReceiptInTheExampleApps: in both example apps (web/app and
// web/react-app), Download receipt on /payment-done fetches the payment's
// signed receipt, verifies it in the browser against the BFF's published
// keys (the page says who signed it with which key, and shows the amount,
// the payee and the status it states) and saves it as
// payment-receipt-<key>.jws: the file Chromium saved verifies in Go
// (receipts.Verify) against the keys the BFF publishes, and a tampered
// copy of it does not. The same action in the recent payments table
// verifies too; a payment still in flight has no Download receipt, and a
// 409 (its outcome not known yet) reads as such.
func TestReceiptInTheExampleApps(t *testing.T) {
	for _, app := range exampleApps {
		t.Run(app.name, func(t *testing.T) {
			dist := app.build(t)
			pub := freeAddr(t)
			base := "http://" + pub
			e := browserEnv(t, pub, dist)
			tab := browsertest.Start(t)
			shots := browsertest.NewShots(t, shotsDir(app.name))
			downloads := t.TempDir()
			events := true
			browsertest.Do(t, tab, "letting chromium save downloads", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
				_, err := chromedp.CallBrowser(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
					Behavior: browser.SetDownloadBehaviorBehaviorAllow, DownloadPath: downloads, EventsEnabled: &events,
				})
				return err
			}))

			openAndSignIn(t, tab, base, browserUser, "#accounts")
			browsertest.Do(t, tab, "paying",
				chromedp.Navigate(base+"/pay"),
				chromedp.WaitVisible(chromedp.ID("pay-form")),
				typeInto("remittance", "Receipt test"),
				chromedp.Click(chromedp.CSS(`#pay-form button[type="submit"]`)),
				chromedp.WaitVisible(chromedp.ID("approve")),
				chromedp.Click(chromedp.ID("approve")),
				chromedp.WaitVisible(chromedp.CSS(`#payment-outcome [data-status="ACSC"]`)))
			loc := mustURL(t, browsertest.Get(t, tab, "location", chromedp.Location()))
			paymentID := loc.Query().Get("paymentId")
			if loc.Path != "/payment-done" || paymentID == "" {
				t.Fatalf("back from the bank at %s, want /payment-done?paymentId=…", loc)
			}

			// /payment-done: Download receipt, once the payment's record is in.
			browsertest.Do(t, tab, "downloading the receipt",
				chromedp.WaitVisible(chromedp.ID("receipt-download")),
				chromedp.Click(chromedp.ID("receipt-download")))
			key := browsertest.Get(t, tab, "the payment's key", chromedp.Evaluate[string](`document.getElementById("receipt-download").dataset.key`))
			if key == "" {
				t.Fatal("Download receipt names no payment key")
			}
			browsertest.Until(t, tab, "the receipt verified in the page",
				`document.querySelector("#receipt-result [data-receipt-verified]") !== null && document.getElementById("receipt-facts") !== null`)
			shots.Take(t, tab, "receipt-verified")
			pageKid := browsertest.Get(t, tab, "the verified key", chromedp.Evaluate[string](
				`document.querySelector("#receipt-result [data-receipt-verified]").dataset.receiptVerified`))
			facts := textOf(t, tab, "#receipt-facts")

			// The file Chromium saved, verified here as a support team would.
			saved := filepath.Join(downloads, "payment-receipt-"+key+".jws")
			eventually(t, browsertest.Step, func() error {
				if _, err := os.Stat(saved); err != nil {
					return fmt.Errorf("no %s yet: %v", filepath.Base(saved), err)
				}
				return nil
			})
			jws, err := os.ReadFile(saved)
			if err != nil {
				t.Fatal(err)
			}
			jwks := receiptKeys(t, base)
			d, kid, err := receipts.Verify(string(jws), jwks)
			if err != nil {
				t.Fatalf("the saved receipt does not verify: %v\n%s", err, jws)
			}
			if d.Key != key || d.PaymentID != paymentID || d.State != "done" || d.Amount == nil || d.Amount.Text != "12.50" ||
				d.Amount.Currency != "ILS" || d.Payee == nil || d.Payee.Name != "Dana Levi" || d.Payee.Account == "" {
				t.Fatalf("the saved receipt states %+v (amount %+v, payee %+v), want payment %s with key %s, 12.50 ILS to Dana Levi",
					d, d.Amount, d.Payee, paymentID, key)
			}
			if pageKid != kid {
				t.Errorf("the page verified the receipt with key %q, Go with %q", pageKid, kid)
			}
			if got, want := textOf(t, tab, "#receipt-result [data-receipt-verified] strong"), fmt.Sprintf("Verified receipt: signed by %s, key %s", d.Issuer, kid); got != want {
				t.Errorf("the page reads %q, want %q", got, want)
			}
			for _, want := range []string{"12.50", "Dana Levi", d.Payee.Account, "Sent to the bank", paymentID} {
				if !strings.Contains(facts, want) {
					t.Errorf("the receipt's facts on the page lack %q: %q", want, facts)
				}
			}
			parts := strings.Split(string(jws), ".")
			if len(parts) != 3 {
				t.Fatalf("the saved receipt is not a compact JWS: %s", jws)
			}
			payload := strings.Replace(string(mustB64(t, parts[1])), `"name":"Dana Levi"`, `"name":"Mallory"`, 1)
			forged := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." + parts[2]
			if _, _, err := receipts.Verify(forged, jwks); !errors.Is(err, receipts.ErrInvalid) {
				t.Errorf("a copy of the receipt with another payee: Verify answered %v, want %v", err, receipts.ErrInvalid)
			}

			// The recent payments table: the same action, verified too.
			row := fmt.Sprintf(`#recent-payments-table tr[data-key=%s]`, jsString(key))
			browsertest.Do(t, tab, "the payments",
				chromedp.Click(chromedp.CSS(`.links a[href="/payments"]`)),
				chromedp.WaitVisible(chromedp.CSS(row+" button.receipt-download")),
				chromedp.Click(chromedp.CSS(row+" button.receipt-download")))
			browsertest.Until(t, tab, "the receipt from the table verified",
				fmt.Sprintf(`document.querySelector('#recent-receipt [data-receipt-verified][data-key=%s]') !== null && document.getElementById("recent-receipt-facts") !== null`, jsString(key)))
			if f := textOf(t, tab, "#recent-receipt-facts"); !strings.Contains(f, "Dana Levi") || !strings.Contains(f, "12.50") {
				t.Errorf("the table's receipt facts read %q, want the amount and the payee", f)
			}

			// A payment still being sent: no Download receipt in its row, and
			// the BFF's 409 for its receipt reads "not known yet". The page
			// offers no button for it, so the app's request for the finished
			// payment's receipt is sent to the pending one's instead.
			const pending = "receipt-pending"
			e.sim.InjectFault(upstreamsim.Fault{Method: http.MethodPost, PathPrefix: "/v2/payments", UserID: browserUser, Times: 1, Delay: 20 * time.Second})
			// Made in another tab, which this one's navigation does not cut short;
			// a request claimed sends no event, so the payments are opened again.
			other := browsertest.Tab(t, tab)
			browsertest.Do(t, other, "a payment that stays in flight",
				chromedp.Navigate(base+"/payments"),
				chromedp.WaitVisible(chromedp.ID("recent-payments")),
				chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`void fetch("/api/v2/payments", {
  method: "POST", credentials: "include",
  headers: {"Content-Type": "application/json", "Idempotency-Key": %s, "X-CSRF": "1"},
  body: JSON.stringify({paymentInformation: {amount: "3.00", currency: "ILS", creditorName: "Dana Levi",
    creditorAccount: {iban: "IL620108000000099999999"}, remittanceInformation: "Pending"}, providerIds: ["demobank-sandbox"]}),
}).catch(() => {})`, jsString(pending))))
			pendingRow := fmt.Sprintf(`#recent-payments-table tr[data-key=%s]`, jsString(pending))
			eventually(t, browsertest.Step, func() error {
				browsertest.Do(t, tab, "the payments again", chromedp.Navigate(base+"/payments"), chromedp.WaitVisible(chromedp.CSS(row)))
				if countIn(t, tab, pendingRow+`[data-state="in_flight"]`) == 0 {
					return fmt.Errorf("the payment %s is not listed in flight", pending)
				}
				return nil
			})
			if n := countIn(t, tab, pendingRow+" button.receipt-download"); n != 0 {
				t.Errorf("a payment in flight offers Download receipt (%d buttons)", n)
			}
			redirect := redirectReceipts(t, tab, base+"/bff/payments/"+pending+"/receipt")
			browsertest.Do(t, tab, "asking for a receipt not known yet", chromedp.Click(chromedp.CSS(row+" button.receipt-download")))
			browsertest.Until(t, tab, "the page saying the outcome is not known yet", `document.querySelector("#recent-receipt [data-receipt-not-yet]") !== null`)
			redirect.stop(t)
			if got, want := textOf(t, tab, "#recent-receipt [data-receipt-not-yet]"), "This payment's outcome is not known yet, so there is no receipt for it. Try again once it is."; got != want {
				t.Errorf("a 409 reads %q, want %q", got, want)
			}
			shots.Take(t, tab, "receipt-not-yet")
		})
	}
}

// shotsDir is BFF_BROWSER_SHOTS/<name> when it is set, else "" (the test's
// temp dir): one directory per app, so one app's screenshots do not
// replace the other's.
func shotsDir(name string) string {
	if dir := os.Getenv("BFF_BROWSER_SHOTS"); dir != "" {
		return filepath.Join(dir, name)
	}
	return ""
}

// receiptKeys is the BFF's published JWK Set of receipt keys.
func receiptKeys(t *testing.T, base string) []byte {
	t.Helper()
	resp, err := http.Get(base + "/bff/receipts/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /bff/receipts/jwks.json: %d %s %v", resp.StatusCode, b, err)
	}
	return b
}

// receiptRedirect sends each receipt request of a tab to another receipt's
// address until stop.
type receiptRedirect struct {
	tab  context.Context
	done chan struct{}
	sent chan int
}

func redirectReceipts(t *testing.T, tab context.Context, to string) *receiptRedirect {
	t.Helper()
	r := &receiptRedirect{tab: tab, done: make(chan struct{}), sent: make(chan int, 1)}
	paused := make(chan fetch.RequestID, 16)
	if err := chromedp.Listen(tab, func(ev any) {
		if p, ok := ev.(*fetch.EventRequestPaused); ok {
			select {
			case paused <- p.RequestID:
			default:
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	browsertest.Do(t, tab, "redirecting receipt requests", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*/receipt"}}})
		return err
	}))
	// Continued from here, not from the listener: a command waits for its
	// answer, which the listener's goroutine would be the one to deliver.
	go func() {
		n := 0
		defer func() { r.sent <- n }()
		for {
			select {
			case id := <-paused:
				ctx, cancel := context.WithTimeout(tab, browsertest.Step)
				if _, err := chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: id, URL: to}); err == nil {
					n++
				}
				cancel()
			case <-r.done:
				return
			}
		}
	}()
	return r
}

// stop ends the redirection: at least one request must have been sent on.
func (r *receiptRedirect) stop(t *testing.T) {
	t.Helper()
	close(r.done)
	if n := <-r.sent; n == 0 {
		t.Fatal("no receipt request was redirected")
	}
	browsertest.Do(t, r.tab, "no more redirecting", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, fetch.Disable, cdp.Empty{})
		return err
	}))
}
