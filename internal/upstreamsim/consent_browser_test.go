package upstreamsim

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// browserTimeout bounds each journey in the browser, and browserStart the
// browser's start; chromium starts in about a second here, pages load in
// milliseconds, so these only end a hung run.
const (
	browserTimeout = 30 * time.Second
	browserStart   = 60 * time.Second
)

// chromiumPath finds Debian's chromium. Without it the test fails: the
// consent pages are only proven by a real browser, which enforces their
// CSP (a form-action that misses the redirect origin blocks the 303).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "/usr/bin/chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium is needed for the consent page browser test: apt-get install -y chromium")
	return ""
}

// startBrowser starts one headless chromium for the whole test and returns
// its context; the browser ends with the test.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless,
		chromedp.NoSandbox, // the tests run as root, where chromium's sandbox cannot start
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelBrowser)
	within(t, browserStart, "starting chromium", func() error { return chromedp.Do(browser) })
	return browser
}

// within runs first, the first call on a new chromedp context, failing t
// if it errs or takes longer than d. That first call cannot take a timeout
// context: chromedp ties the browser's or tab's life to it.
func within(t *testing.T, d time.Duration, what string, first func() error) {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- first() }()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(d):
		t.Fatalf("%s: not done within %s", what, d)
	}
}

// journey opens link in a new tab of browser, clicks the button with the
// given id and returns the URL the browser lands on once it shows wantID.
func journey(t *testing.T, browser context.Context, link, button, wantID string) string {
	t.Helper()
	tab, closeTab := chromedp.NewContext(browser)
	defer closeTab()
	within(t, browserTimeout, "opening a tab", func() error { return chromedp.Do(tab) })
	ctx, cancel := context.WithTimeout(tab, browserTimeout)
	defer cancel()
	err := chromedp.Do(ctx,
		chromedp.Navigate(link),
		chromedp.WaitVisible(chromedp.ID(button)),
		chromedp.Click(chromedp.ID(button)),
		chromedp.WaitVisible(chromedp.ID(wantID)),
	)
	if err != nil {
		// A CSP that blocks the redirect leaves the browser on the consent page.
		lctx, cancelL := context.WithTimeout(tab, 5*time.Second)
		defer cancelL()
		at, _ := chromedp.Run(lctx, chromedp.Location())
		t.Fatalf("%s then %s, waiting for #%s: %v (the browser is at %s)", link, button, wantID, err, at)
	}
	landed, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatalf("reading the location: %v", err)
	}
	return landed
}

// TestConsentInBrowser drives the consent pages in headless chromium: the
// end-user opens payUrl or connectUrl, clicks, and the browser lands on the
// app's redirect url with the outcome, which the API then shows.
func TestConsentInBrowser(t *testing.T) {
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(`<!doctype html><title>app</title><p id="app">back in the app</p>`))
	}))
	t.Cleanup(app.Close)
	done := app.URL + "/done"
	h := newHarness(t, Options{AllowedRedirectURLs: []string{done}})
	browser := startBrowser(t)
	start := time.Now()

	payments := []struct{ button, want string }{
		{"approve", statusACSC},
		{"reject", statusRJCT},
		{"cancel", statusCANC},
	}
	for _, tt := range payments {
		t.Run("payment "+tt.button, func(t *testing.T) {
			h := h.on(t)
			tok := h.token("shopper")
			body := paymentBody("Order 9")
			body["redirectUrl"] = done
			id, link := h.createPayment(tok, body)
			landed := journey(t, browser, link, tt.button, "app")
			if want := done + "?paymentId=" + id + "&status=" + tt.want; landed != want {
				t.Errorf("landed on %s, want %s", landed, want)
			}
			h.wantStatus(tok, "/v2/payments/"+id, tt.want)
		})
	}

	t.Run("payment without redirect url", func(t *testing.T) {
		h := h.on(t)
		tok := h.token("shopper")
		body := paymentBody("Order 10")
		delete(body, "redirectUrl")
		id, link := h.createPayment(tok, body)
		landed := journey(t, browser, link, "approve", "close")
		if !strings.HasPrefix(landed, h.url+"/consent/payments/"+id+"?token=") {
			t.Errorf("landed on %s, want the consent page's outcome", landed)
		}
		h.wantStatus(tok, "/v2/payments/"+id, statusACSC)
	})

	t.Run("connection approve", func(t *testing.T) {
		h := h.on(t)
		tok := h.token("saver")
		id, link := h.createConnection(tok, map[string]any{"providerIds": []string{"leumi"}, "redirectUrl": done})
		landed := journey(t, browser, link, "approve", "app")
		if want := done + "?connectionId=" + id + "&status=" + connActive; landed != want {
			t.Errorf("landed on %s, want %s", landed, want)
		}
		got := h.wantStatus(tok, "/v2/connections/"+id, connActive)
		if n := connectionData(t, h, tok, id); n == 0 || got["lastFetchedAt"] == nil {
			t.Errorf("got %v with %d transactions, want fresh data", got, n)
		}
	})
	t.Logf("browser journeys took %s", time.Since(start).Round(time.Millisecond))
}

// on is h for a subtest: its failures are reported on t.
func (h *harness) on(t *testing.T) *harness {
	c := *h
	c.t = t
	return &c
}
