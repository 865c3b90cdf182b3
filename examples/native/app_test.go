package main

import (
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeBFF answers as the BFF's wire format says (docs/native-apps.md),
// checking every proof as a server would, and records what it saw. Its
// handlers are set per test.
type fakeBFF struct {
	t      *testing.T
	srv    *httptest.Server
	routes map[string]func(w http.ResponseWriter, r *http.Request, body []byte, p checkedProof)

	mu   sync.Mutex
	jkt  string     // the key the session was bound to
	seen []recorded // every request, in order
}

type recorded struct {
	method, path string
	header       http.Header
	body         []byte
	proof        checkedProof
}

const testToken = "session-token-0123456789"

func newFakeBFF(t *testing.T) *fakeBFF {
	f := &fakeBFF{t: t, routes: map[string]func(http.ResponseWriter, *http.Request, []byte, checkedProof){}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	login := func(w http.ResponseWriter, r *http.Request, body []byte, p checkedProof) {
		if _, ok := p.claims["ath"]; ok || r.Header.Get("Authorization") != "" {
			f.t.Errorf("a login request carries a token or an ath")
		}
		sum, _ := p.jwk.Thumbprint(crypto.SHA256)
		f.mu.Lock()
		f.jkt = base64.RawURLEncoding.EncodeToString(sum)
		f.mu.Unlock()
		writeJSON(w, 200, map[string]any{"userId": "alice", "sessionToken": testToken, "expiresAt": time.Now().Add(time.Hour), "tokenType": "DPoP"})
	}
	f.routes["POST /auth/dev/login"] = login
	f.routes["GET /auth/session"] = func(w http.ResponseWriter, r *http.Request, _ []byte, p checkedProof) {
		if f.bound(w, r, p) {
			writeJSON(w, 200, map[string]any{"userId": "alice", "expiresAt": time.Now().Add(time.Hour)})
		}
	}
	return f
}

func (f *fakeBFF) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var p checkedProof
	if r.URL.Path == "/auth/login" { // the browser's request: no proof
		if r.Header.Get("DPoP") != "" || r.Header.Get("Authorization") != "" {
			f.t.Errorf("the login page was asked for with a proof or a token")
		}
	} else {
		var err error
		if p, err = verifyProof(r.Header.Get("DPoP"), r.Method, f.srv.URL+r.URL.Path); err != nil {
			f.t.Errorf("%s %s: %v", r.Method, r.URL.Path, err)
			w.Header().Set("WWW-Authenticate", `DPoP error="invalid_dpop_proof"`)
			problem(w, 401, "SESSION_REQUIRED", "bad proof", "login")
			return
		}
	}
	f.mu.Lock()
	f.seen = append(f.seen, recorded{r.Method, r.URL.RequestURI(), r.Header.Clone(), body, p})
	f.mu.Unlock()
	h := f.routes[r.Method+" "+r.URL.Path]
	if h == nil {
		problem(w, 404, "ROUTE_NOT_FOUND", "no such route", "")
		return
	}
	h(w, r, body, p)
}

// bound checks a request as the BFF checks a bound session's: the token as
// DPoP, the proof's ath its hash, the proof's key the one bound at login.
func (f *fakeBFF) bound(w http.ResponseWriter, r *http.Request, p checkedProof) bool {
	f.mu.Lock()
	jkt := f.jkt
	f.mu.Unlock()
	sum, _ := p.jwk.Thumbprint(crypto.SHA256)
	if r.Header.Get("Authorization") != "DPoP "+testToken || p.claims["ath"] != ath(testToken) || base64.RawURLEncoding.EncodeToString(sum) != jkt {
		f.t.Errorf("%s %s: Authorization %q, ath %v, key bound %v; want the bound session", r.Method, r.URL.Path,
			r.Header.Get("Authorization"), p.claims["ath"], base64.RawURLEncoding.EncodeToString(sum) == jkt)
		w.Header().Set("WWW-Authenticate", `DPoP error="invalid_token"`)
		problem(w, 401, "SESSION_REQUIRED", "no session", "login")
		return false
	}
	return true
}

func (f *fakeBFF) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.seen...)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func problem(w http.ResponseWriter, status int, code, detail, action string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "urn:bff:problem:" + code, "title": code, "status": status,
		"code": code, "detail": detail, "action": action, "retryable": false, "requestId": "req-1"})
}

