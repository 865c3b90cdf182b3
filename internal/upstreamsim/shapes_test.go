package upstreamsim

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
)

var (
	dateRe      = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)
	timestampRe = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$`)
	ulidRe      = regexp.MustCompile(`^[0-7][0-9A-HJKMNP-TV-Z]{25}$`)
	codeRe      = regexp.MustCompile(`^[A-Z][A-Z_]*$`)
	skRe        = regexp.MustCompile(`^TRANSACTION#(CARD|BANK)#.+#([0-7][0-9A-HJKMNP-TV-Z]{25})$`)
)

// Field kinds checkFields knows.
const (
	kString    = "string"
	kNumber    = "number"
	kDate      = "date"      // calendar date 2026-01-12
	kTimestamp = "timestamp" // RFC 3339 UTC, whole seconds
	kULID      = "ulid"
	kCode      = "code" // upper-case code
	kArray     = "array"
	kObject    = "object"
	kNull      = "null"
	kHebrew    = "hebrew" // a string with Hebrew letters
)

// checkFields asserts that obj has every key of want, each of one of the
// kinds listed ("date|null" allows either).
func checkFields(t *testing.T, what string, obj map[string]any, want map[string]string) {
	t.Helper()
	for key, kinds := range want {
		v, ok := obj[key]
		if !ok {
			t.Errorf("%s: got no %q key in %v, want one", what, key, obj)
			continue
		}
		if !isKind(v, strings.Split(kinds, "|")) {
			t.Errorf("%s: got %q = %#v, want %s", what, key, v, kinds)
		}
	}
}

func isKind(v any, kinds []string) bool {
	for _, k := range kinds {
		s, isStr := v.(string)
		var ok bool
		switch k {
		case kString:
			ok = isStr
		case kNumber:
			_, ok = v.(float64)
		case kDate:
			ok = isStr && dateRe.MatchString(s)
		case kTimestamp:
			ok = isStr && timestampRe.MatchString(s)
		case kULID:
			ok = isStr && ulidRe.MatchString(s)
		case kCode:
			ok = isStr && codeRe.MatchString(s)
		case kArray:
			_, ok = v.([]any)
		case kObject:
			_, ok = v.(map[string]any)
		case kNull:
			ok = v == nil
		case kHebrew:
			ok = isStr && hasHebrew(s)
		case `""`:
			ok = isStr && s == ""
		}
		if ok {
			return true
		}
	}
	return false
}

func hasHebrew(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return unicode.Is(unicode.Hebrew, r) })
}

// items decodes a {items, nextPage, count} reply.
func items(t *testing.T, r reply) []map[string]any {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("got %d %s, want 200", r.status, r.body)
	}
	var out []map[string]any
	for _, it := range r.json(t)["items"].([]any) {
		out = append(out, it.(map[string]any))
	}
	return out
}

// bareArray decodes a reply that must be a bare JSON array of objects.
func bareArray(t *testing.T, r reply) []map[string]any {
	t.Helper()
	var out []map[string]any
	if err := jsonUnmarshal(r.body, &out); err != nil {
		t.Fatalf("got %.200s, want a bare array of objects: %v", r.body, err)
	}
	return out
}

