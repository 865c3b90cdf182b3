package upstreamsim

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

func TestFaults(t *testing.T) {
	tests := []struct {
		name      string
		fault     Fault
		method    string
		path      string
		wantCode  int
		wantBody  string
		wantCT    string
		passedOn  bool // the request reaches the route
		tokenless bool
	}{
		{name: "status with default body", fault: Fault{PathPrefix: "/v2/", Status: 500},
			method: "GET", path: "/v2/payments", wantCode: 500, wantBody: `{"type":"INTERNAL_ERROR","message":"SERVER_ERROR"}`, wantCT: "application/json"},
		{name: "401 default body is message only", fault: Fault{Status: 401},
			method: "GET", path: "/v2/payments", wantCode: 401, wantBody: `{"message":"Unauthorized"}`, wantCT: "application/json"},
		{name: "custom body and content type", fault: Fault{Status: 502, Body: "<html>bad gateway</html>", ContentType: "text/html"},
			method: "GET", path: "/v2/payments", wantCode: 502, wantBody: "<html>bad gateway</html>", wantCT: "text/html"},
		{name: "empty body", fault: Fault{Status: 403, EmptyBody: true},
			method: "GET", path: "/v2/payments", wantCode: 403, wantBody: "", wantCT: ""},
		{name: "gateway plan refusal shape", fault: Fault{Status: 403, Body: `{"message":"NOT_AVAILABLE_ON_PLAN"}`},
			method: "GET", path: "/v2/payments", wantCode: 403, wantBody: `{"message":"NOT_AVAILABLE_ON_PLAN"}`, wantCT: "application/json"},
		{name: "before validation on the token endpoint", fault: Fault{PathPrefix: "/oauth/token", Status: 503}, tokenless: true,
			method: "POST", path: "/oauth/token", wantCode: 503, wantCT: "application/json",
			wantBody: `{"type":"INTERNAL_SERVER_ERROR","message":"Service Unavailable"}`},
		{name: "method must match", fault: Fault{Method: "post", PathPrefix: "/v2/payments", Status: 500},
			method: "GET", path: "/v2/payments", wantCode: 200, passedOn: true},
		{name: "prefix must match", fault: Fault{PathPrefix: "/v2/connections", Status: 500},
			method: "GET", path: "/v2/payments", wantCode: 200, passedOn: true},
		{name: "delay only passes on", fault: Fault{Delay: 5 * time.Millisecond},
			method: "GET", path: "/v2/payments", wantCode: 200, passedOn: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			tok := ""
			if !tt.tokenless {
				tok = h.token("u")
			}
			h.sim.InjectFault(tt.fault)
			r := h.do(tt.method, tt.path, tok, nil)
			if r.status != tt.wantCode {
				t.Fatalf("got %d %s, want %d", r.status, r.body, tt.wantCode)
			}
			if tt.passedOn {
				return
			}
			if string(r.body) != tt.wantBody {
				t.Errorf("got body %q, want %q", r.body, tt.wantBody)
			}
			if ct := r.header.Get("Content-Type"); ct != tt.wantCT {
				t.Errorf("got Content-Type %q, want %q", ct, tt.wantCT)
			}
		})
	}
}

func TestFaultTimesAndClear(t *testing.T) {
	h := newHarness(t, Options{})
	tok := h.token("u")
	h.sim.InjectFault(Fault{PathPrefix: "/v2/payments", Status: 500, Times: 2})
	h.sim.InjectFault(Fault{PathPrefix: "/v2/payments", Status: 502})
	for i, want := range []int{500, 500, 502, 502} {
		if r := h.do("GET", "/v2/payments", tok, nil); r.status != want {
			t.Fatalf("request %d: got %d, want %d", i, r.status, want)
		}
	}
	h.sim.ClearFaults()
	if r := h.do("GET", "/v2/payments", tok, nil); r.status != 200 {
		t.Errorf("after ClearFaults: got %d, want 200", r.status)
	}
}

func TestFaultHangUp(t *testing.T) {
	h := newHarness(t, Options{})
	h.sim.InjectFault(Fault{PathPrefix: "/oauth/token", HangUp: true, Times: 1})
	res, err := http.Post(h.url+"/oauth/token", "application/json", nil)
	if err == nil {
		res.Body.Close()
		t.Fatalf("got status %d, want the connection closed without a reply", res.StatusCode)
	}
	h.token("u") // the next request is served
}

func TestFaultDelayHonoursClientCancel(t *testing.T) {
	h := newHarness(t, Options{})
	h.sim.InjectFault(Fault{Delay: time.Minute, Status: 500})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", h.url+"/v2/payments", nil)
	start := time.Now()
	if res, err := http.DefaultClient.Do(req); err == nil {
		res.Body.Close()
		t.Fatalf("got status %d, want a client timeout", res.StatusCode)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("got %v, want the client timeout to end the request", el)
	}
}

// A fault after acting: the upstream made the payment, then its answer was
// lost (dropped, replaced, or held back).
func TestFaultAfterActing(t *testing.T) {
	tests := []struct {
		name       string
		fault      Fault
		wantStatus int // 0: no answer
	}{
		{"hang-up", Fault{Method: "POST", PathPrefix: "/v2/payments", HangUp: true, AfterActing: true, Times: 1}, 0},
		{"500 instead of the 201", Fault{Method: "POST", PathPrefix: "/v2/payments", Status: 500, AfterActing: true, Times: 1}, 500},
		{"the 201, late", Fault{Method: "POST", PathPrefix: "/v2/payments", Delay: 20 * time.Millisecond, AfterActing: true, Times: 1}, 201},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			tok := h.token("u")
			count := func() int {
				var list struct{ Items []map[string]any }
				_ = json.Unmarshal(h.do("GET", "/v2/payments?limit=500", tok, nil).body, &list)
				return len(list.Items)
			}
			before := count()
			h.sim.InjectFault(tt.fault)
			body, _ := json.Marshal(paymentBody("after acting"))
			req, _ := http.NewRequest("POST", h.url+"/v2/payments", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Type", "application/json")
			res, err := http.DefaultClient.Do(req)
			switch {
			case tt.wantStatus == 0 && err == nil:
				res.Body.Close()
				t.Fatalf("got %d, want no answer", res.StatusCode)
			case tt.wantStatus != 0 && err != nil:
				t.Fatal(err)
			case tt.wantStatus != 0:
				res.Body.Close()
				if res.StatusCode != tt.wantStatus {
					t.Fatalf("got %d, want %d", res.StatusCode, tt.wantStatus)
				}
			}
			if after := count(); after != before+1 {
				t.Fatalf("the upstream holds %d payments, want %d: it acts before the fault", after, before+1)
			}
		})
	}
}