// runApp runs one command of the app against base with its state in dir.
func runApp(t *testing.T, base, dir string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	return runWith(t, base, dir, nil, args...)
}

// runWith is runApp with a change to the app before the command runs.
func runWith(t *testing.T, base, dir string, change func(*app), args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	getenv := func(string) string { return "" }
	a, cmd, err := newApp(append([]string{"-bff", base, "-dir", dir}, args...), getenv, &out, &errOut)
	if err == nil {
		a.retryWait = func(int) time.Duration { return 0 } // the tests move no clock; a repeat need not wait
		if change != nil {
			change(a)
		}
		err = a.exec(context.Background(), cmd)
	}
	return out.String(), errOut.String(), err
}

func mustRun(t *testing.T, base, dir string, args ...string) string {
	t.Helper()
	out, errOut, err := runApp(t, base, dir, args...)
	if err != nil {
		t.Fatalf("native %s: %v\n%s", strings.Join(args, " "), err, errOut)
	}
	return out
}

func TestDevLoginBindsTheSessionToTheKey(t *testing.T) {
	f := newFakeBFF(t)
	f.routes["GET /api/v2/data/accounts"] = func(w http.ResponseWriter, r *http.Request, _ []byte, p checkedProof) {
		if f.bound(w, r, p) {
			writeJSON(w, 200, map[string]any{"items": []any{}})
		}
	}
	dir := t.TempDir()
	out := mustRun(t, f.srv.URL, dir, "login", "-dev-user", "alice")
	if !strings.Contains(out, "logged in as alice: tokenType DPoP, key "+f.jkt) {
		t.Fatalf("login said %q, want alice, DPoP and the key %s", out, f.jkt)
	}
	s, err := loadSession(filepath.Join(dir, sessionFile))
	if err != nil || s.Token != testToken || !s.bound() || s.JKT != f.jkt || s.BFF != f.srv.URL {
		t.Fatalf("saved session %+v (%v), want the token bound to %s for %s", s, err, f.jkt, f.srv.URL)
	}
	if strings.Contains(out, testToken) {
		t.Fatal("login printed the session token")
	}
	if out := mustRun(t, f.srv.URL, dir, "call", "/api/v2/data/accounts?limit=5"); strings.TrimSpace(out) != `{"items":[]}` {
		t.Fatalf("call printed %q", out)
	}
	got := f.requests()
	if len(got) != 3 || got[2].path != "/api/v2/data/accounts?limit=5" {
		t.Fatalf("requests %v, want the login, its session check and the call", got)
	}
}