func TestConnectionShape(t *testing.T) {
	h := newHarness(t, Options{})
	tok := h.token("u")
	conns := items(t, h.do("GET", "/v2/connections", tok, nil))
	if len(conns) != 2 {
		t.Fatalf("got %d connections, want 2", len(conns))
	}
	byStatus := map[string]map[string]any{}
	for _, c := range conns {
		checkFields(t, "connection", c, map[string]string{
			"id": kULID, "userId": kString, "providerId": kCode, "providerIds": kArray, "mode": kString, "status": kCode,
			"startDate": kDate, "expiryDate": kDate, "lastFetchedDataDate": kDate + "|" + kNull,
			"lastFetchedAt": kTimestamp + "|" + kNull, "createdAt": kTimestamp, "updatedAt": kTimestamp,
			"accounts": kNumber, "cards": kNumber, "savings": kNumber, "loans": kNumber, "securities": kNumber,
			"transactions": kNumber, "error": kObject + "|" + kNull,
		})
		byStatus[c["status"].(string)] = c
	}
	tests := []struct {
		status, providerID, providerIDs string
		counts                          [6]float64 // accounts, cards, savings, loans, securities, transactions
		errCode                         string
	}{
		{"ACTIVE", "HAPOALIM", "hapoalim", [6]float64{1, 1, 0, 1, 0, 1020}, ""},
		{"EXPIRED", "LEUMI", "leumi", [6]float64{0, 0, 1, 0, 1, 180}, "CONSENT_EXPIRED"},
	}
	for _, tt := range tests {
		t.Run(tt.status, func(t *testing.T) {
			c := byStatus[tt.status]
			if c["providerId"] != tt.providerID || c["providerIds"].([]any)[0] != tt.providerIDs || c["mode"] != "REAL" {
				t.Errorf("got providerId %v, providerIds %v, mode %v; want %s, [%s], REAL", c["providerId"], c["providerIds"], c["mode"], tt.providerID, tt.providerIDs)
			}
			for i, k := range []string{"accounts", "cards", "savings", "loans", "securities", "transactions"} {
				if c[k] != tt.counts[i] {
					t.Errorf("got %s %v, want %v", k, c[k], tt.counts[i])
				}
			}
			switch e := c["error"].(type) {
			case nil:
				if tt.errCode != "" {
					t.Errorf("got error null, want %s", tt.errCode)
				}
			case map[string]any:
				if e["code"] != tt.errCode || e["message"] == "" {
					t.Errorf("got error %v, want code %s and a message", e, tt.errCode)
				}
			}
		})
	}
	t.Run("created connection", func(t *testing.T) {
		r := h.do("POST", "/v2/connections", tok, map[string]any{"providerIds": []string{ProviderSandbox}})
		id := r.json(t)["id"].(string)
		c := h.do("GET", "/v2/connections/"+id, tok, nil).json(t)
		if c["mode"] != "SANDBOX" || c["providerId"] != "DEMOBANK_SANDBOX" || c["startDate"] != "2026-03-10" || c["createdAt"] != "2026-03-10T12:00:00Z" {
			t.Errorf("got %v, want mode SANDBOX, providerId DEMOBANK_SANDBOX, startDate 2026-03-10, createdAt 2026-03-10T12:00:00Z", c)
		}
		if v, ok := c["error"]; !ok || v != nil {
			t.Errorf("got error %v (present %v), want present and null", v, ok)
		}
		if c["status"] != "PENDING" || c["accounts"] != 0.0 || c["transactions"] != 0.0 {
			t.Errorf("got status %v, accounts %v, transactions %v; want PENDING with no data until the end-user consents", c["status"], c["accounts"], c["transactions"])
		}
	})
}

func TestTransactionShape(t *testing.T) {
	h := newHarness(t, Options{})
	tok := h.token("u")
	txs := items(t, h.do("GET", "/v2/data/transactions?limit=500", tok, nil))
	var emptyCharged, foreign, hebrew, latin int
	for _, tx := range txs {
		checkFields(t, "transaction", tx, map[string]string{
			"id": kULID, "SK": kString, "accountId": kULID, "type": kString, "merchantName": kString,
			"description": kObject, "amount": kObject, "category": kObject, "date": kObject,
		})
		if tx["type"] != "CARD" && tx["type"] != "BANK" {
			t.Errorf("got type %v, want CARD or BANK", tx["type"])
		}
		m := skRe.FindStringSubmatch(tx["SK"].(string))
		if m == nil || m[1] != tx["type"] || m[2] != tx["id"] {
			t.Errorf("got SK %v for %v %v, want TRANSACTION#<type>#...#<id>", tx["SK"], tx["type"], tx["id"])
		}
		amount := tx["amount"].(map[string]any)
		orig, charged := amount["originalAmount"].(map[string]any), amount["chargedAmount"].(map[string]any)
		checkFields(t, "originalAmount", orig, map[string]string{"amount": kNumber, "currency": kCode})
		checkFields(t, "chargedAmount", charged, map[string]string{"amount": kNumber + `|""`, "currency": kCode})
		if charged["amount"] == "" {
			emptyCharged++
		}
		if orig["currency"] != charged["currency"] {
			foreign++
		}
		if charged["currency"] != "ILS" {
			t.Errorf("got charged currency %v, want ILS", charged["currency"])
		}
		cat := tx["category"].(map[string]any)
		checkFields(t, "category", cat, map[string]string{"main": kCode, "sub": kCode})
		if !strings.HasPrefix(cat["sub"].(string), cat["main"].(string)+"_") {
			t.Errorf("got category %v, want sub MAIN_...", cat)
		}
		checkFields(t, "date", tx["date"].(map[string]any), map[string]string{"transactionDate": kDate})
		checkFields(t, "description", tx["description"].(map[string]any), map[string]string{"description": kString})
		if hasHebrew(tx["merchantName"].(string)) {
			hebrew++
		} else {
			latin++
		}
	}
	for name, n := range map[string]int{"empty chargedAmount.amount": emptyCharged, "foreign-currency": foreign, "Hebrew merchant": hebrew, "Latin merchant": latin} {
		if n == 0 {
			t.Errorf("got no %s transactions among %d, want some", name, len(txs))
		}
	}
}

