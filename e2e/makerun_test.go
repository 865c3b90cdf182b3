//go:build integration

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fintech-bff/bff/internal/testing/browsertest"
	"github.com/fintech-bff/bff/internal/testing/syncbuf"
)

// freePorts finds a port p with p+1, p+2 and p+1010 free too: make run's
// PORT, SIM_PORT, OP_PORT (AUTH=oidc and fapi2) and ADMIN_PORT by default.
func freePorts(t *testing.T) int {
	t.Helper()
	free := func(p int) bool {
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			return false
		}
		ln.Close()
		return true
	}
	// The ports after it are never handed to another test either.
	reserve := func(p int) bool {
		_, taken := handedOut.LoadOrStore(p, true)
		return !taken
	}
	for range 50 {
		_, port, _ := net.SplitHostPort(freeAddr(t))
		p, _ := strconv.Atoi(port)
		if p != 8080 && p+1010 < 65536 && reserve(p+1) && reserve(p+2) && reserve(p+1010) &&
			free(p+1) && free(p+2) && free(p+1010) {
			return p
		}
	}
	t.Fatal("no port with the ports after it free")
	return 0
}

// makeRun is make run's script (scripts/run-dev.sh) running on a free
// port with the test's binaries: what a developer has after `make run`.
type makeRun struct {
	port    int             // PORT: the BFF's public port
	simPort int             // SIM_PORT: the simulator's, PORT + 1
	base    string          // http://localhost:PORT
	issuer  string          // the OpenID provider's (AUTH=oidc, fapi2): http://127.0.0.1:OP_PORT, OP_PORT = PORT + 2
	out     *syncbuf.Buffer // the script's output: the banner, then both logs
}

// startMakeRun starts make run's script on a free port and waits until the
// BFF says it started; the script and its children end with the test.
// env adds variables, e.g. RUN_AUTH=oidc (make run AUTH=oidc).
func startMakeRun(t *testing.T, env ...string) *makeRun {
	t.Helper()
	sim := filepath.Join(t.TempDir(), "upstream-sim")
	build := exec.Command("go", "build", "-o", sim, "../cmd/upstream-sim")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the simulator: %v\n%s", err, out)
	}
	port := freePorts(t)
	m := &makeRun{port: port, simPort: port + 1, base: fmt.Sprintf("http://localhost:%d", port),
		issuer: fmt.Sprintf("http://127.0.0.1:%d", port+2), out: &syncbuf.Buffer{}}
	cmd := exec.Command("./scripts/run-dev.sh")
	cmd.Dir = ".."
	var cmdEnv []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BFF_") { // the tests' own settings are no config keys
			cmdEnv = append(cmdEnv, kv)
		}
	}
	cmd.Env = append(cmdEnv, "PORT="+strconv.Itoa(port), "RUN_BFF_BIN="+bffBin, "RUN_SIM_BIN="+sim)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = m.out, m.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second): // a clean stop takes well under a second
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})
	// 150 s: the app's npm ci on a first run, or (AUTH=oidc) three
	// attempts of 25 s at the OpenID provider's start.
	eventually(t, 150*time.Second, func() error {
		select {
		case <-exited:
			t.Fatalf("make run's script exited:\n%s", m.out.String())
		default:
		}
		if !strings.Contains(m.out.String(), `"msg":"bff started"`) {
			return fmt.Errorf("make run's script did not start:\n%s", m.out.String())
		}
		return nil
	})
	return m
}

