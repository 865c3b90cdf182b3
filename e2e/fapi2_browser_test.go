//go:build integration

package e2e

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/fintech-bff/bff/internal/testing/browsertest"
)

// TestFAPI2InTheBrowser: with the fapi2 profile, the example app signs in
// and a held payment is approved at the provider in Chromium, and every
// URL the browser requests (each navigation, each redirect hop, each
// fetch) is read: the authorization requests carry client_id and
// request_uri only, and the payment's amount, IBAN and reference appear
// in none of them.
func TestFAPI2InTheBrowser(t *testing.T) {
	dist := buildApp(t)
	pub := freeAddr(t)
	base := "http://" + pub
	e, op, _ := fapi2Env(t, appStepUpOptions(pub, dist))
	tab := browsertest.Start(t)
	var (
		mu   sync.Mutex
		seen []string
	)
	if err := chromedp.Listen(tab, func(ev any) {
		if r, ok := ev.(*network.EventRequestWillBeSent); ok {
			mu.Lock()
			seen = append(seen, r.Request.URL)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	browsertest.Do(t, tab, "reading every request", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, network.Enable, network.EnableParams{})
		return err
	}))

	openAndSignIn(t, tab, base, browserUser, "#nav")

	browsertest.Do(t, tab, "paying",
		chromedp.Navigate(base+"/pay"),
		chromedp.WaitVisible(chromedp.ID("pay-form")),
		setInput("amount", "987.65"),
		typeInto("remittance", "Rent Flat 7"),
		chromedp.Click(chromedp.CSS(`#pay-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("step-up")),
		chromedp.Click(chromedp.ID("step-up-approve")),
		chromedp.WaitVisible(chromedp.ID("op-approve")))
	if amount := browsertest.Get(t, tab, "the provider's amount", chromedp.TextContent(chromedp.ID("op-payment-amount"))); amount != "987.65 ILS" {
		t.Fatalf("the provider shows %q, want the pushed payment's 987.65 ILS", amount)
	}
	approveAtTheProvider(t, tab, e)

	mu.Lock()
	defer mu.Unlock()
	authorizations := 0
	for _, raw := range seen {
		for _, secret := range []string{"987.65", "98765", "IL620108000000099999999", "Rent Flat 7", "Rent+Flat", "Rent%20Flat"} {
			if strings.Contains(raw, secret) {
				t.Errorf("the browser requested %s, which carries the payment's %q", raw, secret)
			}
		}
		u, err := url.Parse(raw)
		if err != nil || u.Scheme+"://"+u.Host+u.Path != op.AuthorizationEndpoint {
			continue
		}
		authorizations++
		if q := u.Query(); len(q) != 2 || q.Get("client_id") == "" || q.Get("request_uri") == "" {
			t.Errorf("an authorization request in the browser carries more than client_id and request_uri: %s", raw)
		}
	}
	if authorizations != 2 {
		t.Errorf("the browser made %d authorization requests, want 2 (the login and the approval); every URL:\n%s", authorizations, strings.Join(seen, "\n"))
	}
}
