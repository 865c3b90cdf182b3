package upstreamsim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// testEpoch is the fixed start of the injected clock.
var testEpoch = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

// fixedClock returns an injected clock frozen at testEpoch.
func fixedClock() func() time.Time { return func() time.Time { return testEpoch } }

// harness is a simulator behind a real HTTP server.
type harness struct {
	t   *testing.T
	sim *Server
	url string
}

func newHarness(t *testing.T, opts Options) *harness {
	t.Helper()
	if opts.Now == nil {
		opts.Now = fixedClock()
	}
	sim := New(opts)
	ts := httptest.NewServer(sim)
	t.Cleanup(ts.Close)
	t.Cleanup(sim.Close) // first: no webhook goes out to a closed receiver
	return &harness{t: t, sim: sim, url: ts.URL}
}

// reply is a received HTTP reply.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("reply body %q is not a JSON object: %v", r.body, err)
	}
	return m
}

// do sends method path with an optional bearer token and JSON body (a
// string is sent as is; anything else is marshalled).
func (h *harness) do(method, path, token string, body any) reply {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, h.url+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return reply{status: res.StatusCode, header: res.Header, body: b}
}

// token mints a token for user with the default credentials.
func (h *harness) token(user string) string {
	h.t.Helper()
	r := h.do("POST", "/oauth/token", "", map[string]any{"clientId": "dev-client", "clientSecret": "dev-secret", "userId": user})
	if r.status != http.StatusOK {
		h.t.Fatalf("token for %s: got status %d, want 200 (body %s)", user, r.status, r.body)
	}
	return r.json(h.t)["accessToken"].(string)
}

// wantError checks status, type and (if non-empty) message of an error reply,
// and that the body has no other fields.
func wantError(t *testing.T, r reply, status int, typ, msg string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("got status %d, want %d (body %s)", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("got Content-Type %q, want application/json", ct)
	}
	m := r.json(t)
	if got, _ := m["type"].(string); got != typ {
		t.Errorf("got type %q, want %q (body %s)", got, typ, r.body)
	}
	if msg != "" {
		if got, _ := m["message"].(string); got != msg {
			t.Errorf("got message %q, want %q", got, msg)
		}
	}
	wantKeys := 2
	if typ == "" {
		wantKeys = 1
	}
	if len(m) != wantKeys {
		t.Errorf("got body fields %v, want only type and message (or message alone for 401)", m)
	}
}

// messageList decodes a stringified-list message.
func messageList(t *testing.T, r reply) []string {
	t.Helper()
	var list []string
	msg, _ := r.json(t)["message"].(string)
	if err := json.Unmarshal([]byte(msg), &list); err != nil {
		t.Fatalf("message %q is not a stringified JSON list: %v", msg, err)
	}
	return list
}

// paymentBody is a valid POST /v2/payments body with the sandbox provider.
func paymentBody(remittance string) map[string]any {
	return map[string]any{
		"paymentInformation": map[string]any{
			"amount": 12.5, "currency": "EUR", "remittanceInformation": remittance,
			"creditorName": "Jane", "creditorAccount": map[string]any{"iban": "FR7630006000011234567890189"},
			"debtorAccount": map[string]any{"iban": "DE89370400440532013000"},
		},
		"providerIds": []string{ProviderSandbox},
		"redirectUrl": "https://app.example.com/payment-done",
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
