package upstreamsim

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestTokenValidation(t *testing.T) {
	h := newHarness(t, Options{})
	tests := []struct {
		name        string
		body        string
		contentType string
		want        []string
	}{
		{"missing clientSecret", `{"clientId":"dev-client","userId":"u1"}`, "application/json",
			[]string{`"clientSecret" is required`}},
		{"missing userId", `{"clientId":"dev-client","clientSecret":"dev-secret"}`, "application/json",
			[]string{`"userId" is required`}},
		{"every field missing", `{}`, "application/json",
			[]string{`"clientId" is required`, `"clientSecret" is required`, `"userId" is required`}},
		{"empty userId", `{"clientId":"dev-client","clientSecret":"dev-secret","userId":""}`, "application/json",
			[]string{`"userId" is not allowed to be empty`}},
		{"non-string clientId", `{"clientId":7,"clientSecret":"dev-secret","userId":"u1"}`, "application/json",
			[]string{`"clientId" must be a string`}},
		{"null clientSecret", `{"clientId":"dev-client","clientSecret":null,"userId":"u1"}`, "application/json",
			[]string{`"clientSecret" is required`}},
		{"empty body", ``, "application/json",
			[]string{`"clientId" is required`, `"clientSecret" is required`, `"userId" is required`}},
		{"form body is not JSON", `clientId=dev-client&clientSecret=dev-secret&userId=u1`, "application/x-www-form-urlencoded",
			[]string{`"clientId" is required`, `"clientSecret" is required`, `"userId" is required`}},
		{"malformed JSON", `{"clientId":`, "application/json", nil},
		{"JSON array", `[1,2]`, "application/json", []string{`"value" must be of type object`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", h.url+"/oauth/token", strings.NewReader(tt.body))
			req.Header.Set("Content-Type", tt.contentType)
			r := send(t, req)
			wantError(t, r, http.StatusBadRequest, typeClientError, "")
			got := messageList(t, r)
			if tt.want != nil && !slices.Equal(got, tt.want) {
				t.Errorf("got problems %q, want %q", got, tt.want)
			}
			if len(got) == 0 {
				t.Errorf("got an empty problem list, want at least one problem")
			}
		})
	}
	if n := h.sim.TotalMints(); n != 0 {
		t.Errorf("got %d mints after failed exchanges, want 0", n)
	}
}

func send(t *testing.T, req *http.Request) reply {
	t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{status: res.StatusCode, header: res.Header, body: b}
}

func TestToken401Shapes(t *testing.T) {
	tests := []struct {
		name  string
		shape string
		body  map[string]any
	}{
		{"wrong secret, message shape", Shape401Message, map[string]any{"clientId": "dev-client", "clientSecret": "nope", "userId": "u1"}},
		{"wrong client id, message shape", "", map[string]any{"clientId": "other", "clientSecret": "dev-secret", "userId": "u1"}},
		{"wrong secret, typed shape", Shape401Typed, map[string]any{"clientId": "dev-client", "clientSecret": "nope", "userId": "u1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Options{Unauthorized401Shape: tt.shape})
			r := h.do("POST", "/oauth/token", "", tt.body)
			if tt.shape != Shape401Typed {
				wantError(t, r, http.StatusUnauthorized, "", "")
				return
			}
			wantError(t, r, http.StatusUnauthorized, typeClientError, "")
			var inner map[string]string
			if err := json.Unmarshal([]byte(r.json(t)["message"].(string)), &inner); err != nil {
				t.Fatalf("typed 401 message is not JSON: %v", err)
			}
			if inner["error"] != "access_denied" || inner["error_description"] != "Unauthorized" {
				t.Errorf("got inner message %v, want access_denied/Unauthorized", inner)
			}
		})
	}
}

// jwtParts decodes a token's header and claims.
func jwtParts(t *testing.T, tok string) (map[string]any, map[string]any) {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("token has %d parts, want 3", len(parts))
	}
	dec := func(s string) map[string]any {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	return dec(parts[0]), dec(parts[1])
}