// TestTransactionSKInPath reads and patches a transaction by its SK, which
// holds '#': escaped it is a path segment, raw it starts a fragment.
func TestTransactionSKInPath(t *testing.T) {
	h := newHarness(t, Options{})
	tok := h.token("u")
	tx := items(t, h.do("GET", "/v2/data/transactions?limit=1", tok, nil))[0]
	sk := tx["SK"].(string)
	if got := h.do("GET", "/v2/data/transactions/"+url.PathEscape(sk), tok, nil).json(t)["SK"]; got != sk {
		t.Errorf("escaped SK: got %v, want %s", got, sk)
	}
	if r := h.do("GET", "/v2/data/transactions/"+sk, tok, nil); string(r.body) != "{}" {
		t.Errorf("raw SK (the rest is a fragment): got %s, want {}", r.body)
	}
	r := h.do("PATCH", "/v2/data/transactions/"+url.PathEscape(sk), tok, map[string]any{"category": map[string]any{"main": "SHOPPING", "sub": "SHOPPING_OTHER"}})
	if r.status != 200 || r.json(t)["category"].(map[string]any)["sub"] != "SHOPPING_OTHER" {
		t.Errorf("PATCH escaped SK: got %d %s, want 200 with SHOPPING_OTHER", r.status, r.body)
	}
}

// TestCategoriesShape checks the bare array and that PATCH accepts every
// pair it lists and nothing else.
func TestCategoriesShape(t *testing.T) {
	h := newHarness(t, Options{})
	tok := h.token("u")
	cats := bareArray(t, h.do("GET", "/v2/data/transaction-categories", tok, nil))
	sk := url.PathEscape(items(t, h.do("GET", "/v2/data/transactions?limit=1", tok, nil))[0]["SK"].(string))
	for _, c := range cats {
		checkFields(t, "category", c, map[string]string{"main": kCode, "he": kHebrew, "subs": kArray})
		for _, sub := range c["subs"].([]any) {
			body := map[string]any{"category": map[string]any{"main": c["main"], "sub": sub}}
			if r := h.do("PATCH", "/v2/data/transactions/"+sk, tok, body); r.status != 200 {
				t.Errorf("PATCH %v/%v: got %d %s, want 200", c["main"], sub, r.status, r.body)
			}
		}
	}
	wantError(t, h.do("PATCH", "/v2/data/transactions/"+sk, tok, map[string]any{"category": map[string]any{"main": "Shopping"}}), 400, typeValidationError, "")
}

func TestProvidersShape(t *testing.T) {
	h := newHarness(t, Options{})
	tok := h.token("u")
	real := bareArray(t, h.do("GET", "/v2/providers", tok, nil))
	all := bareArray(t, h.do("GET", "/v2/providers?includeFakeProviders=true", tok, nil))
	for _, p := range all {
		checkFields(t, "provider", p, map[string]string{"providerFriendlyId": kString, "name": kString, "nameNativeLanguage": kString, "mode": kString})
		if p["mode"] != "PSD2" && p["mode"] != "OB" {
			t.Errorf("got mode %v, want PSD2 or OB", p["mode"])
		}
		if sandbox := strings.HasSuffix(p["providerFriendlyId"].(string), "-sandbox"); sandbox != (p["sandbox"] == true) {
			t.Errorf("got %v, want sandbox providers (and only they) to end in -sandbox", p)
		}
	}
	names := map[string]map[string]any{}
	for _, p := range real {
		if p["sandbox"] == true {
			t.Errorf("without includeFakeProviders: got %v", p["providerFriendlyId"])
		}
		names[p["providerFriendlyId"].(string)] = p
	}
	for _, id := range []string{"hapoalim", "leumi", "discount", "mizrahi-tefahot"} {
		if p, ok := names[id]; !ok || !hasHebrew(p["nameNativeLanguage"].(string)) || p["mode"] != "OB" {
			t.Errorf("got %v for %s, want an OB bank with a Hebrew native name", p, id)
		}
	}
	if len(all) <= len(real) {
		t.Errorf("got %d providers with fakes, %d without; want more with fakes", len(all), len(real))
	}
}

