package upstreamsim

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/testing/syncbuf"
)

// Neither the request log nor the debug log holds a client secret or a
// token: mints, API calls, failed mints, rotations and connector tokens
// leave only fingerprints.
func TestRequestLogHoldsNoSecret(t *testing.T) {
	const first, second, third, wrong = "first-Secret-9f3kQ", "second-Secret-2mZ", "third-Secret-Lp0", "wrong-Secret-7Yv"
	var logs syncbuf.Buffer
	h := newHarness(t, Options{Control: true, ClientSecret: first,
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	var tokens []string
	call := func(tok string) {
		h.do("GET", "/v2/payments", tok, nil)
		h.do("POST", "/v2/payments", tok, paymentBody("leak check"))
		h.do("POST", "/chat/chat/connections/refresh", tok, nil)
	}

	alice := mintWith(t, h, first, "alice")
	tokens = append(tokens, alice)
	call(alice)
	wantError(t, h.do("POST", "/oauth/token", "", map[string]any{"clientId": "dev-client", "clientSecret": wrong, "userId": "alice"}), 401, "", "")
	h.do("POST", "/oauth/token", "", "clientId=dev-client&clientSecret="+wrong) // not JSON: redacted whole
	h.sim.RotateSecret(second)
	call(alice) // 401 now
	bob := mintWith(t, h, second, "bob")
	tokens = append(tokens, bob)
	h.sim.RotateSecretPurgeFailed(third)
	call(bob) // still works: the purge failed
	carol := mintWith(t, h, third, "carol")
	tokens = append(tokens, carol)
	call(carol)
	conn := h.sim.IssueConnectorToken("dave", []string{scopeMCPRead}, true)
	tokens = append(tokens, conn)
	call(conn)
	req, _ := http.NewRequest("GET", h.url+"/v2/payments", nil)
	req.Header.Set("Cookie", "session="+carol)
	req.Header.Set("Proxy-Authorization", "Bearer "+carol)
	if res, err := http.DefaultClient.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}

	seen := h.sim.Requests()
	viaGo, err := json.Marshal(seen)
	if err != nil {
		t.Fatal(err)
	}
	viaHTTP := string(h.do("GET", "/_sim/requests", "", nil).body)
	places := map[string]string{"Requests()": string(viaGo), "GET /_sim/requests": viaHTTP, "the debug log": logs.String()}
	for place, text := range places {
		for _, secret := range []string{first, second, third, wrong} {
			if strings.Contains(text, secret) {
				t.Errorf("%s holds the client secret %q", place, secret)
			}
		}
		for i, tok := range tokens {
			_, sig, _ := strings.Cut(tok[strings.Index(tok, ".")+1:], ".")
			if strings.Contains(text, tok) || strings.Contains(text, sig) {
				t.Errorf("%s holds token %d (or its signature)", place, i)
			}
		}
	}

	// The scan above looked at a log that has the requests in it.
	if !strings.Contains(logs.String(), `"path":"/v2/payments"`) {
		t.Error("the debug log has no request lines: the scan checked nothing")
	}
	var sawMint, sawCall bool
	for _, rq := range seen {
		if rq.Path == "/oauth/token" && strings.Contains(rq.Body, `"clientSecret":"REDACTED"`) && rq.UserID == "alice" {
			sawMint = true
		}
		if rq.Header.Get("Authorization") == "Bearer "+Fingerprint(bob) && rq.UserID == "bob" {
			sawCall = true
		}
	}
	if !sawMint || !sawCall {
		t.Errorf("got mint recorded %v, bob's call recorded by fingerprint %v; want both", sawMint, sawCall)
	}
}

// A credential sent anywhere but the three credential headers and a
// top-level body key is still kept out of the log: nested in the body,
// under an upper-case key, in the query string or in a header of its own.
func TestRequestLogRedactsCredentialsAnywhere(t *testing.T) {
	const secret = "sup3r-Secr3t-Value-xyz"
	tests := []struct {
		name, method, path, body string
		header                   string // a header of its own carrying the secret
		wantKept                 string // what the log must still show
	}{
		{"nested body key", "POST", "/v2/merchants", `{"name":"Shop","config":{"clientSecret":"` + secret + `"}}`, "", `"name":"Shop"`},
		{"upper-case body key", "POST", "/v2/merchants", `{"name":"Shop","CLIENT_SECRET":"` + secret + `"}`, "", `"CLIENT_SECRET":"REDACTED"`},
		{"upper-case token key", "POST", "/v2/merchants", `{"ACCESS_TOKEN":"` + secret + `"}`, "", `"ACCESS_TOKEN":"REDACTED"`},
		{"escaped key", "POST", "/v2/merchants", `{"clientS\u0065cret":"` + secret + `"}`, "", `"clientSecret":"REDACTED"`},
		{"array of objects", "POST", "/v2/merchants", `[{"refreshToken":"` + secret + `"}]`, "", `"refreshToken":"REDACTED"`},
		{"token request, nested", "POST", "/oauth/token", `{"clientId":"c","creds":{"clientSecret":"` + secret + `"},"userId":"u"}`, "", `"userId":"u"`},
		{"query parameter", "GET", "/v2/payments?limit=3&access_token=" + secret, "", "", "limit=3&access_token=REDACTED"},
		{"escaped query name", "GET", "/v2/payments?client%53ecret=" + secret + "&limit=3", "", "", "client%53ecret=REDACTED&limit=3"},
		{"header of its own", "GET", "/v2/payments", "", "X-Client-Secret", "X-Client-Secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			req, err := http.NewRequest(tt.method, h.url+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			if tt.header != "" {
				req.Header.Set(tt.header, secret)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			log := fmt.Sprintf("%+v", h.sim.Requests())
			if strings.Contains(log, secret) {
				t.Errorf("got log %s, want no %q in it", log, secret)
			}
			if !strings.Contains(log, tt.wantKept) {
				t.Errorf("got log %s, want it to still show %s", log, tt.wantKept)
			}
		})
	}
}

