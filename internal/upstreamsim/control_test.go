package upstreamsim

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestControlOffByDefault(t *testing.T) {
	h := newHarness(t, Options{})
	for _, c := range []struct{ method, path string }{
		{"POST", "/_sim/reset"}, {"GET", "/_sim/counters"}, {"POST", "/_sim/faults"}, {"GET", "/_sim/requests"},
	} {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			wantError(t, h.do(c.method, c.path, "", map[string]any{}), http.StatusNotFound, typeClientError, "")
		})
	}
}

func TestControlAPI(t *testing.T) {
	h := newHarness(t, Options{Control: true})
	ctl := func(method, path string, body any) reply {
		t.Helper()
		return h.do(method, "/_sim/"+path, "", body)
	}
	wantStatus := func(t *testing.T, r reply, want int) {
		t.Helper()
		if r.status != want {
			t.Fatalf("got %d %s, want %d", r.status, r.body, want)
		}
	}

	t.Run("counters", func(t *testing.T) {
		h.token("alice")
		h.token("alice")
		h.token("bob")
		var got struct {
			Mints      map[string]int `json:"mints"`
			TotalMints int            `json:"totalMints"`
		}
		r := ctl("GET", "counters", nil)
		if err := json.Unmarshal(r.body, &got); err != nil {
			t.Fatal(err)
		}
		if got.Mints["alice"] != 2 || got.Mints["bob"] != 1 || got.TotalMints != 3 {
			t.Errorf("got %+v, want alice 2, bob 1, total 3", got)
		}
	})
	t.Run("requests record headers, not control calls", func(t *testing.T) {
		wantStatus(t, ctl("DELETE", "requests", nil), 204)
		tok := h.token("alice")
		h.do("GET", "/v2/payments?limit=3", tok, nil)
		var seen []SeenRequest
		if err := json.Unmarshal(ctl("GET", "requests", nil).body, &seen); err != nil {
			t.Fatal(err)
		}
		if len(seen) != 2 {
			t.Fatalf("got %d recorded requests, want 2 (token + payments)", len(seen))
		}
		last := seen[1]
		if last.Method != "GET" || last.Path != "/v2/payments" || last.Query != "limit=3" || last.Header.Get("Authorization") != "Bearer "+Fingerprint(tok) || last.UserID != "alice" {
			t.Errorf("got %+v, want GET /v2/payments limit=3 for alice with the bearer token's fingerprint", last)
		}
		if !strings.Contains(seen[0].Body, `"userId":"alice"`) {
			t.Errorf("got token request body %q, want it recorded", seen[0].Body)
		}
		if n := len(h.sim.Requests()); n != 2 {
			t.Errorf("Requests(): got %d, want 2", n)
		}
	})
	t.Run("faults", func(t *testing.T) {
		wantStatus(t, ctl("POST", "faults", map[string]any{"pathPrefix": "/v2/payments", "status": 503, "times": 1, "delay": "10ms"}), 201)
		tok := h.token("alice")
		start := time.Now()
		if r := h.do("GET", "/v2/payments", tok, nil); r.status != 503 {
			t.Errorf("faulted: got %d, want 503", r.status)
		}
		if el := time.Since(start); el < 10*time.Millisecond {
			t.Errorf("got reply after %v, want at least the 10ms delay", el)
		}
		if r := h.do("GET", "/v2/payments", tok, nil); r.status != 200 {
			t.Errorf("after times ran out: got %d, want 200", r.status)
		}
		wantStatus(t, ctl("POST", "faults", map[string]any{"pathPrefix": "/", "status": 500}), 201)
		if r := h.do("GET", "/v2/payments", tok, nil); r.status != 500 {
			t.Errorf("catch-all fault: got %d, want 500", r.status)
		}
		wantStatus(t, ctl("GET", "counters", nil), 200) // control is never faulted
		wantStatus(t, ctl("DELETE", "faults", nil), 204)
		if r := h.do("GET", "/v2/payments", tok, nil); r.status != 200 {
			t.Errorf("after clearing: got %d, want 200", r.status)
		}
		wantError(t, ctl("POST", "faults", map[string]any{"status": 500, "delay": "soon"}), 400, typeClientError, "")
		wantError(t, ctl("POST", "faults", map[string]any{"pathPrefix": "/"}), 400, typeClientError, "")
	})
	t.Run("rotate-secret", func(t *testing.T) {
		tok := h.token("alice")
		wantError(t, ctl("POST", "rotate-secret", map[string]any{}), 400, typeClientError, "")
		wantStatus(t, ctl("POST", "rotate-secret", map[string]any{"clientSecret": "s2"}), 204)
		wantError(t, h.do("GET", "/v2/payments", tok, nil), 401, "", "")
		r := h.do("POST", "/oauth/token", "", map[string]any{"clientId": "dev-client", "clientSecret": "s2", "userId": "alice"})
		wantStatus(t, r, 200)
	})
	t.Run("reset", func(t *testing.T) {
		wantStatus(t, ctl("POST", "reset", nil), 204)
		if n := h.sim.TotalMints(); n != 0 {
			t.Errorf("after reset: got %d mints, want 0", n)
		}
		if n := len(h.sim.Requests()); n != 0 {
			t.Errorf("after reset: got %d requests, want 0", n)
		}
		h.token("alice") // the configured secret works again
	})
	t.Run("revoke", func(t *testing.T) {
		tok := h.token("alice")
		wantError(t, ctl("POST", "revoke", map[string]any{}), 400, typeClientError, "")
		wantStatus(t, ctl("POST", "revoke", map[string]any{"userId": "alice"}), 204)
		wantError(t, h.do("GET", "/v2/payments", tok, nil), 401, "", "")
	})
	t.Run("clock", func(t *testing.T) {
		tok := h.token("alice")
		r := ctl("POST", "clock/advance", map[string]any{"duration": "90m"})
		wantStatus(t, r, 200)
		if got := r.json(t)["now"]; got != testEpoch.Add(90*time.Minute).Format(time.RFC3339) {
			t.Errorf("got now %v, want epoch+90m", got)
		}
		wantError(t, h.do("GET", "/v2/payments", tok, nil), 401, "", "token expired")
		wantError(t, ctl("POST", "clock/advance", map[string]any{"duration": "-1h"}), 400, typeClientError, "")
		if got := ctl("GET", "clock", nil).json(t)["now"]; got != testEpoch.Add(90*time.Minute).Format(time.RFC3339) {
			t.Errorf("GET clock: got %v, want epoch+90m", got)
		}
	})
	t.Run("org", func(t *testing.T) {
		r := ctl("POST", "org", map[string]any{"plan": "free", "productionAccess": true, "credits": 7})
		wantStatus(t, r, 200)
		if m := r.json(t); m["plan"] != "free" || m["productionAccess"] != true || m["credits"] != 7.0 {
			t.Errorf("got %v, want free, true, 7", m)
		}
		tok := h.token("alice")
		wantError(t, h.do("GET", "/v2/payments", tok, nil), 403, typeNotAvailableOnPlan, "")
		wantStatus(t, ctl("POST", "org", map[string]any{"plan": "starter"}), 200)
		if m := ctl("GET", "org", nil).json(t); m["plan"] != "starter" || m["credits"] != 7.0 {
			t.Errorf("partial update: got %v, want starter with credits kept", m)
		}
		wantStatus(t, h.do("GET", "/v2/payments", tok, nil), 200)
		wantError(t, ctl("POST", "org", map[string]any{"plan": "gold"}), 400, typeClientError, "")
		wantError(t, ctl("POST", "org", `{`), 400, typeClientError, "")
	})
	t.Run("connector-token", func(t *testing.T) {
		r := ctl("POST", "connector-token", map[string]any{"userId": "alice"})
		wantStatus(t, r, 200)
		tok := r.json(t)["accessToken"].(string)
		wantStatus(t, h.do("GET", "/v2/payments", tok, nil), 200)
		wantError(t, h.do("POST", "/v2/payments", tok, paymentBody("x")), 403, typeMCPForbidden, "")
		r = ctl("POST", "connector-token", map[string]any{"userId": "alice", "scopes": []string{}, "linked": false})
		wantError(t, h.do("GET", "/v2/payments", r.json(t)["accessToken"].(string), nil), 403, typeMCPForbidden, "")
		r = ctl("POST", "connector-token", map[string]any{"userId": "alice", "linked": false})
		wantError(t, h.do("GET", "/v2/payments", r.json(t)["accessToken"].(string), nil), 403, typeMCPNoServiceOrg, "")
		wantStatus(t, ctl("POST", "connector-verification", map[string]any{"down": true}), 204)
		wantError(t, h.do("GET", "/v2/payments", tok, nil), 503, typeMCPUnavailable, "")
		wantStatus(t, ctl("POST", "connector-verification", map[string]any{"down": false}), 204)
		wantError(t, ctl("POST", "connector-token", map[string]any{}), 400, typeClientError, "")
	})
	t.Run("connection-status", func(t *testing.T) {
		tok := h.token("carol")
		id := seededConnections(t, h, tok)["ACTIVE"]
		wantStatus(t, ctl("POST", "connection-status", map[string]any{"userId": "carol", "connectionId": id, "status": "REVOKED"}), 204)
		if got := h.do("GET", "/v2/connections/"+id, tok, nil).json(t)["status"]; got != "REVOKED" {
			t.Errorf("got status %v, want REVOKED", got)
		}
		wantError(t, ctl("POST", "connection-status", map[string]any{"userId": "carol", "connectionId": "x", "status": "ACTIVE"}), 404, typeClientError, "")
		wantError(t, ctl("POST", "connection-status", map[string]any{}), 400, typeClientError, "")
	})
	t.Run("unknown control route", func(t *testing.T) {
		wantError(t, ctl("GET", "nothing", nil), 404, typeClientError, "")
	})
}

func TestRequestLogRing(t *testing.T) {
	var l requestLog
	for i := range maxSeen + 3 {
		l.add(SeenRequest{Path: "/" + strconv.Itoa(i)})
	}
	got := l.list()
	if len(got) != maxSeen || got[0].Path != "/3" || got[maxSeen-1].Path != "/"+strconv.Itoa(maxSeen+2) {
		t.Errorf("got %d entries from %s to %s, want %d from /3 to /%d", len(got), got[0].Path, got[len(got)-1].Path, maxSeen, maxSeen+2)
	}
}
