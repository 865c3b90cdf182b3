package upstreamsim

import (
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"testing"
)

// walk pages through path until nextPage is null and returns every item.
func walk(t *testing.T, h *harness, tok, path string, query url.Values) ([]map[string]any, int) {
	t.Helper()
	var all []map[string]any
	count := -1
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatal("more than 1000 pages, want the walk to end")
		}
		r := h.do("GET", path+"?"+query.Encode(), tok, nil)
		if r.status != http.StatusOK {
			t.Fatalf("page %d: got status %d, want 200 (%s)", pages, r.status, r.body)
		}
		m := r.json(t)
		count = int(m["count"].(float64))
		for _, it := range m["items"].([]any) {
			all = append(all, it.(map[string]any))
		}
		next, ok := m["nextPage"].(string)
		if !ok {
			if m["nextPage"] != nil {
				t.Fatalf("got nextPage %v, want a string or null", m["nextPage"])
			}
			return all, count
		}
		query.Set("nextPage", next)
	}
}

func TestTransactionPaging(t *testing.T) {
	h := newHarness(t, Options{})
	tok := h.token("pager")
	tests := []struct {
		name  string
		query url.Values
		want  int
	}{
		{"default limit, newest first", url.Values{}, 1200},
		{"limit 500", url.Values{"limit": {"500"}}, 1200},
		{"limit 7 ascending", url.Values{"limit": {"7"}, "sort": {"1"}}, 1200},
		{"limit 1200 pages exactly once", url.Values{"limit": {"400"}}, 1200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			items, count := walk(t, h, tok, "/v2/data/transactions", tt.query)
			if len(items) != tt.want || count != tt.want {
				t.Fatalf("got %d items (count %d), want %d", len(items), count, tt.want)
			}
			seen := map[string]bool{}
			var dates []string
			for _, it := range items {
				id := it["id"].(string)
				if seen[id] {
					t.Fatalf("got duplicate transaction %s", id)
				}
				seen[id] = true
				dates = append(dates, it["date"].(map[string]any)["transactionDate"].(string))
			}
			sorted := slices.IsSorted(dates)
			if tt.query.Get("sort") != "1" {
				slices.Reverse(dates)
				sorted = slices.IsSorted(dates)
			}
			if !sorted {
				t.Errorf("got transactions out of date order")
			}
		})
	}
	t.Run("last page has nextPage null", func(t *testing.T) {
		r := h.do("GET", "/v2/data/transactions?limit=500", tok, nil)
		next := r.json(t)["nextPage"].(string)
		r = h.do("GET", "/v2/data/transactions?limit=500&nextPage="+next, tok, nil)
		next = r.json(t)["nextPage"].(string)
		m := h.do("GET", "/v2/data/transactions?limit=500&nextPage="+next, tok, nil).json(t)
		if m["nextPage"] != nil || len(m["items"].([]any)) != 200 {
			t.Errorf("third page: got nextPage %v and %d items, want null and 200", m["nextPage"], len(m["items"].([]any)))
		}
	})
}

