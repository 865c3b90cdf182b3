package upstreamsim

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// noFollow is a client that shows redirects instead of following them.
var noFollow = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// page GETs a consent page (an absolute URL).
func (h *harness) page(link string) reply {
	h.t.Helper()
	res, err := h.client(false).Get(link)
	if err != nil {
		h.t.Fatalf("GET %s: %v", link, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return reply{status: res.StatusCode, header: res.Header, body: b}
}

// decide submits a consent page's form, as the browser does: decision is
// approve, reject or cancel; token is the link's.
func (h *harness) decide(link, decision string) reply {
	h.t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		h.t.Fatal(err)
	}
	form := url.Values{"token": {u.Query().Get("token")}, "decision": {decision}}
	res, err := h.client(false).PostForm(link, form)
	if err != nil {
		h.t.Fatalf("POST %s: %v", link, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return reply{status: res.StatusCode, header: res.Header, body: b}
}

// createPayment creates a payment for the token's user and returns its id
// and payUrl.
func (h *harness) createPayment(tok string, body map[string]any) (id, payURL string) {
	h.t.Helper()
	r := h.do("POST", "/v2/payments", tok, body)
	if r.status != http.StatusCreated {
		h.t.Fatalf("create payment: got %d %s, want 201", r.status, r.body)
	}
	m := r.json(h.t)
	return m["id"].(string), m["payUrl"].(string)
}

// createConnection creates a connection for the token's user and returns
// its id and connectUrl.
func (h *harness) createConnection(tok string, body map[string]any) (id, connectURL string) {
	h.t.Helper()
	r := h.do("POST", "/v2/connections", tok, body)
	if r.status != http.StatusCreated {
		h.t.Fatalf("create connection: got %d %s, want 201", r.status, r.body)
	}
	m := r.json(h.t)
	return m["id"].(string), m["connectUrl"].(string)
}

// wantStatus checks the status of an API entity.
func (h *harness) wantStatus(tok, path, want string) map[string]any {
	h.t.Helper()
	r := h.do("GET", path, tok, nil)
	if r.status != http.StatusOK {
		h.t.Fatalf("GET %s: got %d %s, want 200", path, r.status, r.body)
	}
	m := r.json(h.t)
	if m["status"] != want {
		h.t.Errorf("GET %s: got status %v, want %s", path, m["status"], want)
	}
	return m
}

// wantPageHeaders checks the consent pages' security headers; formAction is
// the CSP form-action sources expected.
func wantPageHeaders(t *testing.T, r reply, formAction string) {
	t.Helper()
	csp := r.header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "style-src 'unsafe-inline'", "form-action " + formAction + ";", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("got CSP %q, want it to contain %q", csp, want)
		}
	}
	for k, want := range map[string]string{
		"X-Frame-Options": "DENY", "Cache-Control": "no-store", "Referrer-Policy": "no-referrer",
		"Content-Type": "text/html; charset=utf-8", "X-Content-Type-Options": "nosniff",
	} {
		if got := r.header.Get(k); got != want {
			t.Errorf("got %s %q, want %q", k, got, want)
		}
	}
}

func wantBody(t *testing.T, r reply, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(string(r.body), p) {
			t.Errorf("got page %s, want it to contain %q", r.body, p)
		}
	}
}

