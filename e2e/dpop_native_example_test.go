//go:build integration

package e2e

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/fintech-bff/bff/internal/testing/dpoptest"
	"github.com/fintech-bff/bff/internal/testing/syncbuf"
)

// The native example (examples/native, docs/native-apps.md) run as a
// developer runs it: its binary against what make run starts, in dev mode.
// It logs in with a proof of its key, pays, lists the payment, and reads
// the payment's event from the stream; the session it holds is then shown
// to be bound to that key (the token alone, or with another key's proof,
// opens nothing; a proof is accepted once) and to end at its logout.
func TestDPoPNativeExampleAgainstMakeRun(t *testing.T) {
	m := startMakeRun(t)
	registerFront(t, m.base)
	app := newNativeApp(t, m.base)
	user := "native-" + opRandom(6)

	out := app.must("login", "-dev-user", user)
	if !strings.Contains(out, "logged in as "+user+": tokenType DPoP") {
		t.Fatalf("login said %q, want %s with a DPoP session", out, user)
	}
	for _, f := range []string{"key.pem", "session.json"} {
		fi, err := os.Stat(filepath.Join(app.dir, f))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, %v; want a file with permissions 0600", f, fi, err)
		}
	}
	saved := app.session()
	if saved.TokenType != "DPoP" || saved.JKT != app.thumbprint() {
		t.Fatalf("saved session: tokenType %q, jkt %q; want DPoP bound to the key file's %s", saved.TokenType, saved.JKT, app.thumbprint())
	}

	// The stream is opened before the payment: it starts from now.
	events := app.start("events", "-n", "1", "-for", "90s")
	eventually(t, 30*time.Second, func() error {
		if events.exited() {
			t.Fatalf("events exited before the stream opened:\n%s", events.output())
		}
		if !strings.Contains(events.stderr.String(), "stream open") {
			return fmt.Errorf("the stream is not open yet:\n%s", events.output())
		}
		return nil
	})

	out = app.must("pay", "-remittance", "native example "+user, "12.5", "ILS")
	paid := regexp.MustCompile(`^paid status=201 key=(\S+) id=(\S+) replayed=false payUrl=http\S+`).FindStringSubmatch(out)
	if paid == nil {
		t.Fatalf("pay said %q, want a payment made (201)", out)
	}
	key, paymentID := paid[1], paid[2]

	out = app.must("payments")
	if !strings.Contains(out, "key="+key+" route=/v2/payments state=done status=201 paymentId="+paymentID) {
		t.Fatalf("payments listed\n%s\nwant the payment %s (%s) done with 201", out, key, paymentID)
	}

	if err := events.wait(100 * time.Second); err != nil {
		t.Fatalf("events: %v\n%s", err, events.output())
	}
	line := regexp.MustCompile(`(?m)^event payment id=\d+ (\{.*\})$`).FindStringSubmatch(events.stdout.String())
	if line == nil {
		t.Fatalf("events printed no payment event:\n%s", events.output())
	}
	var ev struct {
		Key, State, PaymentID string
		Status                int
	}
	if err := json.Unmarshal([]byte(line[1]), &ev); err != nil {
		t.Fatalf("the event's data %s: %v", line[1], err)
	}
	if ev.Key != key || ev.State != "done" || ev.Status != 201 || ev.PaymentID != paymentID {
		t.Fatalf("the event %+v, want key %s done 201 paymentId %s", ev, key, paymentID)
	}

	// The session is bound to the key: what the app sends works, what
	// anyone else could send does not.
	hc := &http.Client{Timeout: 30 * time.Second, Transport: validate(t, nil)}
	sessionURL := m.base + "/auth/session"
	// ask answers the status, the problem's code ("" for none) and the
	// WWW-Authenticate header of GET /auth/session with the saved token.
	type answer struct {
		status          int
		code, challenge string
	}
	ask := func(scheme, proof string) answer {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, sessionURL, nil)
		req.Header.Set("Authorization", scheme+" "+saved.Token)
		if proof != "" {
			req.Header.Set("DPoP", proof)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct{ Code string }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return answer{resp.StatusCode, body.Code, resp.Header.Get("WWW-Authenticate")}
	}
	good := dpopProof(t, app.key(), http.MethodGet, sessionURL, saved.Token)
	if a := ask("DPoP", good); a.status != http.StatusOK {
		t.Fatalf("the app's key's proof: %+v, want 200", a)
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for name, a := range map[string]answer{
		"the same proof again":      ask("DPoP", good),
		"the token as Bearer":       ask("Bearer", ""),
		"the token with no proof":   ask("DPoP", ""),
		"another key's proof":       ask("DPoP", dpopProof(t, other, http.MethodGet, sessionURL, saved.Token)),
		"a proof for another URL":   ask("DPoP", dpopProof(t, app.key(), http.MethodGet, m.base+"/bff/payments", saved.Token)),
		"a proof for another token": ask("DPoP", dpopProof(t, app.key(), http.MethodGet, sessionURL, saved.Token+"x")),
	} {
		if a.status != http.StatusUnauthorized || a.code != "DPOP_PROOF_INVALID" || !strings.HasPrefix(a.challenge, "DPoP ") {
			t.Errorf("%s: %+v; want 401 DPOP_PROOF_INVALID with a DPoP challenge", name, a)
		}
	}

	if out := app.must("logout"); out != "logged out\n" {
		t.Fatalf("logout said %q", out)
	}
	if a := ask("DPoP", dpopProof(t, app.key(), http.MethodGet, sessionURL, saved.Token)); a.status != http.StatusUnauthorized || a.code != "SESSION_REQUIRED" {
		t.Fatalf("the session after its logout, with a good proof: %+v, want 401 SESSION_REQUIRED", a)
	}
	if _, errOut, err := app.run("payments"); err == nil || !strings.Contains(errOut, "not logged in") {
		t.Fatalf("payments after logout: %v %q, want not logged in", err, errOut)
	}
}

