package upstreamsim

import (
	"encoding/json"
	"net/http"
	"testing"
)

func TestFaultsControlAPI(t *testing.T) {
	h := newHarness(t, Options{Control: true})
	r := h.do("POST", "/_sim/faults", "", map[string]any{"pathPrefix": "/v2/", "userId": "alice", "status": 503, "delay": "2s", "times": 3})
	if r.status != http.StatusCreated {
		t.Fatalf("POST /_sim/faults: got %d %s, want 201", r.status, r.body)
	}
	id, _ := r.json(t)["id"].(string)
	if id == "" {
		t.Fatalf("POST /_sim/faults: got %s, want the fault with its id", r.body)
	}
	h.do("POST", "/_sim/faults", "", map[string]any{"method": "POST", "pathPrefix": "/oauth/token", "hangUp": true})

	var list []map[string]any
	if err := json.Unmarshal(h.do("GET", "/_sim/faults", "", nil).body, &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0]["id"] != id || list[0]["userId"] != "alice" || list[0]["delay"] != "2s" ||
		list[0]["times"] != 3.0 || list[0]["status"] != 503.0 || list[1]["method"] != "POST" || list[1]["hangUp"] != true {
		t.Fatalf("GET /_sim/faults: got %v, want both faults with what they match", list)
	}
	if r := h.do("DELETE", "/_sim/faults/"+id, "", nil); r.status != http.StatusNoContent {
		t.Fatalf("DELETE /_sim/faults/%s: got %d %s, want 204", id, r.status, r.body)
	}
	wantError(t, h.do("DELETE", "/_sim/faults/"+id, "", nil), http.StatusNotFound, typeClientError, "")
	if n := len(h.sim.Faults()); n != 1 {
		t.Fatalf("after deleting one: got %d faults, want 1", n)
	}
	if r := h.do("DELETE", "/_sim/faults", "", nil); r.status != http.StatusNoContent || len(h.sim.Faults()) != 0 {
		t.Fatalf("DELETE /_sim/faults: got %d and %d faults left, want 204 and none", r.status, len(h.sim.Faults()))
	}
	wantError(t, h.do("POST", "/_sim/faults", "", map[string]any{"id": "f1", "status": 500}), http.StatusBadRequest, typeClientError, "")
}
