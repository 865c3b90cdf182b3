//go:build integration

package upstreamsim

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fintech-bff/bff/internal/testing/browsertest"
)

// journey opens link in a new tab of browser, clicks the button with the
// given id and returns the URL the browser lands on once it shows wantID.
func journey(t *testing.T, browser context.Context, link, button, wantID string) string {
	t.Helper()
	tab := browsertest.Tab(t, browser)
	// A CSP that blocks the redirect leaves the browser on the consent page,
	// which the failure names.
	browsertest.Do(t, tab, link+" then "+button+", waiting for #"+wantID,
		chromedp.Navigate(link),
		chromedp.WaitVisible(chromedp.ID(button)),
		chromedp.Click(chromedp.ID(button)),
		chromedp.WaitVisible(chromedp.ID(wantID)),
	)
	return browsertest.Get(t, tab, "reading the location", chromedp.Location())
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
	browser := browsertest.Start(t)
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