func TestAccountShape(t *testing.T) {
	h := newHarness(t, Options{})
	tok := h.token("u")
	types := map[string]float64{}
	for _, a := range items(t, h.do("GET", "/v2/data/accounts", tok, nil)) {
		checkFields(t, "account", a, map[string]string{"id": kULID, "accountType": kCode, "product": kString, "accountNumber": kString, "balances": kArray})
		b := a["balances"].([]any)[0].(map[string]any)["balanceAmount"].(map[string]any)
		amount, err := strconv.ParseFloat(b["amount"].(string), 64)
		if err != nil || b["currency"] != "ILS" {
			t.Errorf("got balance %v, want a numeric string in ILS", b)
		}
		types[a["accountType"].(string)] = amount
	}
	for _, typ := range []string{"CHECKING", "CARD", "LOAN", "SAVINGS", "SECURITIES"} {
		if _, ok := types[typ]; !ok {
			t.Errorf("got account types %v, want a %s", types, typ)
		}
	}
	if types["CARD"] >= 0 || types["LOAN"] >= 0 {
		t.Errorf("got card %v and loan %v balances, want both negative", types["CARD"], types["LOAN"])
	}
}

// TestTimestampsWholeSecondUTC reads every resource under a clock with
// nanoseconds in another zone: every *At field is RFC 3339 UTC without
// fractions.
func TestTimestampsWholeSecondUTC(t *testing.T) {
	clock := time.Date(2026, 7, 23, 7, 12, 9, 123456789, time.FixedZone("IDT", 3*3600))
	h := newHarness(t, Options{Now: func() time.Time { return clock }, Control: true})
	tok := h.token("u")
	pid := h.do("POST", "/v2/payments", tok, paymentBody("x")).json(t)["id"].(string)
	h.do("POST", "/v2/pay/open-banking-init", tok, map[string]any{"providerId": ProviderSandbox, "paymentId": pid})
	mid := h.do("POST", "/v2/merchants", tok, map[string]any{"name": "מאפיית אבולעפיה"}).json(t)["id"].(string)
	cid := h.do("POST", "/v2/connections", tok, map[string]any{"providerIds": []string{ProviderSandbox}}).json(t)["id"].(string)
	h.do("POST", "/chat/chat/connections/refresh", tok, nil)
	var n int
	for _, path := range []string{"/v2/payments", "/v2/payments/" + pid, "/v2/merchants", "/v2/merchants/" + mid,
		"/v2/connections", "/v2/connections/" + cid, "/_sim/clock"} {
		var v any
		if err := jsonUnmarshal(h.do("GET", path, tok, nil).body, &v); err != nil {
			t.Fatal(err)
		}
		n += checkTimestamps(t, path, "", v)
	}
	if n < 20 {
		t.Errorf("checked %d timestamps, want at least 20", n)
	}
	if got := h.do("GET", "/v2/payments/"+pid, tok, nil).json(t)["createdAt"]; got != "2026-07-23T04:12:09Z" {
		t.Errorf("got createdAt %v, want 2026-07-23T04:12:09Z", got)
	}
}

// checkTimestamps checks every key ending in "At" (and "now") under v and
// returns how many it saw.
func checkTimestamps(t *testing.T, path, key string, v any) int {
	t.Helper()
	n := 0
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			n += checkTimestamps(t, path, k, e)
		}
	case []any:
		for _, e := range x {
			n += checkTimestamps(t, path, key, e)
		}
	default:
		if strings.HasSuffix(key, "At") || key == "now" {
			n++
			if s, ok := x.(string); x != nil && (!ok || !timestampRe.MatchString(s)) {
				t.Errorf("%s: got %s = %v, want RFC 3339 UTC in whole seconds", path, key, x)
			}
		}
	}
	return n
}
