package upstreamsim

import (
	"encoding/json"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// untidyBody is a payment body with what a normalising reply drops: an
// empty remittanceInformation, null members, members the simulator does
// not model (at both levels) and the amount as a string.
func untidyBody() map[string]any {
	return map[string]any{
		"paymentInformation": map[string]any{
			"amount": "12.50", "currency": "EUR", "remittanceInformation": "", "merchantId": nil,
			"creditorName": "Jane", "creditorAccount": map[string]any{"iban": "FR7630006000011234567890189", "bic": "BNPAFRPP"},
			"debtorAccount": nil, "endToEndId": "E2E-1",
		},
		"providerIds": []string{ProviderSandbox},
		"redirectUrl": "https://app.example.com/payment-done",
	}
}

// tidyInfo is untidyBody's paymentInformation as both profiles answer it.
var tidyInfo = map[string]any{
	"amount": 12.5, "currency": "EUR", "creditorName": "Jane",
	"creditorAccount": map[string]any{"iban": "FR7630006000011234567890189"},
}

// listed returns the payment id from user's list.
func listed(t *testing.T, h *harness, tok, id string) map[string]any {
	t.Helper()
	items, _ := walk(t, h, tok, "/v2/payments", map[string][]string{"limit": {"500"}})
	for _, it := range items {
		if it["id"] == id {
			return it
		}
	}
	t.Fatalf("payment %s is not listed", id)
	return nil
}

// The full profile is what the simulator has always answered: what it
// keeps of the payment, updatedAt included. It already drops what it
// does not model, empty strings and nulls, and the amount is a number: the
// simulator keeps paymentInformation as typed fields, not as sent.
func TestReplyProfileFull(t *testing.T) {
	h := newHarness(t, Options{})
	if got := h.sim.Settings().ReplyProfile; got != ProfileFull {
		t.Fatalf("default reply profile: got %q, want full", got)
	}
	tok := h.token("alice")
	id, _ := h.createPayment(tok, untidyBody())
	for name, p := range map[string]map[string]any{
		"get":  h.do("GET", "/v2/payments/"+id, tok, nil).json(t),
		"list": listed(t, h, tok, id),
	} {
		if !reflect.DeepEqual(p["paymentInformation"], tidyInfo) {
			t.Errorf("%s: got paymentInformation %v, want %v", name, p["paymentInformation"], tidyInfo)
		}
		if want := []string{"createdAt", "id", "payUrl", "paymentInformation", "providerIds", "redirectUrl", "status", "updatedAt"}; !slices.Equal(keys(p), want) {
			t.Errorf("%s: got keys %v, want %v", name, keys(p), want)
		}
	}
}

// The documented profile sends only what the upstream documents: no
// updatedAt on any payment, in the list, the look-up and the cancel
// answer, and a paymentInformation with no empty or null member.
func TestReplyProfileDocumented(t *testing.T) {
	h := newHarness(t, Options{Control: true})
	tok := h.token("alice")
	id, _ := h.createPayment(tok, untidyBody())
	r := h.do("PATCH", "/_sim/settings", "", map[string]any{"replyProfile": "documented"})
	if r.status != http.StatusOK || r.json(t)["replyProfile"] != "documented" {
		t.Fatalf("PATCH replyProfile: got %d %s, want 200 with documented", r.status, r.body)
	}
	wantKeys := []string{"createdAt", "id", "payUrl", "paymentInformation", "providerIds", "redirectUrl", "status"}
	for name, p := range map[string]map[string]any{
		"get":  h.do("GET", "/v2/payments/"+id, tok, nil).json(t),
		"list": listed(t, h, tok, id),
	} {
		if !reflect.DeepEqual(p["paymentInformation"], tidyInfo) {
			t.Errorf("%s: got paymentInformation %v, want %v", name, p["paymentInformation"], tidyInfo)
		}
		if !slices.Equal(keys(p), wantKeys) {
			t.Errorf("%s: got keys %v, want %v", name, keys(p), wantKeys)
		}
	}
	if p := h.do("DELETE", "/v2/payments/"+id, tok, nil).json(t); p["status"] != statusCANC || p["updatedAt"] != nil {
		t.Errorf("cancel answer: got %v, want CANC without updatedAt", p)
	}
	items, _ := walk(t, h, tok, "/v2/payments", map[string][]string{})
	for _, it := range items { // the seeded payments too
		if _, has := it["updatedAt"]; has {
			t.Errorf("payment %v has updatedAt", it["id"])
		}
		checkNormal(t, it["id"], it["paymentInformation"])
	}
	created := h.do("POST", "/v2/payments", tok, paymentBody("Order documented"))
	if !slices.Equal(keys(created.json(t)), []string{"id", "payUrl"}) {
		t.Errorf("create answer: got %s, want id and payUrl only, as in the full profile", created.body)
	}

	wantError(t, h.do("PATCH", "/_sim/settings", "", map[string]any{"replyProfile": "minimal"}), http.StatusBadRequest, typeClientError,
		`"replyProfile" must be "full" or "documented"`)
	h.sim.Reset()
	if got := h.sim.Settings().ReplyProfile; got != ProfileFull {
		t.Errorf("after Reset: got %q, want the option's full", got)
	}
}

// checkNormal fails for a paymentInformation with a null or empty-string
// member, at any depth, or an amount that is not a number.
func checkNormal(t *testing.T, id, info any) {
	t.Helper()
	m, _ := info.(map[string]any)
	if _, ok := m["amount"].(float64); !ok {
		t.Errorf("payment %v: got amount %#v, want a number", id, m["amount"])
	}
	var walkInfo func(path string, v any)
	walkInfo = func(path string, v any) {
		if m, ok := v.(map[string]any); ok {
			for k, e := range m {
				walkInfo(path+"."+k, e)
			}
		} else if v == nil || v == "" {
			t.Errorf("payment %v: %s is %#v, want it left out", id, path, v)
		}
	}
	walkInfo("paymentInformation", info)
}

// normalInfo drops an account without an IBAN, which creation refuses
// today, so that the documented profile keeps its promise for any
// payment the simulator could come to hold.
func TestNormalInfoDropsEmptyAccounts(t *testing.T) {
	p := payment{ID: "x", profile: ProfileDocumented, CreatedAt: testEpoch, UpdatedAt: testEpoch,
		PaymentInformation: paymentInfo{Amount: 1, Currency: "EUR", CreditorAccount: &accountRef{}, DebtorAccount: &accountRef{IBAN: "DE89"}}}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"amount": 1.0, "currency": "EUR", "debtorAccount": map[string]any{"iban": "DE89"}}
	if !reflect.DeepEqual(got["paymentInformation"], want) || got["updatedAt"] != nil {
		t.Errorf("got %s, want paymentInformation %v and no updatedAt", b, want)
	}
}

