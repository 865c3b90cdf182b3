//go:build integration

package e2e

import (
	"fmt"
	"net"
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

// freePorts finds a port p with p+1 and p+1010 free too: make run's
// PORT, SIM_PORT and ADMIN_PORT by default.
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
	for range 50 {
		_, port, _ := net.SplitHostPort(freeAddr(t))
		p, _ := strconv.Atoi(port)
		if p != 8080 && p+1010 < 65536 && free(p+1) && free(p+1010) {
			return p
		}
	}
	t.Fatal("no port with the two after it free")
	return 0
}

// makeRun is make run's script (scripts/run-dev.sh) running on a free
// port with the test's binaries: what a developer has after `make run`.
type makeRun struct {
	port    int             // PORT: the BFF's public port
	simPort int             // SIM_PORT: the simulator's, PORT + 1
	base    string          // http://localhost:PORT
	out     *syncbuf.Buffer // the script's output: the banner, then both logs
}

// startMakeRun starts make run's script on a free port and waits until the
// BFF says it started; the script and its children end with the test.
func startMakeRun(t *testing.T) *makeRun {
	t.Helper()
	sim := filepath.Join(t.TempDir(), "upstream-sim")
	build := exec.Command("go", "build", "-o", sim, "../cmd/upstream-sim")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the simulator: %v\n%s", err, out)
	}
	port := freePorts(t)
	m := &makeRun{port: port, simPort: port + 1, base: fmt.Sprintf("http://localhost:%d", port), out: &syncbuf.Buffer{}}
	cmd := exec.Command("./scripts/run-dev.sh")
	cmd.Dir = ".."
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BFF_") { // the tests' own settings are no config keys
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "PORT="+strconv.Itoa(port), "RUN_BFF_BIN="+bffBin, "RUN_SIM_BIN="+sim)
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
	eventually(t, 90*time.Second, func() error { // 90 s: the app's npm ci on a first run
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