// The native example's RFC 8252 login against the real OpenID provider: it
// prints the login URL, the "system browser" (an HTTP client, as in the
// other OpenID tests) signs in there and is sent back to the example's
// loopback listener, and the example exchanges the code with a proof for a
// session bound to its key, on a BFF that requires one.
func TestDPoPNativeExampleLoopbackLogin(t *testing.T) {
	pub := freeAddr(t)
	base := "http://" + pub
	redirect := "http://" + freeAddr(t) + "/callback" // the app listens there itself
	op := startOP(t, OPClient{ID: opClientID, Secret: opClientSecret, RedirectURIs: []string{base + "/auth/callback"}})
	e := start(t, options{publicAddr: pub, env: map[string]string{"BFF_SESSION_MOBILE_DPOP": "required"},
		authYAML: fmt.Sprintf(`auth:
  mode: oidc
  oidc:
    issuer: %q
    client_id: %q
    client_secret: %q
    redirect_url: %q
    user_id_claim: sub
  mobile_redirect_uris: [%q]`, op.Issuer, opClientID, opClientSecret, base+"/auth/callback", redirect)})
	app := newNativeApp(t, e.public)

	login := app.start("login", "-redirect-uri", redirect, "-timeout", "60s")
	var loginURL string
	eventually(t, 30*time.Second, func() error {
		if login.exited() {
			t.Fatalf("login exited before it printed its URL:\n%s", login.output())
		}
		m := regexp.MustCompile(`Sign in in your browser: (\S+)`).FindStringSubmatch(login.stdout.String())
		if m == nil {
			return fmt.Errorf("no login URL yet:\n%s", login.output())
		}
		loginURL = m[1]
		return nil
	})
	b := e.browser()
	r := b.follow(t, loginURL)
	if r.status != http.StatusFound {
		t.Fatalf("GET %s: %d %s, want a redirect to the provider", loginURL, r.status, r.body)
	}
	back := b.follow(t, opLogin(t, b.http, r.header.Get("Location"), "nadia"))
	toApp := back.header.Get("Location")
	if back.status != http.StatusFound || !strings.HasPrefix(toApp, redirect+"?") {
		t.Fatalf("the BFF's callback: %d to %q, want a redirect to the app's %s", back.status, toApp, redirect)
	}
	resp, err := http.Get(toApp) // the browser follows it to the app's listener
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "Signed in") {
		t.Fatalf("the app's loopback page: %d %s", resp.StatusCode, page)
	}
	if err := login.wait(60 * time.Second); err != nil {
		t.Fatalf("login: %v\n%s", err, login.output())
	}
	if out := login.stdout.String(); !strings.Contains(out, "logged in as nadia: tokenType DPoP, key "+app.thumbprint()) {
		t.Fatalf("login said %q, want nadia with a session bound to the key %s", out, app.thumbprint())
	}
	if _, errOut, err := app.run("payments"); err != nil || !strings.Contains(errOut, "no payments yet") {
		t.Fatalf("payments: %v %q", err, errOut)
	}
	// The token alone is refused: the BFF requires the proof.
	saved := app.session()
	req, _ := http.NewRequest(http.MethodGet, e.public+"/auth/session", nil)
	req.Header.Set("Authorization", "Bearer "+saved.Token)
	resp, err = (&http.Client{Timeout: 30 * time.Second, Transport: validate(t, nil)}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the token as Bearer: %d, want 401", resp.StatusCode)
	}
	if out := app.must("logout"); out != "logged out\n" {
		t.Fatalf("logout said %q", out)
	}
}

