//go:build integration

package e2e

// The OP's step-up payment approval (e2e/oidcprovider/provider.mjs, its header
// comment): RFC 9396 payment_initiation details shown and granted on Approve,
// acr urn:bff:acr:mfa for a one-time code, access_denied on Cancel. The
// helpers drive it without a browser; the browser tests read the same page
// by its element ids.

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

const (
	opAcrPwd = "urn:bff:acr:pwd"
	opAcrMfa = "urn:bff:acr:mfa"
)

// opOpenInteraction follows user agent c from authURL (the OP's authorization
// endpoint with all parameters) to the OP's interaction page and returns the
// page's HTML and its form's action, resolved. Anything else fails t.
func opOpenInteraction(t *testing.T, c *http.Client, authURL string) (body, action string) {
	t.Helper()
	next := authURL
	for hop := 0; hop < 10; hop++ {
		p := opDo(t, c, http.MethodGet, next, nil)
		switch {
		case p.status >= 300 && p.status < 400 && p.loc != "" && opSameOrigin(p.loc, authURL):
			next = p.loc
		case p.status == http.StatusOK:
			m := opFormRE.FindStringSubmatch(p.body)
			if m == nil {
				t.Fatalf("opOpenInteraction: no form in the OP's page %s:\n%s", next, p.body)
			}
			u, err := opMustURL(t, next).Parse(html.UnescapeString(m[1]))
			if err != nil {
				t.Fatalf("opOpenInteraction: bad form action %q: %v", m[1], err)
			}
			return p.body, u.String()
		default:
			t.Fatalf("opOpenInteraction: %s answered %d %s, want the interaction page:\n%s", next, p.status, p.loc, p.body)
		}
	}
	t.Fatalf("opOpenInteraction: more than 10 hops at the OP starting from %s", authURL)
	return "", ""
}

// opSubmitInteraction posts form (login, otp, decision) to the interaction
// page's action and follows the OP's redirects. It returns the first redirect
// that leaves the OP (the redirect_uri with a code or an error, in loc), or
// the page the OP answered with instead (a 400 that shows the form again).
func opSubmitInteraction(t *testing.T, c *http.Client, action string, form url.Values) opPage {
	t.Helper()
	p := opDo(t, c, http.MethodPost, action, form)
	for hop := 0; hop < 10; hop++ {
		if p.status < 300 || p.status >= 400 || p.loc == "" || !opSameOrigin(p.loc, action) {
			return p
		}
		p = opDo(t, c, http.MethodGet, p.loc, nil)
	}
	t.Fatalf("opSubmitInteraction: more than 10 hops at the OP after posting to %s", action)
	return opPage{}
}

// opAuthRequest is one authorization request of client at op: its URL and
// the values the token exchange and the checks need.
type opAuthRequest struct {
	url, state, nonce, verifier string
}

// opS256 is PKCE's S256 code challenge of verifier (RFC 7636 4.2).
func opS256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func opNewAuthRequest(op *OP, client OPClient, extra url.Values) opAuthRequest {
	r := opAuthRequest{state: opRandom(16), nonce: opRandom(16), verifier: opRandom(32)}
	q := url.Values{
		"response_type":         {"code"},
		"client_id":             {client.ID},
		"redirect_uri":          {client.RedirectURIs[0]},
		"scope":                 {"openid"},
		"state":                 {r.state},
		"nonce":                 {r.nonce},
		"code_challenge":        {opS256(r.verifier)},
		"code_challenge_method": {"S256"},
	}
	for k, v := range extra {
		q[k] = v
	}
	r.url = op.AuthorizationEndpoint + "?" + q.Encode()
	return r
}

// opExchange redeems the code in callbackURL for r at op's token endpoint
// (client_secret_basic) and returns the JSON answer; anything but 200 fails t.
func opExchange(t *testing.T, op *OP, client OPClient, r opAuthRequest, callbackURL string) map[string]any {
	t.Helper()
	q := opMustURL(t, callbackURL).Query()
	if q.Get("state") != r.state || q.Get("code") == "" {
		t.Fatalf("callback %s: want a code and state %s", callbackURL, r.state)
	}
	form := url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {q.Get("code")},
		"redirect_uri":  {client.RedirectURIs[0]},
		"code_verifier": {r.verifier},
	}
	req, _ := http.NewRequest(http.MethodPost, op.TokenEndpoint, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(client.ID), url.QueryEscape(client.Secret))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("token: %v", err)
	}
	defer resp.Body.Close()
	var v map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("token: %d %v (%v), want 200", resp.StatusCode, v, err)
	}
	return v
}

func opIDToken(t *testing.T, tok map[string]any) map[string]any {
	t.Helper()
	s, _ := tok["id_token"].(string)
	claims, err := opJWTPayload(s)
	if err != nil {
		t.Fatalf("id_token: %v", err)
	}
	return claims
}

