package upstreamsim

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// controlCalls is every control call, with a body it accepts (nil: it
// takes none).
var controlCalls = []struct {
	method, path string
	body         map[string]any
}{
	{"POST", "/_sim/reset", nil},
	{"GET", "/_sim/faults", nil},
	{"POST", "/_sim/faults", map[string]any{"status": 500, "times": 1}},
	{"DELETE", "/_sim/faults/f999", nil},
	{"DELETE", "/_sim/faults", nil},
	{"POST", "/_sim/rotate-secret", map[string]any{"clientSecret": "s2"}},
	{"POST", "/_sim/revoke", map[string]any{"userId": "alice"}},
	{"GET", "/_sim/counters", nil},
	{"GET", "/_sim/requests", nil},
	{"DELETE", "/_sim/requests", nil},
	{"POST", "/_sim/clock/advance", map[string]any{"duration": "1m"}},
	{"GET", "/_sim/clock", nil},
	{"GET", "/_sim/org", nil},
	{"POST", "/_sim/org", map[string]any{"plan": "pro"}},
	{"GET", "/_sim/settings", nil},
	{"PATCH", "/_sim/settings", map[string]any{"accountCap": 5}},
	{"POST", "/_sim/settings", map[string]any{"accountCap": 5}},
	{"POST", "/_sim/credits", map[string]any{"credits": 10}},
	{"DELETE", "/_sim/credits/alice", nil},
	{"POST", "/_sim/connector-token", map[string]any{"userId": "alice"}},
	{"POST", "/_sim/connector-verification", map[string]any{"down": false}},
	{"POST", "/_sim/connection-status", map[string]any{"userId": "alice", "connectionId": "x", "status": "ACTIVE"}},
	{"POST", "/_sim/fixtures", map[string]any{"seed": "demo"}},
	{"POST", "/_sim/personas", map[string]any{"userId": "alice", "persona": "busy"}},
	{"GET", "/_sim/personas/alice", nil},
	{"POST", "/_sim/payments/01KY12900GPN7T3N1FPMPK309R/status", map[string]any{"status": "ACSC"}},
	{"POST", "/_sim/connections/01KY12900GPN7T3N1FPMPK309R/status", map[string]any{"status": "ACTIVE"}},
	{"POST", "/_sim/payments", directBody("alice", paymentBody("Order direct"))},
	{"POST", "/_sim/payments/seed", map[string]any{"userId": "alice", "count": 3}},
	{"POST", "/_sim/faults", map[string]any{"actLate": true, "delay": "1s", "times": 1}},
	{"PATCH", "/_sim/settings", map[string]any{"replyProfile": "documented", "listLag": "300ms"}},
	{"PATCH", "/_sim/settings", map[string]any{"webhookUrl": "", "webhookSecret": DefaultWebhookSecret}},
	{"GET", "/_sim/webhooks", nil},
	{"POST", "/_sim/webhooks/msg_x/redeliver", nil},
}

// Every control call refuses a key it does not know, naming it, and a body
// that is not a JSON object; none of them acts on such a body.
func TestControlRefusesUnknownKeys(t *testing.T) {
	h := newHarness(t, Options{Control: true})
	bad := []struct {
		name, body, wantInMessage string
	}{
		{"unknown key", "", `unknown key "unauthorizedShapeX"`},
		{"not JSON", `unauthorizedShape=typed`, "JSON object"},
		{"JSON but not an object", `["plan"]`, "JSON object"},
		{"trailing data", `{} {}`, "JSON object"},
	}
	for _, c := range controlCalls {
		for _, b := range bad {
			t.Run(c.method+" "+c.path+"/"+b.name, func(t *testing.T) {
				body := b.body
				if body == "" {
					m := map[string]any{"unauthorizedShapeX": "typed"}
					for k, v := range c.body {
						m[k] = v
					}
					buf, _ := json.Marshal(m)
					body = string(buf)
				}
				h.token("alice")
				h.sim.SetUserCredits("alice", 50)
				before := simState(h.sim)
				r := h.do(c.method, c.path, "", body)
				wantError(t, r, http.StatusBadRequest, typeClientError, "")
				if msg, _ := r.json(t)["message"].(string); !strings.Contains(msg, b.wantInMessage) {
					t.Errorf("got message %q, want it to contain %q", msg, b.wantInMessage)
				}
				if after := simState(h.sim); !reflect.DeepEqual(after, before) {
					t.Errorf("a refused call acted: state went from %+v to %+v", before, after)
				}
			})
		}
	}
}

// simState is what control calls change, for comparing before and after.
func simState(s *Server) []any {
	return []any{s.Settings(), s.Org(), s.Faults(), s.Now(), s.TotalMints(), len(s.Requests()), s.Persona("alice"),
		len(s.PaymentRemittances("alice"))}
}

// The case: a key of another call is refused, not ignored, and
// the message lists what the call takes.
func TestControlNamesTheKeysACallTakes(t *testing.T) {
	h := newHarness(t, Options{Control: true})
	r := h.do("POST", "/_sim/org", "", map[string]any{"unauthorizedShape": "typed"})
	wantError(t, r, http.StatusBadRequest, typeClientError,
		`unknown key "unauthorizedShape": POST /_sim/org takes credits, plan, productionAccess`)
	r = h.do("POST", "/_sim/reset", "", map[string]any{"hard": true})
	wantError(t, r, http.StatusBadRequest, typeClientError, `unknown key "hard": POST /_sim/reset takes no keys`)
	r = h.do("POST", "/_sim/org", "", map[string]any{"credits": "lots"})
	wantError(t, r, http.StatusBadRequest, typeClientError, `"credits" must be a JSON number, not string`)
	if h.sim.Settings().UnauthorizedShape != Shape401Message {
		t.Error("a refused call changed the 401 shape")
	}
}