func TestPaymentConsent(t *testing.T) {
	tests := []struct {
		decision, want string
	}{
		{"approve", statusACSC},
		{"reject", statusRJCT},
		{"cancel", statusCANC},
	}
	for _, tt := range tests {
		t.Run(tt.decision, func(t *testing.T) {
			h := newHarness(t, Options{})
			tok := h.token("u")
			id, link := h.createPayment(tok, paymentBody("Order 7"))
			if !strings.HasPrefix(link, h.url+"/consent/payments/"+id+"?token=") {
				t.Fatalf("got payUrl %s, want the consent page on %s", link, h.url)
			}
			h.wantStatus(tok, "/v2/payments/"+id, statusInit) // the page changes no rule: a payment starts INIT

			r := h.page(link)
			if r.status != http.StatusOK {
				t.Fatalf("GET payUrl: got %d, want 200", r.status)
			}
			wantPageHeaders(t, r, "'self' https://app.example.com")
			wantBody(t, r, "12.50 EUR", "Jane", "FR7630006000011234567890189", "Order 7", "Demo Bank (sandbox)", `value="approve"`)

			r = h.decide(link, tt.decision)
			want := "https://app.example.com/payment-done?paymentId=" + id + "&status=" + tt.want
			if r.status != http.StatusSeeOther || r.header.Get("Location") != want {
				t.Fatalf("decide: got %d Location %q, want 303 to %s", r.status, r.header.Get("Location"), want)
			}
			h.wantStatus(tok, "/v2/payments/"+id, tt.want)
			list := h.do("GET", "/v2/payments?status="+tt.want, tok, nil)
			if list.status != http.StatusOK || !strings.Contains(string(list.body), id) {
				t.Errorf("list by status %s: got %d %s, want the payment", tt.want, list.status, list.body)
			}

			// A second submission shows the outcome and changes nothing.
			r = h.decide(link, "approve")
			if r.status != http.StatusSeeOther || r.header.Get("Location") != "/consent/payments/"+id+"?token="+url.QueryEscape(tokenOf(link)) {
				t.Fatalf("second decision: got %d Location %q, want 303 to the page", r.status, r.header.Get("Location"))
			}
			h.wantStatus(tok, "/v2/payments/"+id, tt.want)
			r = h.page(link)
			wantBody(t, r, `id="status">`+tt.want+"<", `href="https://app.example.com/payment-done?paymentId=`+id+`&amp;status=`+tt.want+`"`)
			if strings.Contains(string(r.body), "<form") {
				t.Errorf("decided page still has a form: %s", r.body)
			}
		})
	}
}

func tokenOf(link string) string {
	u, _ := url.Parse(link)
	return u.Query().Get("token")
}

func TestPaymentConsentWithoutRedirect(t *testing.T) {
	h := newHarness(t, Options{})
	tok := h.token("u")
	body := paymentBody("x")
	delete(body, "redirectUrl")
	id, link := h.createPayment(tok, body)
	if r := h.page(link); !strings.Contains(r.header.Get("Content-Security-Policy"), "form-action 'self';") {
		t.Errorf("got CSP %q, want form-action 'self' alone", r.header.Get("Content-Security-Policy"))
	}
	r := h.decide(link, "approve")
	if loc := r.header.Get("Location"); r.status != http.StatusSeeOther || !strings.HasPrefix(loc, "/consent/payments/"+id+"?token=") {
		t.Fatalf("got %d Location %q, want 303 to the page itself", r.status, loc)
	}
	wantBody(t, h.page(link), "You can close this window", "You approved this payment.")
	h.wantStatus(tok, "/v2/payments/"+id, statusACSC)
}

func TestPaymentConsentRefusesWrongLinks(t *testing.T) {
	h := newHarness(t, Options{})
	tok := h.token("u")
	id, link := h.createPayment(tok, paymentBody("x"))
	other, otherLink := h.createPayment(h.token("v"), paymentBody("y"))
	base := h.url + "/consent/payments/"
	tests := []struct{ name, link string }{
		{"no token", base + id},
		{"wrong token", base + id + "?token=AAAA"},
		{"another payment's token", base + id + "?token=" + tokenOf(otherLink)},
		{"unknown payment", base + "01ARZ3NDEKTSV4RRFFQ69G5FAV?token=" + tokenOf(link)},
		{"the payment's token on a connection page", h.url + "/consent/connections/" + id + "?token=" + tokenOf(link)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := h.page(tt.link); r.status != http.StatusNotFound || !strings.Contains(string(r.body), "not valid") {
				t.Errorf("GET: got %d %s, want 404 page", r.status, r.body)
			}
			if r := h.decide(tt.link, "reject"); r.status != http.StatusNotFound {
				t.Errorf("POST: got %d, want 404", r.status)
			}
		})
	}
	h.wantStatus(tok, "/v2/payments/"+id, statusInit)
	h.wantStatus(h.token("v"), "/v2/payments/"+other, statusInit)

	if r := h.decide(link, "explode"); r.status != http.StatusBadRequest {
		t.Errorf("unknown decision: got %d, want 400", r.status)
	}
	wantError(t, h.page(h.url+"/consent/elsewhere"), http.StatusNotFound, typeClientError, "")
	h.wantStatus(tok, "/v2/payments/"+id, statusInit)
}