// opElementText is the text of the element with this id in page, unescaped,
// and whether there is one.
func opElementText(page, id string) (string, bool) {
	m := regexp.MustCompile(`<[a-z]+[^>]*\bid="` + regexp.QuoteMeta(id) + `"[^>]*>([^<]*)<`).FindStringSubmatch(page)
	if m == nil {
		return "", false
	}
	return html.UnescapeString(m[1]), true
}

func TestOPStepUpApproval(t *testing.T) {
	t.Parallel()
	client := OPClient{ID: "e2e-stepup", Secret: "e2e-stepup-secret-" + opRandom(8),
		RedirectURIs: []string{"http://127.0.0.1:9/cb"}} // never followed
	op := startOP(t, client)

	payment := map[string]any{
		"type":                              "payment_initiation",
		"instructedAmount":                  map[string]any{"currency": "EUR", "amount": "1000.00"},
		"creditorName":                      "Jane <Doe>",
		"creditorAccount":                   map[string]any{"iban": "FR7630006000011234567890189"},
		"remittanceInformationUnstructured": "Invoice 42",
	}
	stepUp := func(details ...map[string]any) opAuthRequest {
		b, _ := json.Marshal(details)
		return opNewAuthRequest(op, client, url.Values{
			"prompt": {"login"}, "max_age": {"0"}, "acr_values": {opAcrMfa}, "login_hint": {"alice"},
			"authorization_details": {string(b)},
		})
	}
	// wantDetails compares as JSON values, as the BFF reads them.
	wantDetails := func(t *testing.T, tok map[string]any, want ...map[string]any) {
		t.Helper()
		b, _ := json.Marshal(want)
		var w any
		_ = json.Unmarshal(b, &w)
		if !reflect.DeepEqual(tok["authorization_details"], w) {
			t.Fatalf("token response authorization_details %v, want %v", tok["authorization_details"], w)
		}
	}
	wantAcr := func(t *testing.T, idt map[string]any, acr string, amr ...any) {
		t.Helper()
		if idt["acr"] != acr || !reflect.DeepEqual(idt["amr"], amr) {
			t.Fatalf("id_token acr %v amr %v, want %s %v", idt["acr"], idt["amr"], acr, amr)
		}
	}

	t.Run("discovery lists the details type and the acr values", func(t *testing.T) {
		resp, err := http.Get(op.Issuer + "/.well-known/openid-configuration")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var d struct {
			Types []string `json:"authorization_details_types_supported"`
			Acrs  []string `json:"acr_values_supported"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(d.Types, []string{"payment_initiation", "payee_change"}) || !reflect.DeepEqual(d.Acrs, []string{opAcrPwd, opAcrMfa}) {
			t.Fatalf("discovery: authorization_details_types_supported %v, acr_values_supported %v", d.Types, d.Acrs)
		}
	})

	alice := opBrowser()
	t.Run("a normal login is urn:bff:acr:pwd with no details", func(t *testing.T) {
		r := opNewAuthRequest(op, client, nil)
		page, _ := opOpenInteraction(t, alice, r.url)
		if strings.Contains(page, `name="otp"`) || strings.Contains(page, "op-payment") || strings.Contains(page, "op-approve") {
			t.Fatalf("a normal login's page shows a one-time code or a payment:\n%s", page)
		}
		tok := opExchange(t, op, client, r, opLogin(t, alice, r.url, "alice"))
		idt := opIDToken(t, tok)
		wantAcr(t, idt, opAcrPwd, "pwd")
		if _, ok := tok["authorization_details"]; ok || idt["auth_time"] == nil || idt["nonce"] != r.nonce || idt["sub"] != "alice" {
			t.Fatalf("token response %v, id_token %v: want no authorization_details, auth_time, the nonce, sub alice", tok, idt)
		}
	})

	t.Run("approved with a one-time code: the details and urn:bff:acr:mfa", func(t *testing.T) {
		r := stepUp(payment)
		page, action := opOpenInteraction(t, alice, r.url)
		for id, want := range map[string]string{
			"op-payment-amount": "1000.00 EUR", "op-payment-payee": "Jane <Doe>",
			"op-payment-iban": "FR7630006000011234567890189", "op-payment-remittance": "Invoice 42",
		} {
			if got, ok := opElementText(page, id); !ok || got != want {
				t.Errorf("#%s: got %q (present %v), want %q", id, got, ok, want)
			}
		}
		if _, ok := opElementText(page, "op-payment-merchant"); ok {
			t.Errorf("#op-payment-merchant shown for a payment without merchantId")
		}
		for _, want := range []string{`id="op-login" name="login" value="alice"`, `name="otp"`,
			`id="op-approve" name="decision" value="approve"`, `id="op-cancel" name="decision" value="cancel"`} {
			if !strings.Contains(page, want) {
				t.Errorf("the page lacks %s", want)
			}
		}
		if t.Failed() {
			t.Fatalf("page:\n%s", page)
		}

		// A code that is not 6 digits shows the form again.
		p := opSubmitInteraction(t, alice, action, url.Values{"login": {"alice"}, "otp": {"12345"}, "decision": {"approve"}})
		if _, ok := opElementText(p.body, "op-otp-error"); p.status != http.StatusBadRequest || !ok {
			t.Fatalf("a 5-digit code: %d %s, want 400 and #op-otp-error:\n%s", p.status, p.loc, p.body)
		}

		before := time.Now().Unix()
		p = opSubmitInteraction(t, alice, action, url.Values{"login": {"alice"}, "otp": {"123456"}, "decision": {"approve"}})
		tok := opExchange(t, op, client, r, p.loc)
		wantDetails(t, tok, payment)
		idt := opIDToken(t, tok)
		wantAcr(t, idt, opAcrMfa, "pwd", "otp")
		if at, _ := idt["auth_time"].(float64); int64(at) < before || idt["nonce"] != r.nonce || idt["sub"] != "alice" {
			t.Fatalf("id_token %v: want auth_time >= %d (this login), nonce %s, sub alice", idt, before, r.nonce)
		}
	})

	t.Run("the wrong code 000000 completes at urn:bff:acr:pwd", func(t *testing.T) {
		r := stepUp(payment)
		_, action := opOpenInteraction(t, alice, r.url)
		p := opSubmitInteraction(t, alice, action, url.Values{"login": {"alice"}, "otp": {"000000"}, "decision": {"approve"}})
		tok := opExchange(t, op, client, r, p.loc)
		wantAcr(t, opIDToken(t, tok), opAcrPwd, "pwd")
		wantDetails(t, tok, payment)
	})

	t.Run("cancel is access_denied at the redirect_uri", func(t *testing.T) {
		r := stepUp(payment)
		_, action := opOpenInteraction(t, alice, r.url)
		p := opSubmitInteraction(t, alice, action, url.Values{"login": {"alice"}, "decision": {"cancel"}})
		q := opMustURL(t, p.loc).Query()
		if !strings.HasPrefix(p.loc, client.RedirectURIs[0]+"?") || q.Get("error") != "access_denied" || q.Get("code") != "" || q.Get("state") != r.state {
			t.Fatalf("cancel: %d %s, want the redirect_uri with error=access_denied and the state", p.status, p.loc)
		}
	})

	t.Run("a later request gets only its own details, a later login none", func(t *testing.T) {
		merchant := map[string]any{
			"type":             "payment_initiation",
			"instructedAmount": map[string]any{"currency": "EUR", "amount": "5.00"},
			"merchantId":       "m-42",
		}
		r := stepUp(merchant)
		page, action := opOpenInteraction(t, alice, r.url)
		if got, _ := opElementText(page, "op-payment-merchant"); got != "m-42" {
			t.Fatalf("#op-payment-merchant %q, want m-42:\n%s", got, page)
		}
		if _, ok := opElementText(page, "op-payment-iban"); ok {
			t.Fatalf("#op-payment-iban shown for a payment without creditorAccount:\n%s", page)
		}
		p := opSubmitInteraction(t, alice, action, url.Values{"login": {"alice"}, "otp": {"654321"}, "decision": {"approve"}})
		wantDetails(t, opExchange(t, op, client, r, p.loc), merchant)

		r = opNewAuthRequest(op, client, nil) // alice's OP session: no form
		tok := opExchange(t, op, client, r, opLogin(t, alice, r.url, "alice"))
		if _, ok := tok["authorization_details"]; ok {
			t.Fatalf("a login after approvals: token response %v, want no authorization_details", tok)
		}
	})

	t.Run("details of another shape are invalid_authorization_details", func(t *testing.T) {
		bad := map[string]string{
			"another type":      `[{"type":"account_information"}]`,
			"a numeric amount":  `[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":1000}}]`,
			"a zero amount":     `[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"0.00"}}]`,
			"no amount":         `[{"type":"payment_initiation","creditorName":"Jane Doe"}]`,
			"an unknown member": `[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"1.00"},"ultimateCreditor":"x"}]`,
			"a malformed IBAN":  `[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"1.00"},"creditorAccount":{"iban":"fr76 3000"}}]`,
		}
		for name, details := range bad {
			r := opNewAuthRequest(op, client, url.Values{"authorization_details": {details}})
			p := opDo(t, opBrowser(), http.MethodGet, r.url, nil)
			if q := opMustURL(t, p.loc).Query(); !strings.HasPrefix(p.loc, client.RedirectURIs[0]+"?") ||
				q.Get("error") != "invalid_authorization_details" || q.Get("state") != r.state {
				t.Errorf("%s: %d %s, want the redirect_uri with error=invalid_authorization_details", name, p.status, p.loc)
			}
		}
	})
}