// A nonce the BFF asks for is sent with the request once more, and every
// later proof carries the newest nonce the BFF sent.
func TestNonceIsFollowed(t *testing.T) {
	for _, tc := range []struct {
		name string
		ask  func(w http.ResponseWriter, nonce string)
	}{
		{"401 and WWW-Authenticate (a resource)", func(w http.ResponseWriter, nonce string) {
			w.Header().Set("WWW-Authenticate", `DPoP error="use_dpop_nonce", error_description="Resource server requires nonce in DPoP proof"`)
			w.Header().Set("DPoP-Nonce", nonce)
			problem(w, 401, "SESSION_REQUIRED", "a nonce is needed", "login")
		}},
		{"400 use_dpop_nonce (a token endpoint)", func(w http.ResponseWriter, nonce string) {
			w.Header().Set("DPoP-Nonce", nonce)
			writeJSON(w, 400, map[string]string{"error": "use_dpop_nonce"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeBFF(t)
			var mu sync.Mutex
			n := 0
			current := "nonce-0"
			wrap := func(h func(http.ResponseWriter, *http.Request, []byte, checkedProof)) func(http.ResponseWriter, *http.Request, []byte, checkedProof) {
				return func(w http.ResponseWriter, r *http.Request, b []byte, p checkedProof) {
					mu.Lock()
					defer mu.Unlock()
					if p.claims["nonce"] != current {
						tc.ask(w, current)
						return
					}
					n++
					current = fmt.Sprintf("nonce-%d", n) // a new nonce with every answer
					w.Header().Set("DPoP-Nonce", current)
					h(w, r, b, p)
				}
			}
			for k, h := range f.routes {
				f.routes[k] = wrap(h)
			}
			f.routes["GET /bff/payments"] = wrap(func(w http.ResponseWriter, r *http.Request, _ []byte, p checkedProof) {
				if f.bound(w, r, p) {
					writeJSON(w, 200, map[string]any{"items": []any{}})
				}
			})
			dir := t.TempDir()
			mustRun(t, f.srv.URL, dir, "login", "-dev-user", "alice")
			got := f.requests()
			var nonces []any
			for _, r := range got {
				nonces = append(nonces, r.proof.claims["nonce"])
			}
			// The login without a nonce, asked for one, sent again with it;
			// the session check with the nonce of the login's answer.
			if fmt.Sprint(nonces) != "[<nil> nonce-0 nonce-1]" {
				t.Fatalf("the proofs' nonces %v, want [<nil> nonce-0 nonce-1]", nonces)
			}
			if got[0].proof.claims["jti"] == got[1].proof.claims["jti"] {
				t.Fatal("the request sent again has the same jti")
			}
		})
	}
}

// A BFF that asks for a nonce again after it got one is not asked a third
// time: its answer is the error.
func TestNonceIsRetriedOnce(t *testing.T) {
	f := newFakeBFF(t)
	f.routes["POST /auth/dev/login"] = func(w http.ResponseWriter, _ *http.Request, _ []byte, _ checkedProof) {
		w.Header().Set("WWW-Authenticate", `DPoP error="use_dpop_nonce"`)
		w.Header().Set("DPoP-Nonce", random(8))
		problem(w, 401, "SESSION_REQUIRED", "a nonce is needed", "login")
	}
	_, _, err := runApp(t, f.srv.URL, t.TempDir(), "login", "-dev-user", "alice")
	if err == nil || !strings.Contains(err.Error(), "401 SESSION_REQUIRED: a nonce is needed (DPoP: use_dpop_nonce)") {
		t.Fatalf("got %v, want the BFF's problem", err)
	}
	if n := len(f.requests()); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
}

// loggedIn is a fake BFF with a session already made by the dev login.
func loggedIn(t *testing.T) (*fakeBFF, string) {
	f := newFakeBFF(t)
	dir := t.TempDir()
	mustRun(t, f.srv.URL, dir, "login", "-dev-user", "alice")
	return f, dir
}

// A payment whose answer is lost is sent again with the same key and body
// and a new proof; the BFF's replay is the answer.
func TestPayRepeatsALostAnswerWithTheSameKey(t *testing.T) {
	f, dir := loggedIn(t)
	var mu sync.Mutex
	posts := 0
	f.routes["POST /api/v2/payments"] = func(w http.ResponseWriter, r *http.Request, _ []byte, p checkedProof) {
		if !f.bound(w, r, p) {
			return
		}
		mu.Lock()
		posts++
		first := posts == 1
		mu.Unlock()
		if first { // the answer is lost: the connection ends without one
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			conn.Close()
			return
		}
		w.Header().Set("Idempotent-Replayed", "true")
		writeJSON(w, 201, map[string]string{"id": "01PAY", "payUrl": "http://bank/consent/01PAY"})
	}
	out, errOut, err := runApp(t, f.srv.URL, dir, "pay", "-remittance", "lost answer", "12.50", "ILS")
	if err != nil {
		t.Fatalf("pay: %v\n%s", err, errOut)
	}
	var pays []recorded
	for _, r := range f.requests() {
		if r.method == "POST" && r.path == "/api/v2/payments" {
			pays = append(pays, r)
		}
	}
	if len(pays) != 2 {
		t.Fatalf("%d payment requests, want 2", len(pays))
	}
	key := pays[0].header.Get("Idempotency-Key")
	if key == "" || pays[1].header.Get("Idempotency-Key") != key || !bytes.Equal(pays[0].body, pays[1].body) {
		t.Fatalf("keys %q %q, bodies %s %s: want the same key and body", key, pays[1].header.Get("Idempotency-Key"), pays[0].body, pays[1].body)
	}
	if pays[0].proof.claims["jti"] == pays[1].proof.claims["jti"] {
		t.Fatal("the repeat reused the proof's jti")
	}
	var body struct {
		PaymentInformation struct {
			Amount          json.Number
			Currency        string
			CreditorAccount struct{ IBAN string }
		}
		ProviderIDs []string
	}
	if err := json.Unmarshal(pays[0].body, &body); err != nil || body.PaymentInformation.Amount != "12.50" || body.PaymentInformation.Currency != "ILS" ||
		body.PaymentInformation.CreditorAccount.IBAN == "" || len(body.ProviderIDs) != 1 {
		t.Fatalf("payment body %s (%v)", pays[0].body, err)
	}
	if want := "paid status=201 key=" + key + " id=01PAY replayed=true"; !strings.HasPrefix(out, want) {
		t.Fatalf("pay said %q, want %q…", out, want)
	}
	if !strings.Contains(errOut, "paying with Idempotency-Key "+key) || !strings.Contains(errOut, "sending it again with the same Idempotency-Key") {
		t.Fatalf("pay's stderr %q: want the key before the send and the repeat said", errOut)
	}
}

func TestPayAnswers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answers []func(w http.ResponseWriter)
		posts   int
		wantErr string // "" for a payment made
	}{
		{"in progress, then made", []func(http.ResponseWriter){
			func(w http.ResponseWriter) {
				w.Header().Set("Retry-After", "0")
				problem(w, 409, "IDEMPOTENCY_IN_PROGRESS", "the first request with this key is still running", "retry_later")
			},
			func(w http.ResponseWriter) { writeJSON(w, 201, map[string]string{"id": "01PAY"}) },
		}, 2, ""},
		// Never a new key, never a blind resend: the first may have paid.
		{"outcome unknown", []func(http.ResponseWriter){
			func(w http.ResponseWriter) {
				problem(w, 502, "PAYMENT_OUTCOME_UNKNOWN", "the upstream may or may not have acted", "check_status")
			},
		}, 1, "502 PAYMENT_OUTCOME_UNKNOWN: the upstream may or may not have acted [action check_status]"},
		{"refused", []func(http.ResponseWriter){
			func(w http.ResponseWriter) {
				problem(w, 400, "VALIDATION_ERROR", "paymentInformation.amount is required", "fix_request")
			},
		}, 1, "400 VALIDATION_ERROR: paymentInformation.amount is required [action fix_request] [request req-1]"},
		{"never answered", []func(http.ResponseWriter){
			func(w http.ResponseWriter) { conn, _, _ := w.(http.Hijacker).Hijack(); conn.Close() },
		}, maxPayAttempts, "no answer after 4 tries: run pay again with -key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, dir := loggedIn(t)
			var mu sync.Mutex
			n := 0
			f.routes["POST /api/v2/payments"] = func(w http.ResponseWriter, _ *http.Request, _ []byte, _ checkedProof) {
				mu.Lock()
				i := min(n, len(tc.answers)-1)
				n++
				mu.Unlock()
				tc.answers[i](w)
			}
			_, _, err := runApp(t, f.srv.URL, dir, "pay", "5", "EUR")
			mu.Lock()
			defer mu.Unlock()
			if tc.wantErr == "" && err != nil {
				t.Fatalf("pay: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("pay: got %v, want an error with %q", err, tc.wantErr)
			}
			if n != tc.posts {
				t.Fatalf("%d payment requests, want %d", n, tc.posts)
			}
		})
	}
}