// nativeApp is the example's binary with its state directory.
type nativeApp struct {
	t              *testing.T
	bin, base, dir string
}

func newNativeApp(t *testing.T, base string) *nativeApp {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "native")
	build := exec.Command("go", "build", "-race", "-o", bin, "../examples/native")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building examples/native: %v\n%s", err, out)
	}
	return &nativeApp{t: t, bin: bin, base: base, dir: filepath.Join(t.TempDir(), "state")}
}

func (a *nativeApp) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, a.bin, append([]string{"-bff", a.base, "-dir", a.dir}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")} // no BFF_URL, BFF_NATIVE_DIR: the flags say it
	return cmd
}

// run runs one command to its end (bounded: none takes a minute).
func (a *nativeApp) run(args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut strings.Builder
	cmd := a.command(ctx, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

func (a *nativeApp) must(args ...string) string {
	a.t.Helper()
	out, errOut, err := a.run(args...)
	if err != nil {
		a.t.Fatalf("native %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// running is a command of the example running beside the test.
type running struct {
	stdout, stderr *syncbuf.Buffer
	done           chan struct{}
	err            error
}

// start starts a command; it is killed when the test ends.
func (a *nativeApp) start(args ...string) *running {
	a.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{stdout: &syncbuf.Buffer{}, stderr: &syncbuf.Buffer{}, done: make(chan struct{})}
	cmd := a.command(ctx, args...)
	cmd.Stdout, cmd.Stderr = r.stdout, r.stderr
	if err := cmd.Start(); err != nil {
		cancel()
		a.t.Fatal(err)
	}
	go func() { r.err = cmd.Wait(); close(r.done) }()
	a.t.Cleanup(func() { cancel(); <-r.done })
	return r
}

func (r *running) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// wait waits for the command's end, at most within.
func (r *running) wait(within time.Duration) error {
	select {
	case <-r.done:
		return r.err
	case <-time.After(within):
		return errors.New("still running")
	}
}

func (r *running) output() string {
	return "stdout:\n" + r.stdout.String() + "stderr:\n" + r.stderr.String()
}

// nativeSession is the part of the example's session.json the test reads.
type nativeSession struct {
	Token     string `json:"sessionToken"`
	TokenType string `json:"tokenType"`
	JKT       string `json:"jkt"`
}

func (a *nativeApp) session() nativeSession {
	a.t.Helper()
	b, err := os.ReadFile(filepath.Join(a.dir, "session.json"))
	if err != nil {
		a.t.Fatal(err)
	}
	var s nativeSession
	if err := json.Unmarshal(b, &s); err != nil || s.Token == "" {
		a.t.Fatalf("session.json: %v: %s", err, b)
	}
	return s
}

// key is the example's private key, read from its key file.
func (a *nativeApp) key() *ecdsa.PrivateKey {
	a.t.Helper()
	b, err := os.ReadFile(filepath.Join(a.dir, "key.pem"))
	if err != nil {
		a.t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		a.t.Fatalf("key.pem holds no PEM block")
	}
	k, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		a.t.Fatal(err)
	}
	return k
}

// thumbprint is the JWK SHA-256 thumbprint (RFC 7638) of the example's key.
func (a *nativeApp) thumbprint() string {
	a.t.Helper()
	sum, err := (&jose.JSONWebKey{Key: &a.key().PublicKey}).Thumbprint(crypto.SHA256)
	if err != nil {
		a.t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(sum)
}

// dpopProof is a DPoP proof (RFC 9449, 4.2) made here, independently of
// the example: key's signature over method, target's URL without query,
// now, a fresh jti and the token's hash.
func dpopProof(t *testing.T, key *ecdsa.PrivateKey, method, target, token string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	u.RawQuery, u.Fragment = "", ""
	return dpoptest.KeyOf(t, key).Proof(method, u.String(), token)
}
