package upstreamsim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzSeenBody feeds arbitrary token-request bodies to the request log's
// redaction: it never panics, and what it keeps is empty, REDACTED, or a
// JSON object whose secret and token keys, at any depth, all hold REDACTED.
func FuzzSeenBody(f *testing.F) {
	for _, s := range []string{`{"clientId":"c","clientSecret":"s","userId":"u"}`, `clientSecret=s`, ``, `null`, `[1]`,
		`{"ClientSECRET":{"nested":"s"}}`, `{"accessToken":"t"} x`, `{"creds":[{"clientSecret":"s"}]}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		got, _ := seenBody([]byte(body), true)
		if got == "" || got == redacted {
			return
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(got), &m); err != nil {
			t.Fatalf("kept %q, want a JSON object, REDACTED or nothing", got)
		}
		if k, v, ok := unredacted(m); ok {
			t.Fatalf("kept %q: key %q holds %v, want REDACTED", got, k, v)
		}
	})
}

// unredacted finds, at any depth of a decoded JSON value, a key that names
// a secret or token and does not hold REDACTED.
func unredacted(v any) (string, any, bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if l := strings.ToLower(k); (strings.Contains(l, "secret") || strings.Contains(l, "token")) && e != redacted {
				return k, e, true
			}
			if k, e, ok := unredacted(e); ok {
				return k, e, true
			}
		}
	case []any:
		for _, e := range v {
			if k, e, ok := unredacted(e); ok {
				return k, e, true
			}
		}
	}
	return "", nil, false
}

// FuzzSubject feeds arbitrary bearer tokens to subject: it never panics,
// and reads the simulator's own tokens right.
func FuzzSubject(f *testing.F) {
	iss := newTokenIssuer("c", "s")
	f.Add(iss.mint(claims{Sub: "alice", Kind: kindClient}, testEpoch, 0))
	f.Add(jwtHeader + ".e30.")
	f.Add("a.b")
	f.Fuzz(func(t *testing.T, sub string) {
		var want string // sub as the token carries it: JSON makes invalid UTF-8 valid
		b, _ := json.Marshal(sub)
		_ = json.Unmarshal(b, &want)
		if got := subject(iss.mint(claims{Sub: sub, Kind: kindClient}, testEpoch, 0)); got != want {
			t.Fatalf("subject of a token for %q: got %q, want %q", sub, got, want)
		}
		_ = subject(sub)
	})
}

// FuzzDecodeControl feeds arbitrary bodies to a control call: the answer
// is 400 or the call's own, never a panic or a 500.
func FuzzDecodeControl(f *testing.F) {
	for _, s := range []string{`{}`, `{"plan":"free"}`, `{"plan":1}`, `{"x":1}`, `[`, `{"credits":1e400}`, `{"plan":"pro"} {}`} {
		f.Add(s)
	}
	sim := New(Options{Control: true})
	f.Fuzz(func(t *testing.T, body string) {
		rec := httptest.NewRecorder()
		sim.ServeHTTP(rec, httptest.NewRequest("POST", "/_sim/org", strings.NewReader(body)))
		if rec.Code != http.StatusOK && rec.Code != http.StatusBadRequest {
			t.Fatalf("body %q: got %d %s, want 200 or 400", body, rec.Code, rec.Body)
		}
	})
}

// FuzzPatchSettings feeds arbitrary bodies to PATCH /_sim/settings, the
// webhook keys among them: the answer is 200 or 400, never a panic or a
// 500, and never shows the webhook secret it was given.
func FuzzPatchSettings(f *testing.F) {
	for _, s := range []string{`{"webhookUrl":"http://127.0.0.1:1/x"}`, `{"webhookSecret":"` + DefaultWebhookSecret + `"}`,
		`{"webhookSecret":"whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}`, `{"webhookUrl":1}`, `{"webhookSecret":"whsec_"}`, `{}`} {
		f.Add(s)
	}
	sim := New(Options{Control: true})
	f.Cleanup(sim.Close)
	f.Fuzz(func(t *testing.T, body string) {
		rec := httptest.NewRecorder()
		sim.ServeHTTP(rec, httptest.NewRequest("PATCH", "/_sim/settings", strings.NewReader(body)))
		if rec.Code != http.StatusOK && rec.Code != http.StatusBadRequest {
			t.Fatalf("body %q: got %d %s, want 200 or 400", body, rec.Code, rec.Body)
		}
		var in struct {
			WebhookSecret string `json:"webhookSecret"`
		}
		_ = json.Unmarshal([]byte(body), &in)
		if secret := strings.TrimPrefix(in.WebhookSecret, "whsec_"); len(secret) >= 16 && bytes.Contains(rec.Body.Bytes(), []byte(secret)) {
			t.Fatalf("body %q: the answer %s shows the secret", body, rec.Body)
		}
	})
}
