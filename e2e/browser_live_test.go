//go:build integration

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"

	"github.com/fintech-bff/bff/internal/testing/browsertest"
	"github.com/fintech-bff/bff/internal/upstreamsim"
)

// liveWatchInterval is how often the BFF asks the upstream for the status
// of a payment not yet final (payments.watch_interval), short here so that
// a change reaches the page in well under liveWithin.
const liveWatchInterval = "200ms"

// liveWithin bounds how long a status change the simulator makes may take
// to show on the page: a few watch intervals, the event's way through the
// BFF, and the page's poll (browsertest.Until).
const liveWithin = 5 * time.Second

// TestBrowserSeesPaymentStatusLive: a payment's status, moved at the bank
// (the simulator) after the user is back in the app, shows on the page
// without a reload or a navigation: the BFF notices the change
// (payments.watch_interval), sends it on GET /bff/events, and the app's
// events() stream moves the payment's row in the recent payments and the
// outcome of /payment-done (docs/payments.md, "Following a payment's status").
//
// The payment is not approved at the bank's page: approving makes it ACSC,
// final, after which the BFF stops following it. The user comes back to
// /payment-done as the bank's redirect would bring them, with the payment
// still INIT, and the simulator then moves it to ACTC, then ACSC.
//
// Run against both reply profiles of the simulator: the full one, and the
// one that sends only what the API documents (no updatedAt on a payment).
func TestBrowserSeesPaymentStatusLive(t *testing.T) {
	dist := buildApp(t)
	for _, profile := range []string{upstreamsim.ProfileFull, upstreamsim.ProfileDocumented} {
		t.Run("profile="+profile, func(t *testing.T) { browserSeesPaymentStatusLive(t, dist, profile) })
	}
}

func browserSeesPaymentStatusLive(t *testing.T, dist, profile string) {
	pub := freeAddr(t)
	base := "http://" + pub
	e := liveEnv(t, pub, dist, profile)
	tab := browsertest.Start(t)
	shots := browsertest.NewShots(t, os.Getenv("BFF_BROWSER_SHOTS"))

	openAndSignIn(t, tab, base, browserUser, "#accounts-table")

	paymentID := payToTheBank(t, tab, e, "Live status")

	// The page's stream is held before it reaches the BFF: a change made
	// while it opens is in no event (a stream starts from now), so the page
	// must read again when it opens (a loaded machine met this).
	streams := holdStreams(t, tab)
	browsertest.Do(t, tab, "back in the app without deciding at the bank",
		chromedp.Navigate(base+"/payment-done?paymentId="+paymentID),
		chromedp.WaitVisible(chromedp.CSS(`#payment-outcome [data-status]`)))
	row := fmt.Sprintf(`document.querySelector('#recent-payments-table tr[data-payment-id=%s]')`, jsString(paymentID))
	browsertest.Until(t, tab, "the payment among the recent ones", row+" !== null")
	if st := textOf(t, tab, "#payment-outcome [data-status]"); strings.Contains(st, "accepted") || strings.Contains(st, "not made") {
		t.Fatalf("before any decision the outcome reads %q, want the payment still in progress", st)
	}
	shots.Take(t, tab, "live-before")
	// A navigation or a reload would lose this mark: it proves the page
	// changed in place.
	browsertest.Do(t, tab, "marking the page", chromedp.Evaluate[chromedp.Void](`window.__sameDocument = true`))

	streams.storedWhileHeld(t, e, paymentID, "ACTC")
	browsertest.Until(t, tab, "the page showing ACTC, made before its stream opened",
		fmt.Sprintf(`%[1]s !== null && %[1]s.dataset.paymentStatus === "ACTC" && document.querySelector('#payment-outcome [data-status="ACTC"]') !== null`, row))

	for _, status := range []string{"ACSC"} {
		moved := time.Now()
		simPaymentStatus(t, e, paymentID, status)
		browsertest.Until(t, tab, "the page showing "+status,
			fmt.Sprintf(`%[1]s !== null && %[1]s.dataset.paymentStatus === %[2]s && document.querySelector('#payment-outcome [data-status=%[2]s]') !== null`,
				row, jsString(status)))
		if took := time.Since(moved); took > liveWithin {
			t.Errorf("%s took %s to show, want within %s", status, took.Round(time.Millisecond), liveWithin)
		}
		if !browsertest.Get(t, tab, "checking the mark", chromedp.Evaluate[bool](`window.__sameDocument === true`)) {
			t.Fatalf("the page was loaded again to show %s, want it changed in place", status)
		}
		shots.Take(t, tab, "live-"+strings.ToLower(status))
	}
	if got, want := textOf(t, tab, "#payment-outcome [data-status] strong"), "Payment accepted: Paid"; got != want {
		t.Errorf("the outcome reads %q, want %q", got, want)
	}
	if loc := browsertest.Get(t, tab, "location", chromedp.Location()); loc != base+"/payment-done?paymentId="+paymentID {
		t.Errorf("the browser is at %s, want still on /payment-done", loc)
	}
}

// heldStreams holds every request of the tab for GET /bff/events until
// release: the page's stream opens late, as on a loaded machine.
type heldStreams struct {
	tab    context.Context
	paused chan fetch.RequestID
}