// A session saved for another key (the key file lost and made anew) or
// another BFF is not sent: the app says to log in again.
func TestSavedSessionIsCheckedBeforeItIsSent(t *testing.T) {
	f, dir := loggedIn(t)
	before := len(f.requests())
	if err := os.Remove(filepath.Join(dir, keyFile)); err != nil {
		t.Fatal(err)
	}
	_, _, err := runApp(t, f.srv.URL, dir, "payments")
	if err == nil || !strings.Contains(err.Error(), "bound to another key") {
		t.Fatalf("got %v, want the session refused for its key", err)
	}
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	if _, _, err := runApp(t, other.URL, dir, "payments"); err == nil || !strings.Contains(err.Error(), "the saved session is for "+f.srv.URL) {
		t.Fatalf("got %v, want the session refused for another BFF", err)
	}
	if _, _, err := runApp(t, f.srv.URL, dir, "call", "//evil.example/steal"); err == nil {
		t.Fatal("a path naming another host was sent")
	}
	if n := len(f.requests()); n != before {
		t.Fatalf("%d requests reached the BFF, want none", n-before)
	}
}

// The stream's opening request carries the proof; a stream that ends is
// opened again with a new proof and the last event's id.
func TestEventsReopenAfterTheLastEvent(t *testing.T) {
	f, dir := loggedIn(t)
	var mu sync.Mutex
	opens := 0
	f.routes["GET /bff/events"] = func(w http.ResponseWriter, r *http.Request, _ []byte, p checkedProof) {
		if !f.bound(w, r, p) {
			return
		}
		mu.Lock()
		opens++
		first := opens == 1
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		if first {
			fmt.Fprint(w, ": keep-alive\n\nid: 7\nevent: payment\ndata: {\"key\":\"k1\",\"state\":\"done\"}\n\nretry: 10\n\n")
			return // the instance shuts down
		}
		if got := r.Header.Get("Last-Event-ID"); got != "7" {
			t.Errorf("the stream reopened with Last-Event-ID %q, want 7", got)
		}
		fmt.Fprint(w, "id: 8\nevent: payment\ndata: {\"key\":\"k1\",\n")
		fmt.Fprint(w, "data: \"paymentStatus\":\"ACSC\"}\n\n")
	}
	out, errOut, err := runApp(t, f.srv.URL, dir, "events", "-n", "2")
	if err != nil {
		t.Fatalf("events: %v\n%s", err, errOut)
	}
	want := "event payment id=7 {\"key\":\"k1\",\"state\":\"done\"}\nevent payment id=8 {\"key\":\"k1\",\n\"paymentStatus\":\"ACSC\"}\n"
	if out != want {
		t.Fatalf("events printed\n%s\nwant\n%s", out, want)
	}
	var jtis []any
	for _, r := range f.requests() {
		if r.path == "/bff/events" {
			jtis = append(jtis, r.proof.claims["jti"])
		}
	}
	if len(jtis) != 2 || jtis[0] == jtis[1] {
		t.Fatalf("the stream's proofs' jtis %v: want two opens with two proofs", jtis)
	}
}