// make run's script on ports other than 8080: the
// banner names what really listens, and the example app's payment journey
// goes to the bank's consent page and back in the real browser, with the
// simulator's redirect allow-list following the port.
func TestMakeRunOnAnyPort(t *testing.T) {
	m := startMakeRun(t)
	port, base := m.port, m.base
	banner := m.out.String()
	for _, want := range []string{"The BFF listens on " + base, fmt.Sprintf("admin: http://127.0.0.1:%d", port+1010),
		fmt.Sprintf("simulator on http://127.0.0.1:%d", port+1), base + "/auth/dev/login"} {
		if !strings.Contains(banner, want) {
			t.Errorf("the banner lacks %q:\n%s", want, banner)
		}
	}
	if strings.Contains(banner, "8080") || strings.Contains(banner, "9090") {
		t.Errorf("the banner still names 8080 or 9090:\n%s", banner)
	}

	browser := browsertest.Start(t)
	tab := browser
	browsertest.Do(t, tab, "opening the app", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.ID("login-form")))
	// auth.mode dev has no /auth/login: a link to it would lead to a 404.
	if n := countIn(t, tab, `a[href^="/auth/login"]`); n != 0 {
		t.Errorf("the dev sign-in page shows %d links to /auth/login, want none", n)
	}
	browsertest.Do(t, tab, "signing in as alice",
		chromedp.Click(chromedp.CSS(`#login-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("accounts-table")))
	browsertest.Do(t, tab, "paying",
		chromedp.Click(chromedp.CSS(`#nav a[href="/pay"]`)),
		chromedp.WaitVisible(chromedp.ID("pay-form")),
		setInput("remittance", "make run on port "+strconv.Itoa(port)),
		chromedp.Click(chromedp.CSS(`#pay-form button[type="submit"]`)))
	approveAtBank(t, tab, browsertest.NewShots(t, os.Getenv("BFF_BROWSER_SHOTS")), "make-run-consent", `#payment-outcome [data-status]`)
	loc := browsertest.Get(t, tab, "location", chromedp.Location())
	if !strings.HasPrefix(loc, base+"/payment-done?") {
		t.Fatalf("back from the bank at %s, want %s/payment-done?…", loc, base)
	}
}

// In development, the redirect path the upstream refused is visible: the
// error's detail has URLs taken out, and upstreamMessage carries the
// upstream's own message with the URL's path and not its host
// (docs/errors.md, upstreamMessage). Production never sends it.
func TestDevelopmentShowsTheRefusedRedirect(t *testing.T) {
	const refused = "http://localhost:5999/payment-done"
	body := strings.Replace(fmt.Sprintf(validPayment, "refused redirect"), `"providerIds"`, `"redirectUrl":"`+refused+`","providerIds"`, 1)
	e := start(t, options{})
	b := e.browser()
	b.login("devon")
	v := wantProblem(t, b.do("POST", "/api/v2/payments", body, "Idempotency-Key", "refused-redirect-1", "X-CSRF", "1"), 400, "CLIENT_ERROR")
	if strings.Contains(fmt.Sprint(v["detail"]), refused) {
		t.Fatalf("the detail holds the URL: %v", v["detail"])
	}
	if msg := fmt.Sprint(v["upstreamMessage"]); !strings.Contains(msg, "[host]/payment-done") || strings.Contains(msg, "localhost") {
		t.Fatalf("upstreamMessage = %q, want the upstream's message naming /payment-done without its host", msg)
	}
}

// The banner of make run AUTH=oidc and fapi2: what the mode offers (the
// provider, any username, the step-up rule and its one-time code), never
// the dev login's curl, which that BFF does not serve.
func checkOIDCBanner(t *testing.T, m *makeRun, want ...string) {
	t.Helper()
	banner := m.out.String()
	want = append(want, "The BFF listens on "+m.base, "Users sign in at the test OpenID provider on "+m.issuer,
		"Then open "+m.base, "sign in with any username", "100.00 or more in ILS", "any 6 digits",
		"000000 is the wrong code", "curl -s -o /dev/null -w '%{redirect_url}\\n' "+m.base+"/auth/login")
	for _, w := range want {
		if !strings.Contains(banner, w) {
			t.Errorf("the banner lacks %q:\n%s", w, banner)
		}
	}
	for _, not := range []string{"/auth/dev/login", `"userId":"alice"`, "sign in as alice"} {
		if strings.Contains(banner, not) {
			t.Errorf("the banner offers the dev login (%q), which auth.mode oidc has not:\n%s", not, banner)
		}
	}
}

// makeRunLogin is GET /auth/login on make run's BFF: it checks the 302 to
// the provider's authorization endpoint (from its discovery document) and
// returns that URL and the user agent (cookies, no redirects followed).
func makeRunLogin(t *testing.T, m *makeRun) (*url.URL, *http.Client) {
	t.Helper()
	disc, err := opDiscovery(&http.Client{Timeout: 5 * time.Second}, m.issuer)
	if err != nil {
		t.Fatalf("the provider's discovery at %s: %v", m.issuer, err)
	}
	ua := opBrowser()
	p := opDo(t, ua, http.MethodGet, m.base+"/auth/login", nil)
	if p.status != http.StatusFound {
		t.Fatalf("GET /auth/login: %d %s, want 302 to the provider", p.status, p.body)
	}
	loc, endpoint := mustURL(t, p.loc), mustURL(t, disc.AuthorizationEndpoint)
	if loc.Scheme != endpoint.Scheme || loc.Host != endpoint.Host || loc.Path != endpoint.Path {
		t.Fatalf("GET /auth/login went to %s, want the provider's authorization endpoint %s", p.loc, disc.AuthorizationEndpoint)
	}
	return loc, ua
}

// makeRunSignIn finishes a login begun by makeRunLogin: at the provider as
// user, then the BFF's callback; the session must be that user's.
func makeRunSignIn(t *testing.T, m *makeRun, ua *http.Client, authURL *url.URL, user string) {
	t.Helper()
	cb := opLogin(t, ua, authURL.String(), user)
	if !strings.HasPrefix(cb, m.base+"/auth/callback?") {
		t.Fatalf("the provider sent the browser to %s, want %s/auth/callback", cb, m.base)
	}
	if p := opDo(t, ua, http.MethodGet, cb, nil); p.status != http.StatusFound {
		t.Fatalf("the BFF's callback: %d %s, want 302 back to the app", p.status, p.body)
	}
	p := opDo(t, ua, http.MethodGet, m.base+"/auth/session", nil)
	var s struct{ UserID string }
	if err := json.Unmarshal([]byte(p.body), &s); p.status != http.StatusOK || err != nil || s.UserID != user {
		t.Fatalf("GET /auth/session after the login: %d %s, want %s's session", p.status, p.body, user)
	}
}

// makeRunPay posts an ILS payment (the example app's currency) with the
// session and returns the status and body of the BFF's answer.
func makeRunPay(t *testing.T, m *makeRun, ua *http.Client, amount, key string) (int, string) {
	t.Helper()
	body := fmt.Sprintf(`{"paymentInformation":{"amount":%q,"currency":"ILS","creditorName":"Dana Levi",`+
		`"creditorAccount":{"iban":"IL620108000000099999999"}},"providerIds":["demobank-sandbox"]}`, amount)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, m.base+"/api/v2/payments", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF", "1")
	req.Header.Set("Idempotency-Key", key)
	resp, err := ua.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// makeRunApprove posts a payment of amount ILS that the banner's rule holds,
// approves it at the provider with a right one-time code, and checks the
// BFF's callback takes the browser back with stepUp=approved. With par, the
// approval's authorization request must be a pushed one (FAPI 2.0).
func makeRunApprove(t *testing.T, m *makeRun, ua *http.Client, amount, key string, par bool) {
	t.Helper()
	status, body := makeRunPay(t, m, ua, amount, key)
	var held struct{ Code, StepUpURL string }
	if err := json.Unmarshal([]byte(body), &held); status != http.StatusUnauthorized || err != nil || held.Code != "STEP_UP_REQUIRED" {
		t.Fatalf("a payment of %s ILS: %d %s, want 401 STEP_UP_REQUIRED", amount, status, body)
	}
	p := opDo(t, ua, http.MethodGet, held.StepUpURL, nil)
	if p.status != http.StatusFound || !strings.HasPrefix(p.loc, m.issuer+"/") {
		t.Fatalf("GET %s: %d %q %s, want 302 to the provider", held.StepUpURL, p.status, p.loc, p.body)
	}
	q := mustURL(t, p.loc).Query()
	if par && (len(q) != 2 || q.Get("request_uri") == "") {
		t.Fatalf("the approval's authorization request %s: want only client_id and request_uri", p.loc)
	}
	if !par && q.Get("acr_values") != "urn:bff:acr:mfa" {
		t.Fatalf("the approval's authorization request %s does not ask for urn:bff:acr:mfa", p.loc)
	}
	cb, _ := opDecide(t, ua, p.loc, "maya", "123456", "approve")
	if p := opDo(t, ua, http.MethodGet, cb, nil); p.status != http.StatusFound || !strings.Contains(p.loc, "stepUp=approved") {
		t.Fatalf("the approval's callback: %d %q %s, want 302 with stepUp=approved", p.status, p.loc, p.body)
	}
}

// make run AUTH=oidc: the test OpenID provider on PORT + 2 and the BFF in
// auth.mode oidc with payments the user approves. The banner says so (and
// offers no dev login); GET /auth/login goes to the provider's authorization
// endpoint, any username signs in, and the step-up rule the banner gives
// holds: 150.00 ILS waits for an approval (given with a one-time code),
// 12.50 ILS is sent at once.
func TestMakeRunOIDC(t *testing.T) {
	m := startMakeRun(t, "RUN_AUTH=oidc")
	checkOIDCBanner(t, m, "auth.mode oidc.")
	if banner := m.out.String(); strings.Contains(banner, "fapi2") || strings.Contains(banner, "request_uri") {
		t.Errorf("the oidc banner speaks of FAPI 2.0:\n%s", banner)
	}

	loc, ua := makeRunLogin(t, m)
	q := loc.Query()
	if q.Get("client_id") == "" || q.Get("redirect_uri") != m.base+"/auth/callback" || q.Get("code_challenge_method") != "S256" {
		t.Fatalf("the authorization request %s lacks client_id, redirect_uri %s/auth/callback or PKCE", loc, m.base)
	}
	makeRunSignIn(t, m, ua, loc, "maya")

	makeRunApprove(t, m, ua, "150.00", "make-run-oidc-150", false)
	if status, body := makeRunPay(t, m, ua, "12.50", "make-run-oidc-12"); status != http.StatusCreated {
		t.Errorf("a payment of 12.50 ILS: %d %s, want 201 (under the threshold)", status, body)
	}
}

// make run AUTH=fapi2: the provider and the BFF in the FAPI 2.0 profile. The
// banner says the requests go through PAR; GET /auth/login's Location is the
// provider's authorization endpoint with only client_id and request_uri;
// and a login and a payment's approval (pushed too) complete, so the
// provider took the BFF's private_key_jwt (its key from the run's JWK Set,
// read at /auth/jwks.json) and its DPoP-bound code exchanges.
func TestMakeRunFAPI2(t *testing.T) {
	m := startMakeRun(t, "RUN_AUTH=fapi2")
	checkOIDCBanner(t, m, "auth.mode oidc, auth.oidc.profile fapi2.", "goes through PAR",
		"carries only client_id and request_uri", m.base+"/auth/jwks.json")

	loc, ua := makeRunLogin(t, m)
	q := loc.Query()
	if len(q) != 2 || q.Get("client_id") == "" || !strings.HasPrefix(q.Get("request_uri"), "urn:ietf:params:oauth:request_uri:") {
		t.Fatalf("the authorization request %s: want only client_id and a pushed request_uri in its query", loc)
	}
	makeRunSignIn(t, m, ua, loc, "maya")
	makeRunApprove(t, m, ua, "150.00", "make-run-fapi2-150", true)
}