func holdStreams(t *testing.T, tab context.Context) *heldStreams {
	t.Helper()
	h := &heldStreams{tab: tab, paused: make(chan fetch.RequestID, 16)}
	if err := chromedp.Listen(tab, func(ev any) {
		if p, ok := ev.(*fetch.EventRequestPaused); ok {
			select {
			case h.paused <- p.RequestID:
			default: // more than 16 openings held: the page is looping, and the test fails on its own
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	browsertest.Do(t, tab, "holding the event streams", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*/bff/events*"}}})
		return err
	}))
	return h
}

// storedWhileHeld moves the payment to status at the bank and waits until
// the BFF has stored it, while the page's event streams are held, then
// releases them: a change the page can learn only by reading again when
// its stream opens.
func (h *heldStreams) storedWhileHeld(t *testing.T, e *env, paymentID, status string) {
	t.Helper()
	simPaymentStatus(t, e, paymentID, status)
	listed := fmt.Sprintf(`fetch("/bff/payments", {credentials: "include"}).then((r) => r.json()).then((r) => JSON.stringify(r).includes(%s))`,
		jsString(`"paymentStatus":"`+status+`"`))
	eventually(t, browsertest.Step, func() error {
		if !browsertest.Get(t, h.tab, "listing the payments", chromedp.Evaluate[bool](listed, chromedp.EvalAwaitPromise)) {
			return fmt.Errorf("the BFF has not stored %s while the page's stream is held", status)
		}
		return nil
	})
	h.release(t)
}

// release lets the held openings go (at least one must have been held)
// and holds no more.
func (h *heldStreams) release(t *testing.T) {
	t.Helper()
	var held []fetch.RequestID
	select {
	case id := <-h.paused:
		held = append(held, id)
	case <-time.After(browsertest.Step):
		t.Fatal("the page opened no event stream")
	}
	for more := true; more; {
		select {
		case id := <-h.paused:
			held = append(held, id)
		default:
			more = false
		}
	}
	browsertest.Do(t, h.tab, "releasing the event streams", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		for _, id := range held {
			if _, err := chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: id}); err != nil {
				return err
			}
		}
		_, err := chromedp.Call(ctx, fetch.Disable, cdp.Empty{})
		return err
	}))
}

// liveEnv is browserEnv with the simulator's control API on (for its
// POST /_sim/payments/{paymentId}/status), replying with profile
// (upstreamsim.ProfileFull or ProfileDocumented), and the BFF following
// payments every liveWatchInterval (payments.watch_interval).
func liveEnv(t *testing.T, pub, dist, profile string) *env {
	t.Helper()
	base := "http://" + pub
	e, _ := oidcEnvWith(t, options{
		publicAddr:   pub,
		secureCookie: true,
		sim: upstreamsim.Options{
			AllowedRedirectURLs: []string{base + "/payment-done", base + "/connection-done"},
			Control:             true,
			ReplyProfile:        profile,
		},
		limitsYAML: "limits: { requests_per_second: 0, auth_per_minute: 0, refresh_interval: 15m, sessions_per_user: 0 }",
		extraYAML:  fmt.Sprintf("static_dir: %q\npayments:\n  watch_interval: %s", dist, liveWatchInterval),
	})
	return e
}

// simPaymentStatus moves a payment's status at the simulator, as the bank
// would, through its control API, a second after the last: a status is
// stored only when it is newer than the stored one (docs/payments.md) and
// the upstream stamps updatedAt to the second, so a change made within the
// second of the payment's creation would never show.
func simPaymentStatus(t *testing.T, e *env, paymentID, status string) {
	t.Helper()
	e.sim.Advance(time.Second)
	resp, err := http.Post(e.simURL+"/_sim/payments/"+paymentID+"/status", "application/json",
		strings.NewReader(fmt.Sprintf(`{"status":%q}`, status)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("POST /_sim/payments/%s/status %s: got %d, want 204", paymentID, status, resp.StatusCode)
	}
}

// payToTheBank pays from the app's pay page with the given reference and
// waits for the bank's consent page; it returns the payment's id and
// checks the simulator made that payment.
func payToTheBank(t *testing.T, tab context.Context, e *env, remittance string) string {
	t.Helper()
	browsertest.Do(t, tab, "paying",
		chromedp.Click(chromedp.CSS(`#nav a[href="/pay"]`)),
		chromedp.WaitVisible(chromedp.ID("pay-form")),
		typeInto("remittance", remittance),
		chromedp.Click(chromedp.CSS(`#pay-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("approve")))
	// The bank's consent page is <simulator>/consent/payments/{paymentId}?token=….
	bank := mustURL(t, browsertest.Get(t, tab, "location", chromedp.Location()))
	paymentID, ok := strings.CutPrefix(bank.Path, "/consent/payments/")
	if !ok || paymentID == "" || strings.Contains(paymentID, "/") {
		t.Fatalf("the bank's page is at %s, want /consent/payments/{paymentId}", bank)
	}
	if got, _ := e.sim.PaymentRemittance(browserUser, paymentID); got != remittance {
		t.Fatalf("the simulator's payment %s has remittance %q, want the one just made", paymentID, got)
	}
	return paymentID
}
