package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"runtime"
	"time"
)

// loginAnswer is the answer of both logins: POST /auth/mobile/token
// ({sessionToken, expiresIn, tokenType}) and POST /auth/dev/login ({userId,
// sessionToken, expiresAt, tokenType}).
type loginAnswer struct {
	UserID       string    `json:"userId"`
	SessionToken string    `json:"sessionToken"`
	ExpiresIn    int64     `json:"expiresIn"`
	ExpiresAt    time.Time `json:"expiresAt"`
	TokenType    string    `json:"tokenType"`
}

// devLogin is POST /auth/dev/login {"userId"} with a proof: auth.mode dev
// (what make run uses) binds its session to the key like the mobile login.
func (a *app) devLogin(ctx context.Context, user string) (*savedSession, error) {
	body, _ := json.Marshal(map[string]string{"userId": user})
	return a.redeem(ctx, "/auth/dev/login", body)
}

// loopbackLogin is the native app login of RFC 8252: the login page in the
// system browser, which comes back to this app's loopback listener at
// redirectURI with a one-time code; then the code and its PKCE verifier
// for a session bound to the app's key (POST /auth/mobile/token with a
// proof).
func (a *app) loopbackLogin(ctx context.Context, redirectURI string, openBrowser bool, timeout time.Duration) (*savedSession, error) {
	ln, cb, err := listenLoopback(redirectURI)
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	verifier, state := random(32), random(16)
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{
		"client":                {"mobile"},
		"redirect_uri":          {redirectURI},
		"code_challenge":        {base64.RawURLEncoding.EncodeToString(sum[:])},
		"code_challenge_method": {"S256"},
		"state":                 {state},
	}
	loginURL := a.bff.base.JoinPath("/auth/login")
	loginURL.RawQuery = q.Encode()

	codes := make(chan callbackResult, 1)
	srv := &http.Server{
		Handler:           callbackHandler(cb.Path, state, codes),
		ReadHeaderTimeout: 10 * time.Second, // a browser sends its request at once; anything slower is not one
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	fmt.Fprintf(a.stdout, "Sign in in your browser: %s\n", loginURL)
	if openBrowser {
		if err := a.openBrowser(loginURL.String()); err != nil {
			fmt.Fprintf(a.stderr, "could not open a browser (%v): open the URL above yourself\n", err)
		}
	}
	wait := time.NewTimer(timeout)
	defer wait.Stop()
	var res callbackResult
	select {
	case res = <-codes:
	case <-wait.C:
		return nil, fmt.Errorf("no login came back to %s within %s", redirectURI, timeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if res.err != "" {
		return nil, fmt.Errorf("the login did not finish: %s", res.err)
	}
	body, _ := json.Marshal(map[string]string{"code": res.code, "codeVerifier": verifier})
	return a.redeem(ctx, "/auth/mobile/token", body)
}

// redeem posts a login's body to path with a proof of the app's key and
// keeps the session it answers.
func (a *app) redeem(ctx context.Context, path string, body []byte) (*savedSession, error) {
	resp, err := a.bff.send(ctx, request{method: http.MethodPost, path: path, body: body})
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, readProblem(resp)
	}
	var ans loginAnswer
	if err := decodeJSON(resp, &ans); err != nil {
		return nil, err
	}
	if ans.SessionToken == "" {
		return nil, errors.New("the BFF's login answer has no sessionToken")
	}
	s := &savedSession{BFF: a.bff.base.String(), UserID: ans.UserID, Token: ans.SessionToken, TokenType: "Bearer", JKT: a.bff.prover.jkt, ExpiresAt: ans.ExpiresAt}
	if ans.TokenType == "DPoP" {
		s.TokenType = "DPoP"
	}
	if s.ExpiresAt.IsZero() && ans.ExpiresIn > 0 {
		s.ExpiresAt = time.Now().Add(time.Duration(ans.ExpiresIn) * time.Second)
	}
	return s, nil
}

// listenLoopback listens where redirectURI points: an http URL on a
// loopback IP literal with a port (RFC 8252, 7.3 and 8.3: a name such as
// localhost may resolve elsewhere). The BFF matches redirect URIs exactly,
// so the port is the registered one, never one picked at random.
func listenLoopback(redirectURI string) (net.Listener, *url.URL, error) {
	u, err := url.Parse(redirectURI)
	if err != nil {
		return nil, nil, fmt.Errorf("-redirect-uri: %w", err)
	}
	ip := net.ParseIP(u.Hostname())
	if u.Scheme != "http" || ip == nil || !ip.IsLoopback() || u.Port() == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, nil, fmt.Errorf("-redirect-uri %q: want http://127.0.0.1:PORT/path or http://[::1]:PORT/path, as registered in auth.mobile_redirect_uris", redirectURI)
	}
	if u.Path == "" {
		u.Path = "/"
	}
	ln, err := net.Listen("tcp", u.Host)
	if err != nil {
		return nil, nil, fmt.Errorf("listening for the login's redirect on %s: %w", u.Host, err)
	}
	return ln, u, nil
}

type callbackResult struct{ code, err string }

// callbackHandler takes the BFF's redirect to the app: the first request
// at path with the login's state hands its code (or error) to codes. Any
// other process on this machine can reach a loopback port, so a request
// without the state is refused and the wait goes on.
func callbackHandler(path, state string, codes chan<- callbackResult) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.URL.Path != path || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(state)) != 1 {
			http.Error(w, "This is not the login this app started.", http.StatusBadRequest)
			return
		}
		res := callbackResult{code: q.Get("code")}
		msg := "Signed in. You can close this window and go back to the app."
		if e := q.Get("error"); e != "" || res.code == "" {
			res = callbackResult{err: fmt.Sprintf("%s %s", e, q.Get("error_description"))}
			msg = "The login did not finish: " + res.err
		}
		select {
		case codes <- res:
		default: // a second redirect with the same state: the first one counts
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		fmt.Fprintf(w, "<!doctype html><title>bff native example</title><p>%s</p>\n", html.EscapeString(msg))
	})
}

// systemBrowser opens u in the user's browser (RFC 8252, 6: never a web
// view inside the app, whose page the app could read).
func systemBrowser(u string) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", u)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", u)
	default:
		cmd = exec.Command("xdg-open", u)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }() // the opener returns at once; reap it
	return nil
}

// random is n random bytes, base64url: PKCE verifiers (32 bytes, 43
// characters, RFC 7636 4.1), states, idempotency keys.
func random(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on the systems Go supports
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