// A refusal is a function of the body: with several bad keys (or bad
// personas) the same one is named every time, so a snapshot of the 400
// does not flake.
func TestControlRefusalIsDeterministic(t *testing.T) {
	h := newHarness(t, Options{Control: true})
	for range 20 {
		wantError(t, h.do("POST", "/_sim/org", "", `{"zz":1,"mm":2,"aa":3}`), http.StatusBadRequest, typeClientError,
			`unknown key "aa": POST /_sim/org takes credits, plan, productionAccess`)
		wantError(t, h.do("POST", "/_sim/fixtures", "", `{"personas":{"zed":"x","amy":"y","kim":"z"}}`), http.StatusBadRequest, typeClientError,
			`"personas" of "amy": `+personaHint)
	}
}

// Each accepted body above is accepted (the table is not refusing for
// another reason).
func TestControlCallsAccept(t *testing.T) {
	h := newHarness(t, Options{Control: true})
	for _, c := range controlCalls {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			var body any
			if c.body != nil {
				body = c.body
			}
			if r := h.do(c.method, c.path, "", body); r.status == http.StatusBadRequest {
				t.Errorf("got 400 %s, want the call accepted", r.body)
			}
		})
	}
}

func TestSettingsControlAPI(t *testing.T) {
	h := newHarness(t, Options{Control: true})
	got := h.do("GET", "/_sim/settings", "", nil).json(t)
	if got["tokenTTL"] != "1h0m0s" || got["unauthorizedShape"] != "message" || got["expiresInUnit"] != "seconds" ||
		got["accountCap"] != 5.0 || got["bigQueryLock"] != true || got["plan"] != "pro" || got["credits"] != 100.0 {
		t.Fatalf("GET /_sim/settings: got %v, want the defaults", got)
	}
	for _, method := range []string{"PATCH", "POST"} {
		r := h.do(method, "/_sim/settings", "", map[string]any{"tokenTTL": "90s", "expiresInUnit": "milliseconds", "plan": "free"})
		if m := r.json(t); r.status != http.StatusOK || m["tokenTTL"] != "1m30s" || m["expiresInUnit"] != "milliseconds" || m["plan"] != "free" || m["accountCap"] != 5.0 {
			t.Fatalf("%s /_sim/settings: got %d %s, want the changed keys and the others kept", method, r.status, r.body)
		}
	}
	tok := h.do("POST", "/oauth/token", "", map[string]any{"clientId": "dev-client", "clientSecret": "dev-secret", "userId": "alice"})
	if got := tok.json(t)["expiresIn"]; got != 90000.0 {
		t.Errorf("got expiresIn %v, want 90000", got)
	}
	for key, bad := range map[string]any{
		"tokenTTL": "soon", "unauthorizedShape": "html", "expiresInUnit": "hours", "accountCap": -1,
		"plan": "gold", "credits": -3, "allowedRedirectURLs": []string{"nope"}, "bigQueryLock": "yes",
		"webhookUrl": "ftp://x", "webhookSecret": "whsec_nope", "replyProfile": "minimal", "listLag": "-1s",
	} {
		t.Run(key, func(t *testing.T) {
			r := h.do("PATCH", "/_sim/settings", "", map[string]any{key: bad})
			wantError(t, r, http.StatusBadRequest, typeClientError, "")
			if msg, _ := r.json(t)["message"].(string); !strings.HasPrefix(msg, `"`+key+`"`) {
				t.Errorf("got message %q, want it to start with the key %q", msg, key)
			}
		})
	}
}

func TestCreditsControlAPI(t *testing.T) {
	h := newHarness(t, Options{Control: true})
	r := h.do("POST", "/_sim/credits", "", map[string]any{"credits": 10, "userId": "alice"})
	if m := r.json(t); r.status != http.StatusOK || m["credits"] != 100.0 || m["userCredits"].(map[string]any)["alice"] != 10.0 {
		t.Fatalf("per-user credits: got %d %s, want the organization's 100 and alice's 10", r.status, r.body)
	}
	if r := h.do("POST", "/chat/chat/connections/refresh", h.token("alice"), nil); r.status != http.StatusPaymentRequired {
		t.Errorf("alice's refresh: got %d %s, want 402", r.status, r.body)
	}
	if r := h.do("POST", "/chat/chat/connections/refresh", h.token("bob"), nil); r.status != http.StatusOK {
		t.Errorf("bob's refresh: got %d %s, want 200", r.status, r.body)
	}
	r = h.do("POST", "/_sim/credits", "", map[string]any{"credits": 0})
	if m := r.json(t); m["credits"] != 0.0 || m["userCredits"].(map[string]any)["alice"] != 10.0 {
		t.Errorf("organization credits: got %s, want 0 and alice's 10 kept", r.body)
	}
	if r := h.do("DELETE", "/_sim/credits/alice", "", nil); r.status != http.StatusNoContent {
		t.Errorf("DELETE /_sim/credits/alice: got %d %s, want 204", r.status, r.body)
	}
	wantError(t, h.do("DELETE", "/_sim/credits/alice", "", nil), http.StatusNotFound, typeClientError, "")
	wantError(t, h.do("POST", "/_sim/credits", "", map[string]any{"userId": "alice"}), http.StatusBadRequest, typeClientError, "")
	wantError(t, h.do("POST", "/_sim/credits", "", map[string]any{"credits": -1}), http.StatusBadRequest, typeClientError, "")
}