func TestTokenSuccess(t *testing.T) {
	tests := []struct {
		name          string
		ttl           time.Duration
		unit          string
		wantExpiresIn float64
	}{
		{"default seconds", 0, "", 3600},
		{"seconds", 10 * time.Minute, UnitSeconds, 600},
		{"milliseconds", 10 * time.Minute, UnitMilliseconds, 600000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Options{TokenTTL: tt.ttl, ExpiresInUnit: tt.unit})
			r := h.do("POST", "/oauth/token", "", map[string]any{"clientId": "dev-client", "clientSecret": "dev-secret", "userId": "alice"})
			if r.status != http.StatusOK {
				t.Fatalf("got status %d, want 200", r.status)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("got Content-Type %q, want application/json", ct)
			}
			m := r.json(t)
			if m["tokenType"] != "Bearer" {
				t.Errorf("got tokenType %v, want Bearer", m["tokenType"])
			}
			if m["expiresIn"] != tt.wantExpiresIn {
				t.Errorf("got expiresIn %v, want %v", m["expiresIn"], tt.wantExpiresIn)
			}
			hdr, cl := jwtParts(t, m["accessToken"].(string))
			if hdr["alg"] != "HS256" {
				t.Errorf("got alg %v, want HS256", hdr["alg"])
			}
			if cl["sub"] != "alice" {
				t.Errorf("got sub %v, want alice", cl["sub"])
			}
			ttl := tt.ttl
			if ttl == 0 {
				ttl = time.Hour
			}
			if cl["iat"] != float64(testEpoch.Unix()) || cl["exp"] != float64(testEpoch.Add(ttl).Unix()) {
				t.Errorf("got iat %v exp %v, want %d and %d", cl["iat"], cl["exp"], testEpoch.Unix(), testEpoch.Add(ttl).Unix())
			}
			if s, _ := cl["jti"].(string); s == "" {
				t.Errorf("got jti %v, want a non-empty string", cl["jti"])
			}
			if _, ok := cl["sgen"]; !ok {
				t.Errorf("got claims %v, want a secret generation claim sgen", cl)
			}
			if got := h.sim.Mints("alice"); got != 1 {
				t.Errorf("got %d mints for alice, want 1", got)
			}
		})
	}
}

func TestTokenJTIUnique(t *testing.T) {
	h := newHarness(t, Options{})
	a, b := h.token("alice"), h.token("alice")
	if a == b {
		t.Fatal("got the same token twice, want distinct jti")
	}
	if got := h.sim.Mints("alice"); got != 2 {
		t.Errorf("got %d mints, want 2", got)
	}
}