func TestPaymentConsentEscapesWhatItShows(t *testing.T) {
	h := newHarness(t, Options{})
	tok := h.token("u")
	body := paymentBody(`<script>alert("ref")</script>`)
	body["paymentInformation"].(map[string]any)["creditorName"] = `<b>Jane</b>`
	_, link := h.createPayment(tok, body)
	r := h.page(link)
	if strings.Contains(string(r.body), "<script>") || strings.Contains(string(r.body), "<b>") {
		t.Fatalf("got unescaped input in %s", r.body)
	}
	wantBody(t, r, "&lt;b&gt;Jane&lt;/b&gt;", "&lt;script&gt;")
}

func TestConsentLinksUsePublicURL(t *testing.T) {
	h := newHarness(t, Options{PublicURL: "https://sim.example.test/"})
	tok := h.token("u")
	id, link := h.createPayment(tok, paymentBody("x"))
	if !strings.HasPrefix(link, "https://sim.example.test/consent/payments/"+id+"?token=") {
		t.Errorf("got payUrl %s, want it under the public URL", link)
	}
	if got := h.do("GET", "/v2/payments/"+id, tok, nil).json(t)["payUrl"]; got != link {
		t.Errorf("GET payment: got payUrl %v, want %s", got, link)
	}
	_, conn := h.createConnection(tok, map[string]any{"providerIds": []string{ProviderSandbox}})
	if !strings.HasPrefix(conn, "https://sim.example.test/consent/connections/") {
		t.Errorf("got connectUrl %s, want it under the public URL", conn)
	}
	for _, bad := range []string{"localhost:8081", "ftp://x", "http://x/?q=1", "http://"} {
		if err := (Options{PublicURL: bad}).Validate(); err == nil {
			t.Errorf("Validate PublicURL %q: got nil, want an error", bad)
		}
	}
}

func TestOpenBankingInitAuthorizationURL(t *testing.T) {
	h := newHarness(t, Options{})
	tok := h.token("u")
	body := paymentBody("x")
	delete(body, "providerIds")
	body["includeFakeProviders"] = true
	id, link := h.createPayment(tok, body)
	r := h.do("POST", "/v2/pay/open-banking-init", tok, map[string]any{"providerId": "testbank-sandbox", "paymentId": id})
	if r.status != http.StatusOK {
		t.Fatalf("init: got %d %s", r.status, r.body)
	}
	m := r.json(t)
	if m["authorizationUrl"] != link || m["status"] != statusPending {
		t.Fatalf("got %v, want PENDING with authorizationUrl %s", m, link)
	}
	wantBody(t, h.page(link), "Test Bank (sandbox)", `value="reject"`)
	h.decide(link, "reject")
	if got := h.wantStatus(tok, "/v2/payments/"+id, statusRJCT); got["providerId"] != "testbank-sandbox" {
		t.Errorf("got providerId %v, want testbank-sandbox", got["providerId"])
	}
	h.sim.Advance(2 * settleAfter) // a decided payment does not settle
	h.wantStatus(tok, "/v2/payments/"+id, statusRJCT)
}

func TestConsentPagesAreNotAPICalls(t *testing.T) {
	h := newHarness(t, Options{})
	tok := h.token("u")
	_, link := h.createPayment(tok, paymentBody("x"))
	h.sim.ClearRequests()
	h.sim.InjectFault(Fault{Status: 500})
	if r := h.page(link); r.status != http.StatusOK {
		t.Errorf("with a fault on every path: got %d, want the page", r.status)
	}
	if n := len(h.sim.Requests()); n != 0 {
		t.Errorf("got %d recorded requests, want the page not recorded", n)
	}
}

