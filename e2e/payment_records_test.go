//go:build integration

package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"testing"

	"github.com/fintech-bff/bff/internal/upstreamsim"
)

// A user's money-moving requests read back from the ledger through
// GET /bff/payments (newest first, two pages of at most 2, nothing twice)
// and /bff/payments/{key}; another user sees none of them (404, an empty
// list), and without a session it is 401 SESSION_REQUIRED.
func TestPaymentRecords(t *testing.T) {
	t.Parallel()
	e := start(t, options{upstream: "timeout: 2s"})
	alice := e.app(e.browser().login("records-alice"))
	bob := e.app(e.browser().login("records-bob"))

	type record struct {
		Key, Route, State, PaymentID, CreatedAt, UpdatedAt string
		Status                                             int
		PaymentStatus                                      *string
	}
	keys := []string{"records-1", "records-2/unknown?%#", "records-3"}
	ids := map[string]string{}
	for i, key := range keys {
		body := fmt.Sprintf(validPayment, "Order records-"+fmt.Sprint(i))
		if i == 1 {
			// The upstream hangs up: the outcome is unknown.
			e.sim.InjectFault(upstreamsim.Fault{Method: "POST", PathPrefix: "/v2/payments", HangUp: true, Times: 1})
			wantProblem(t, alice.do("POST", "/api/v2/payments", body, "Idempotency-Key", key), 502, "PAYMENT_OUTCOME_UNKNOWN")
			continue
		}
		r := alice.do("POST", "/api/v2/payments", body, "Idempotency-Key", key)
		if r.status != 201 {
			t.Fatalf("payment %s: got %d %s", key, r.status, r.body)
		}
		ids[key], _ = r.json(t)["id"].(string)
	}

	var listed []record
	cursor := ""
	for pages := 1; ; pages++ {
		path := "/bff/payments?limit=2"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		r := alice.do("GET", path, "")
		var page struct {
			Items      []record
			NextCursor *string
		}
		if err := json.Unmarshal(r.body, &page); r.status != 200 || err != nil || len(page.Items) > 2 {
			t.Fatalf("page %d: got %d %s, want at most 2 items", pages, r.status, r.body)
		}
		if r.header.Get("Cache-Control") != "no-store" || r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("page %d: Cache-Control %q, X-Content-Type-Options %q; want no-store and nosniff (the user's payments)", pages, r.header.Get("Cache-Control"), r.header.Get("X-Content-Type-Options"))
		}
		listed = append(listed, page.Items...)
		if page.NextCursor == nil {
			if pages != 2 {
				t.Fatalf("got %d pages, want 2", pages)
			}
			break
		}
		cursor = *page.NextCursor
	}
	if len(listed) != 3 || listed[0].Key != keys[2] || listed[1].Key != keys[1] || listed[2].Key != keys[0] {
		t.Fatalf("listed %+v, want %v newest first, each once", listed, keys)
	}
	for _, rec := range listed {
		if rec.Route != "/v2/payments" || (rec.PaymentStatus != nil && (rec.PaymentID == "" || *rec.PaymentStatus != "INIT")) || rec.CreatedAt == "" || rec.UpdatedAt < rec.CreatedAt {
			t.Errorf("%s: got %+v", rec.Key, rec)
		}
	}
	for _, tc := range []struct {
		key, state string
		status     int
	}{{keys[0], "done", 201}, {keys[1], "unknown", 502}, {keys[2], "done", 201}} {
		r := alice.do("GET", "/bff/payments/"+url.PathEscape(tc.key), "")
		var rec record
		if err := json.Unmarshal(r.body, &rec); r.status != 200 || err != nil {
			t.Fatalf("GET %s: got %d %s", tc.key, r.status, r.body)
		}
		if rec.Key != tc.key || rec.State != tc.state || rec.Status != tc.status || rec.PaymentID != ids[tc.key] {
			t.Errorf("GET %s: got %+v, want %s, status %d, payment %q", tc.key, rec, tc.state, tc.status, ids[tc.key])
		}
	}

	wantProblem(t, bob.do("GET", "/bff/payments/"+url.PathEscape(keys[0]), ""), 404, "ROUTE_NOT_FOUND")
	if r := bob.do("GET", "/bff/payments", ""); r.status != 200 || string(r.body) != "{\"items\":[]}\n" {
		t.Fatalf("bob's list: got %d %s, want an empty one", r.status, r.body)
	}
	anonymous := e.app("")
	wantProblem(t, anonymous.do("GET", "/bff/payments", ""), 401, "SESSION_REQUIRED")
	wantProblem(t, anonymous.do("GET", "/bff/payments/"+keys[0], ""), 401, "SESSION_REQUIRED")
}