// A body that names no credential is kept byte for byte, even when it has
// JSON escapes that had to be read to be sure.
func TestSeenBodyKeepsHarmlessBodies(t *testing.T) {
	for _, body := range []string{
		`{"paymentInformation":{"remittanceInformation":"a \u003cgift\u003e"},"b":1,"a":2}`,
		`{"remittanceInformation":"a token of thanks","b":1,"a":2}`,
		`not json \u0041`,
	} {
		if got, _ := seenBody([]byte(body), false); got != body {
			t.Errorf("seenBody(%s): got %s, want it kept as sent", body, got)
		}
	}
}

func TestFingerprint(t *testing.T) {
	tests := []struct{ in, want string }{
		{"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.payload.sig", "eyJhbG…(sha256:"},
		{"short-secret", "…(sha256:"},
	}
	for _, tt := range tests {
		got := Fingerprint(tt.in)
		if !strings.HasPrefix(got, tt.want) || !strings.HasSuffix(got, ")") || len(got) != len(tt.want)+9 {
			t.Errorf("Fingerprint(%q): got %q, want %q then 8 hex digits and )", tt.in, got, tt.want)
		}
		if got != Fingerprint(tt.in) || got == Fingerprint(tt.in+"x") {
			t.Errorf("Fingerprint(%q) is not stable and distinct", tt.in)
		}
	}
}

func TestSeenBody(t *testing.T) {
	tests := []struct {
		name, body    string
		tokenRequest  bool
		want, wantUsr string
	}{
		{"payment kept as sent", `{"paymentInformation":{"amount":1}}`, false, `{"paymentInformation":{"amount":1}}`, ""},
		{"token request", `{"clientId":"c","clientSecret":"s","userId":"u"}`, true, `{"clientId":"c","clientSecret":"REDACTED","userId":"u"}`, "u"},
		{"token field anywhere", `{"accessToken":"t","x":1}`, false, `{"accessToken":"REDACTED","x":1}`, ""},
		{"not JSON", `clientSecret=s`, true, "REDACTED", ""},
		{"empty token request", ``, true, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, user := seenBody([]byte(tt.body), tt.tokenRequest)
			if got != tt.want || user != tt.wantUsr {
				t.Errorf("got %q, %q; want %q, %q", got, user, tt.want, tt.wantUsr)
			}
		})
	}
}

// BenchmarkSeenRequest is the request log's redaction on the two hot
// paths: a token request (its body re-encoded) and a Bearer call (its
// token fingerprinted and its subject read).
func BenchmarkSeenRequest(b *testing.B) {
	sim := New(Options{})
	tok := sim.tokens.mint(claims{Sub: "bench", Kind: kindClient}, sim.Now(), time.Hour)
	mint := httptest.NewRequest("POST", "/oauth/token", nil)
	mint.Header.Set("Content-Type", "application/json")
	body := []byte(`{"clientId":"dev-client","clientSecret":"dev-secret","userId":"bench"}`)
	call := httptest.NewRequest("GET", "/v2/payments", nil)
	call.Header.Set("Authorization", "Bearer "+tok)
	b.Run("token request", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			seenRequest(mint, body, testEpoch)
		}
	})
	b.Run("bearer call", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			seenRequest(call, nil, testEpoch)
		}
	})
}