func TestConnectionConsent(t *testing.T) {
	tests := []struct {
		decision, want, errCode string
	}{
		{"approve", connActive, ""},
		{"reject", connRevoked, "CONSENT_REJECTED"},
		{"cancel", connInactive, "CONSENT_CANCELLED"},
	}
	for _, tt := range tests {
		t.Run(tt.decision, func(t *testing.T) {
			h := newHarness(t, Options{})
			tok := h.token("u")
			id, link := h.createConnection(tok, map[string]any{"providerIds": []string{"n26-de"}, "redirectUrl": "http://localhost:8080/payment-done"})
			before := h.wantStatus(tok, "/v2/connections/"+id, connPending)
			if before["lastFetchedAt"] != nil || connectionData(t, h, tok, id) != 0 {
				t.Fatalf("before consent: got %v with data, want no data", before)
			}
			r := h.page(link)
			wantPageHeaders(t, r, "'self' http://localhost:8080")
			wantBody(t, r, "N26", "Connect your bank account", "Your accounts, balances and transactions")

			h.sim.Advance(10 * time.Minute) // so "fetched now" is not "created then"
			r = h.decide(link, tt.decision)
			want := "http://localhost:8080/payment-done?connectionId=" + id + "&status=" + tt.want
			if r.status != http.StatusSeeOther || r.header.Get("Location") != want {
				t.Fatalf("decide: got %d Location %q, want 303 to %s", r.status, r.header.Get("Location"), want)
			}
			got := h.wantStatus(tok, "/v2/connections/"+id, tt.want)
			n := connectionData(t, h, tok, id)
			switch tt.want {
			case connActive:
				if n == 0 || got["lastFetchedAt"] != h.sim.Now().Format(time.RFC3339) || got["error"] != nil {
					t.Errorf("got %v with %d transactions, want fresh data fetched now (%s)", got, n, h.sim.Now().Format(time.RFC3339))
				}
			default:
				e, _ := got["error"].(map[string]any)
				if n != 0 || e["code"] != tt.errCode {
					t.Errorf("got %v with %d transactions, want no data and error %s", got, n, tt.errCode)
				}
			}
			if r := h.decide(link, "approve"); r.status != http.StatusSeeOther || strings.HasPrefix(r.header.Get("Location"), "http") {
				t.Errorf("second decision: got %d Location %q, want 303 to the page", r.status, r.header.Get("Location"))
			}
			h.wantStatus(tok, "/v2/connections/"+id, tt.want)
			wantBody(t, h.page(link), `id="status">`+tt.want+"<", `id="return"`)
		})
	}
}

// connectionData is the number of transactions of the connection, and
// checks its accounts agree: none without transactions, one with.
func connectionData(t *testing.T, h *harness, tok, id string) int {
	t.Helper()
	accounts := h.do("GET", "/v2/data/accounts?connectionId="+id, tok, nil).json(t)["items"].([]any)
	txs := h.do("GET", "/v2/data/transactions?limit=500&connectionId="+id, tok, nil).json(t)["items"].([]any)
	if (len(accounts) == 0) != (len(txs) == 0) {
		t.Errorf("got %d accounts and %d transactions, want both or neither", len(accounts), len(txs))
	}
	return len(txs)
}

// FuzzConsentForm posts arbitrary tokens and decisions to a payment's
// consent page: the answer is 303, 400 or 404, never a panic or a 5xx, and
// only the payment's own token moves it.
func FuzzConsentForm(f *testing.F) {
	sim := New(Options{Now: fixedClock()})
	tok := sim.tokens.mint(claims{Sub: "u", Kind: kindClient}, sim.Now(), time.Hour)
	req := httptest.NewRequest("POST", "/v2/payments", strings.NewReader(`{"paymentInformation":{"amount":1,"currency":"EUR",`+
		`"creditorAccount":{"iban":"FR7630006000011234567890189"}},"providerIds":["demobank-sandbox"]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	rec := httptest.NewRecorder()
	sim.ServeHTTP(rec, req)
	var created struct{ ID, PayURL string }
	if err := json.Unmarshal(rec.Body.Bytes(), &created); err != nil || rec.Code != http.StatusCreated {
		f.Fatalf("create: got %d %s", rec.Code, rec.Body)
	}
	good := tokenOf(created.PayURL)
	f.Add(good, "approve")
	f.Add("", "reject")
	f.Add(good+"x", "cancel")
	f.Add(good, "")
	f.Fuzz(func(t *testing.T, token, decision string) {
		if err := sim.SetPaymentStatus("u", created.ID, statusInit); err != nil {
			t.Fatal(err)
		}
		form := url.Values{"token": {token}, "decision": {decision}}.Encode()
		req := httptest.NewRequest("POST", "/consent/payments/"+created.ID, strings.NewReader(form))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		sim.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusSeeOther, http.StatusBadRequest, http.StatusNotFound:
		default:
			t.Fatalf("got %d for token %q decision %q, want 303, 400 or 404", rec.Code, token, decision)
		}
		u, p := sim.lockPayment(created.ID)
		status := p.Status
		u.mu.Unlock()
		if status != statusInit && token != good {
			t.Fatalf("token %q moved the payment to %s", token, status)
		}
	})
}