func TestPagingValidation(t *testing.T) {
	h := newHarness(t, Options{})
	tok := h.token("u")
	tests := []struct {
		name, path string
		want       string
	}{
		{"limit over 500", "/v2/data/transactions?limit=501", `["\"limit\" must be less than or equal to 500"]`},
		{"limit zero", "/v2/data/transactions?limit=0", `["\"limit\" must be greater than or equal to 1"]`},
		{"limit not a number", "/v2/payments?limit=ten", `["\"limit\" must be a number"]`},
		{"sort 2", "/v2/payments?sort=2", `["\"sort\" must be one of [1, -1]"]`},
		{"bad cursor", "/v2/payments?nextPage=!!!", `["\"nextPage\" is not a valid cursor"]`},
		{"bad dateFrom", "/v2/data/transactions?dateFrom=2026-13-01", `["\"dateFrom\" must be a valid date in YYYY-MM-DD format"]`},
		{"bank branches refuse limit", "/v2/bank-branches?limit=5", `["\"limit\" is not allowed"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, h.do("GET", tt.path, tok, nil), http.StatusBadRequest, typeClientError, tt.want)
		})
	}
}

func TestTransactionFilters(t *testing.T) {
	h := newHarness(t, Options{})
	tok := h.token("u")
	accounts := h.do("GET", "/v2/data/accounts", tok, nil).json(t)["items"].([]any)
	if len(accounts) != 5 {
		t.Fatalf("got %d seeded accounts, want 5", len(accounts))
	}
	card := ""
	for _, a := range accounts {
		if a.(map[string]any)["accountType"] == "CARD" {
			card = a.(map[string]any)["id"].(string)
		}
	}
	items, count := walk(t, h, tok, "/v2/data/transactions", url.Values{"accountId": {card}, "limit": {"500"}})
	if count != 400 || len(items) != 400 {
		t.Errorf("card account: got %d items (count %d), want 400", len(items), count)
	}
	for _, it := range items {
		if it["accountId"] != card || it["type"] != "CARD" {
			t.Fatalf("got %v, want only the card account's CARD transactions", it)
		}
	}
	items, _ = walk(t, h, tok, "/v2/data/transactions", url.Values{"dateFrom": {"2026-02-01"}, "dateTo": {"2026-02-28"}, "limit": {"500"}})
	if len(items) == 0 {
		t.Fatal("got no February transactions, want some")
	}
	for _, it := range items {
		d := it["date"].(map[string]any)["transactionDate"].(string)
		if d < "2026-02-01" || d > "2026-02-28" {
			t.Fatalf("got date %s, want February 2026", d)
		}
	}
	r := h.do("GET", "/v2/data/accounts?accountType=SAVINGS", tok, nil).json(t)
	if r["count"] != 1.0 {
		t.Errorf("SAVINGS filter: got count %v, want 1", r["count"])
	}
}

func TestTransactionReadAndPatch(t *testing.T) {
	h := newHarness(t, Options{})
	tok := h.token("u")
	first := h.do("GET", "/v2/data/transactions?limit=1", tok, nil).json(t)["items"].([]any)[0].(map[string]any)
	// The SK holds '#': a client must escape it in the path.
	sk, id := url.PathEscape(first["SK"].(string)), first["id"].(string)

	if got := h.do("GET", "/v2/data/transactions/"+sk, tok, nil).json(t)["id"]; got != id {
		t.Errorf("read by SK: got id %v, want %s", got, id)
	}
	if r := h.do("GET", "/v2/data/transactions/"+id, tok, nil); r.status != 200 || string(r.body) != "{}" {
		t.Errorf("read by id (not SK): got %d %s, want 200 {}", r.status, r.body)
	}
	if r := h.do("GET", "/v2/data/accounts/nope", tok, nil); r.status != 200 || string(r.body) != "{}" {
		t.Errorf("unknown account: got %d %s, want 200 {}", r.status, r.body)
	}

	r := h.do("PATCH", "/v2/data/transactions/"+sk, tok, map[string]any{"category": map[string]any{"main": "HEALTH", "sub": "HEALTH_DOCTOR"}, "note": "check-up"})
	if r.status != 200 {
		t.Fatalf("patch: got %d %s, want 200", r.status, r.body)
	}
	got := h.do("GET", "/v2/data/transactions/"+sk, tok, nil).json(t)
	if c := got["category"].(map[string]any); c["main"] != "HEALTH" || c["sub"] != "HEALTH_DOCTOR" || got["note"] != "check-up" {
		t.Errorf("after patch: got %v, want HEALTH/HEALTH_DOCTOR with the note", got)
	}
	tests := []struct {
		name   string
		sk     string
		body   any
		status int
		typ    string
	}{
		{"unknown category", sk, map[string]any{"category": map[string]any{"main": "YACHTS"}}, 400, typeValidationError},
		{"sub not of main", sk, map[string]any{"category": map[string]any{"main": "HEALTH", "sub": "TRANSPORT_FUEL"}}, 400, typeValidationError},
		{"nothing to change", sk, map[string]any{}, 400, typeValidationError},
		{"unknown transaction", url.PathEscape("TRANSACTION#BANK#nope"), map[string]any{"note": "x"}, 404, typeClientError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, h.do("PATCH", "/v2/data/transactions/"+tt.sk, tok, tt.body), tt.status, tt.typ, "")
		})
	}
}

// payURLs matches the payUrl fields of a reply.
var payURLs = regexp.MustCompile(`"payUrl":"[^"]*"`)

func TestSeedIsDeterministicAndPerUser(t *testing.T) {
	a, b := newHarness(t, Options{}), newHarness(t, Options{})
	get := func(h *harness, user, path string) string {
		// payUrl carries the simulator's address and a token under its own key.
		return payURLs.ReplaceAllString(string(h.do("GET", path, h.token(user), nil).body), `"payUrl":""`)
	}
	for _, p := range []string{"/v2/payments", "/v2/connections", "/v2/data/accounts", "/v2/data/transactions?limit=500", "/v2/merchants"} {
		if get(a, "alice", p) != get(b, "alice", p) {
			t.Errorf("%s: got different seed data for the same user, want identical", p)
		}
		if get(a, "alice", p) == get(a, "bob", p) {
			t.Errorf("%s: got identical data for two users, want per-user data", p)
		}
	}
}

func TestCatalogue(t *testing.T) {
	h := newHarness(t, Options{})
	tok := h.token("u")
	list := func(path string) []any {
		r := h.do("GET", path, tok, nil)
		var arr []any
		if err := jsonUnmarshal(r.body, &arr); err != nil {
			t.Fatalf("%s: got %s, want a bare array", path, r.body)
		}
		return arr
	}
	real, all := list("/v2/providers"), list("/v2/providers?includeFakeProviders=true")
	for _, p := range real {
		if p.(map[string]any)["sandbox"] == true {
			t.Errorf("without includeFakeProviders: got sandbox provider %v", p)
		}
	}
	if len(all) <= len(real) {
		t.Errorf("got %d providers with fakes and %d without, want more with fakes", len(all), len(real))
	}
	if n := len(list("/v2/bank-branches")); n == 0 {
		t.Error("got no bank branches, want some")
	}
	if n := len(list("/v2/bank-branches?bankCode=12")); n != 2 {
		t.Errorf("bankCode filter: got %d branches, want 2", n)
	}
	if n := len(list("/v2/data/transaction-categories")); n < 5 {
		t.Errorf("categories: got %d, want a bare array of at least 5", n)
	}
}