// keys returns m's keys, sorted.
func keys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

// A new payment stays out of the list for the lag, by the simulator's
// clock to the nanosecond, of the count and the status filter too; a
// look-up by id finds it at once.
func TestListLag(t *testing.T) {
	h := newHarness(t, Options{ListLag: 300 * time.Millisecond})
	tok := h.token("alice")
	listedIDs := func(query string) (map[string]bool, int) {
		m := h.do("GET", "/v2/payments?limit=500"+query, tok, nil).json(t)
		out := map[string]bool{}
		for _, it := range m["items"].([]any) {
			out[it.(map[string]any)["id"].(string)] = true
		}
		return out, int(m["count"].(float64))
	}
	before, count := listedIDs("")
	id, _ := h.createPayment(tok, paymentBody("Order lagging"))
	direct, err := h.sim.CreateDirectPayment("alice", mustJSON(t, paymentBody("Order lagging elsewhere")))
	if err != nil {
		t.Fatal(err)
	}

	got, n := listedIDs("")
	if got[id] || got[direct.ID] || n != count || len(got) != len(before) {
		t.Fatalf("just made: got %d listed (count %d), want the %d listed before, without the new ones", len(got), n, len(before))
	}
	if got, _ := listedIDs("&status=INIT"); got[id] {
		t.Error("just made: listed under status=INIT, want it left out there too")
	}
	if r := h.do("GET", "/v2/payments/"+id, tok, nil); r.status != http.StatusOK {
		t.Fatalf("GET by id during the lag: got %d %s, want 200", r.status, r.body)
	}
	h.sim.Advance(299 * time.Millisecond)
	if got, _ := listedIDs(""); got[id] {
		t.Fatal("1ms before the lag ends: listed, want it still left out")
	}
	h.sim.Advance(time.Millisecond)
	got, n = listedIDs("")
	if !got[id] || !got[direct.ID] || n != count+2 {
		t.Fatalf("when the lag ends: got %d listed (count %d), want both new payments listed and counted", len(got), n)
	}
}

// The list lag is a setting like the others: shown as a duration,
// patched, refused when negative, restored by Reset.
func TestListLagSetting(t *testing.T) {
	h := newHarness(t, Options{Control: true})
	if got := h.do("GET", "/_sim/settings", "", nil).json(t)["listLag"]; got != "0s" {
		t.Fatalf("default listLag: got %v, want 0s", got)
	}
	r := h.do("PATCH", "/_sim/settings", "", map[string]any{"listLag": "300ms"})
	if r.status != http.StatusOK || r.json(t)["listLag"] != "300ms" || h.sim.Settings().ListLag != 300*time.Millisecond {
		t.Fatalf("PATCH listLag: got %d %s, want 200 with 300ms", r.status, r.body)
	}
	tok := h.token("alice")
	id, _ := h.createPayment(tok, paymentBody("Order lagging"))
	if body := string(h.do("GET", "/v2/payments?limit=500", tok, nil).body); strings.Contains(body, id) {
		t.Error("with listLag 300ms: a payment made now is listed")
	}
	for _, bad := range []any{"-1s", "soon", 300} {
		wantError(t, h.do("PATCH", "/_sim/settings", "", map[string]any{"listLag": bad}), http.StatusBadRequest, typeClientError, "")
	}
	if _, err := h.sim.UpdateSettings(SettingsPatch{ListLag: ptr(-time.Second)}); err == nil {
		t.Error("UpdateSettings with a negative list lag: want a SettingError")
	}
	h.sim.Reset()
	if got := h.sim.Settings().ListLag; got != 0 {
		t.Errorf("after Reset: got listLag %s, want 0", got)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