func TestBearerRejected(t *testing.T) {
	h := newHarness(t, Options{})
	good := h.token("alice")
	other := newHarness(t, Options{}).token("alice")
	parts := strings.Split(good, ".")
	forged := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"bob","exp":9999999999,"kind":"client"}`)) + "." + parts[2]
	tests := []struct {
		name   string
		header string
	}{
		{"missing header", ""},
		{"basic scheme", "Basic ZGV2OmRldg=="},
		{"bearer without token", "Bearer "},
		{"not a JWT", "Bearer abc"},
		{"two parts", "Bearer a.b"},
		{"forged claims", "Bearer " + forged},
		{"signed by another simulator", "Bearer " + other},
		{"alg none", "Bearer " + base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + "." + parts[1] + "."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", h.url+"/v2/payments", nil)
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			wantError(t, send(t, req), http.StatusUnauthorized, "", "")
		})
	}
	t.Run("lowercase bearer scheme accepted", func(t *testing.T) {
		req, _ := http.NewRequest("GET", h.url+"/v2/payments", nil)
		req.Header.Set("Authorization", "bearer "+good)
		if r := send(t, req); r.status != http.StatusOK {
			t.Errorf("got status %d, want 200", r.status)
		}
	})
}

func TestTokenExpiry(t *testing.T) {
	h := newHarness(t, Options{TokenTTL: 10 * time.Minute})
	tok := h.token("alice")
	steps := []struct {
		advance time.Duration
		want    int
	}{
		{0, http.StatusOK},
		{10*time.Minute - time.Second, http.StatusOK},
		{time.Second, http.StatusUnauthorized},
		{time.Hour, http.StatusUnauthorized},
	}
	for i, st := range steps {
		h.sim.Advance(st.advance)
		r := h.do("GET", "/v2/payments", tok, nil)
		if r.status != st.want {
			t.Fatalf("step %d: got status %d, want %d", i, r.status, st.want)
		}
		if st.want == http.StatusUnauthorized {
			wantError(t, r, http.StatusUnauthorized, "", "token expired")
		}
	}
	if r := h.do("GET", "/v2/payments", h.token("alice"), nil); r.status != http.StatusOK {
		t.Errorf("fresh token after expiry: got status %d, want 200", r.status)
	}
}

func TestSecretRotation(t *testing.T) {
	h := newHarness(t, Options{})
	old := h.token("alice")
	h.sim.RotateSecret("new-secret")

	r := h.do("POST", "/oauth/token", "", map[string]any{"clientId": "dev-client", "clientSecret": "dev-secret", "userId": "alice"})
	wantError(t, r, http.StatusUnauthorized, "", "")
	r = h.do("GET", "/v2/payments", old, nil)
	wantError(t, r, http.StatusUnauthorized, "", "")

	r = h.do("POST", "/oauth/token", "", map[string]any{"clientId": "dev-client", "clientSecret": "new-secret", "userId": "alice"})
	if r.status != http.StatusOK {
		t.Fatalf("new secret: got status %d, want 200", r.status)
	}
	fresh := r.json(t)["accessToken"].(string)
	if r := h.do("GET", "/v2/payments", fresh, nil); r.status != http.StatusOK {
		t.Errorf("token under new secret: got status %d, want 200", r.status)
	}
	h.sim.RotateSecret("new-secret") // same secret again: no rotation
	if r := h.do("GET", "/v2/payments", fresh, nil); r.status != http.StatusOK {
		t.Errorf("after no-op rotation: got status %d, want 200", r.status)
	}
}

func TestRevokeUser(t *testing.T) {
	h := newHarness(t, Options{})
	alice, bob := h.token("alice"), h.token("bob")
	conn := h.sim.IssueConnectorToken("alice", []string{scopeMCPRead}, true)
	h.sim.RevokeUser("alice")
	for name, tok := range map[string]string{"client token": alice, "connector token": conn} {
		t.Run(name, func(t *testing.T) {
			wantError(t, h.do("GET", "/v2/payments", tok, nil), http.StatusUnauthorized, "", "token revoked")
		})
	}
	if r := h.do("GET", "/v2/payments", bob, nil); r.status != http.StatusOK {
		t.Errorf("other user: got status %d, want 200", r.status)
	}
	if r := h.do("GET", "/v2/payments", h.token("alice"), nil); r.status != http.StatusOK {
		t.Errorf("new token after revocation: got status %d, want 200", r.status)
	}
}

func TestTokenIsPerUser(t *testing.T) {
	h := newHarness(t, Options{})
	alice, bob := h.token("alice"), h.token("bob")
	r := h.do("POST", "/v2/payments", alice, paymentBody("for alice"))
	if r.status != http.StatusCreated {
		t.Fatalf("create: got status %d, want 201 (%s)", r.status, r.body)
	}
	id := r.json(t)["id"].(string)
	if r := h.do("GET", "/v2/payments/"+id, alice, nil); r.status != http.StatusOK {
		t.Errorf("owner: got status %d, want 200", r.status)
	}
	wantError(t, h.do("GET", "/v2/payments/"+id, bob, nil), http.StatusNotFound, typeClientError, "")
}

func TestConcurrentMints(t *testing.T) {
	h := newHarness(t, Options{})
	const n, users = 1000, 10
	tokens := make([]string, n)
	errs := make(chan string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			body := `{"clientId":"dev-client","clientSecret":"dev-secret","userId":"user-` + string(rune('a'+i%users)) + `"}`
			res, err := http.Post(h.url+"/oauth/token", "application/json", strings.NewReader(body))
			if err != nil {
				errs <- err.Error()
				return
			}
			defer res.Body.Close()
			var m map[string]any
			if err := json.NewDecoder(res.Body).Decode(&m); err != nil || res.StatusCode != http.StatusOK {
				errs <- res.Status
				return
			}
			tokens[i] = m["accessToken"].(string)
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatalf("concurrent mint failed: %s", e)
	}
	if got := h.sim.TotalMints(); got != n {
		t.Errorf("got %d total mints, want %d", got, n)
	}
	if got := h.sim.Mints("user-a"); got != n/users {
		t.Errorf("got %d mints for user-a, want %d", got, n/users)
	}
	slices.Sort(tokens)
	if len(slices.Compact(tokens)) != n {
		t.Errorf("got duplicate tokens, want %d distinct", n)
	}
}

// A token request checked against a secret that a rotation replaces before
// the token is signed must not get the new generation: a token minted with
// the old secret would then outlive the rotation. Minters race a rotator
// that swaps two secrets; generation g holds secret a when g is even, so a
// token minted with a must carry an even generation.
func TestMintRacingRotationKeepsTheCheckedGeneration(t *testing.T) {
	const a, b = "secret-a", "secret-b"
	iss := newTokenIssuer("c", a)
	done := make(chan struct{})
	var wg sync.WaitGroup
	var bad atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				tok, ok := iss.mintClient("c", a, "u", testEpoch, time.Hour)
				if !ok {
					continue
				}
				cl := decodeClaims(t, tok)
				if cl.Sgen%2 != 0 {
					bad.Add(1)
				}
			}
		}()
	}
	for i := range 20000 {
		iss.rotate([]string{b, a}[i%2], false)
	}
	close(done)
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Errorf("got %d tokens minted with secret a under a generation of secret b, want none", n)
	}
}

// decodeClaims reads a token's claims without verifying it.
func decodeClaims(t *testing.T, tok string) claims {
	t.Helper()
	parts := strings.Split(tok, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c claims
	if err := json.Unmarshal(payload, &c); err != nil {
		t.Fatal(err)
	}
	return c
}