func TestLogoutEndsTheSessionAndForgetsIt(t *testing.T) {
	f, dir := loggedIn(t)
	f.routes["POST /auth/logout"] = func(w http.ResponseWriter, r *http.Request, _ []byte, p checkedProof) {
		if f.bound(w, r, p) {
			w.WriteHeader(204)
		}
	}
	if out := mustRun(t, f.srv.URL, dir, "logout"); out != "logged out\n" {
		t.Fatalf("logout said %q", out)
	}
	if _, err := os.Stat(filepath.Join(dir, sessionFile)); !os.IsNotExist(err) {
		t.Fatalf("the session file is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, keyFile)); err != nil {
		t.Fatalf("logout removed the key: %v", err)
	}
	if _, _, err := runApp(t, f.srv.URL, dir, "payments"); err == nil || !strings.Contains(err.Error(), "not logged in") {
		t.Fatalf("after logout: %v, want not logged in", err)
	}
}

// The RFC 8252 login: the login page in the "browser", the redirect back to
// the app's loopback listener, the code and verifier for a bound session.
func TestLoopbackLogin(t *testing.T) {
	f := newFakeBFF(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	redirect := "http://" + ln.Addr().String() + "/callback"
	ln.Close() // the app listens there itself
	var mu sync.Mutex
	var challenge string
	f.routes["GET /auth/login"] = func(w http.ResponseWriter, r *http.Request, _ []byte, _ checkedProof) {
		q := r.URL.Query()
		if q.Get("client") != "mobile" || q.Get("redirect_uri") != redirect || q.Get("code_challenge_method") != "S256" ||
			len(q.Get("code_challenge")) != 43 || len(q.Get("state")) < 16 {
			problem(w, 400, "BAD_REQUEST", "not a mobile login: "+r.URL.RawQuery, "fix_request")
			return
		}
		mu.Lock()
		challenge = q.Get("code_challenge")
		mu.Unlock()
		http.Redirect(w, r, redirect+"?"+url.Values{"code": {"one-time-code"}, "state": {q.Get("state")}}.Encode(), http.StatusFound)
	}
	f.routes["POST /auth/mobile/token"] = func(w http.ResponseWriter, r *http.Request, body []byte, p checkedProof) {
		var in struct{ Code, CodeVerifier string }
		_ = json.Unmarshal(body, &in)
		mu.Lock()
		ok := in.Code == "one-time-code" && s256(in.CodeVerifier) == challenge
		mu.Unlock()
		if !ok {
			problem(w, 400, "INVALID_GRANT", "wrong code or verifier", "login")
			return
		}
		sum, _ := p.jwk.Thumbprint(crypto.SHA256)
		f.mu.Lock()
		f.jkt = base64.RawURLEncoding.EncodeToString(sum)
		f.mu.Unlock()
		writeJSON(w, 200, map[string]any{"sessionToken": testToken, "expiresIn": 3600, "tokenType": "DPoP"})
	}
	browser := func(u string) error {
		// First a stray request to the loopback port without the state:
		// refused, and the login goes on waiting.
		resp, err := http.Get(redirect + "?code=forged&state=wrong")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("a redirect with another state: %d, want 400", resp.StatusCode)
		}
		go func() { // the browser follows the login to the app's listener
			resp, err := http.Get(u)
			if err != nil {
				t.Error(err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(b), "Signed in") {
				t.Errorf("the app's page after the login: %d %s", resp.StatusCode, b)
			}
		}()
		return nil
	}
	dir := t.TempDir()
	out, errOut, err := runWith(t, f.srv.URL, dir, func(a *app) { a.openBrowser = browser },
		"login", "-open", "-redirect-uri", redirect, "-timeout", "1m")
	if err != nil {
		t.Fatalf("login: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, "Sign in in your browser: "+f.srv.URL+"/auth/login?") || !strings.Contains(out, "logged in as alice: tokenType DPoP") {
		t.Fatalf("login said %q", out)
	}
	if s, err := loadSession(filepath.Join(dir, sessionFile)); err != nil || !s.bound() || s.UserID != "alice" {
		t.Fatalf("saved session %+v, %v", s, err)
	}
}

func s256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func TestLoopbackRedirectMustBeALoopbackIP(t *testing.T) {
	for _, uri := range []string{"http://localhost:8765/callback", "https://127.0.0.1:8765/cb", "http://10.0.0.1:8765/cb",
		"http://127.0.0.1/cb", "com.example.app:/cb", "http://127.0.0.1:8765/cb?x=1"} {
		if ln, _, err := listenLoopback(uri); err == nil {
			ln.Close()
			t.Errorf("%s: listened, want it refused", uri)
		}
	}
}
