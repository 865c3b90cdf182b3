// Package browsertest runs Debian's headless chromium for tests, driven by
// chromedp: what only a browser proves (cookies' flags and SameSite, CSP,
// CORS, redirects through consent and login pages) is tested in one.
//
// Without chromium the tests fail rather than skip: CI installs it
// (apt-get install -y chromium) and nothing is downloaded at run time.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fintech-bff/bff/internal/testing/poll"
)

// Timeouts: chromium starts in about a second here and pages load in
// milliseconds, so these only end a hung run.
const (
	// Step bounds one step of a journey (a navigation, a click and what it
	// waits for).
	Step = 30 * time.Second
	// startTimeout bounds the browser's start.
	startTimeout = 60 * time.Second
)

// chromiumPath finds Debian's chromium, or fails t.
func chromiumPath(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "/usr/bin/chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium is needed for the browser tests: apt-get install -y chromium")
	return ""
}

// Start starts one headless chromium with a fresh profile and returns its
// first tab's context; the browser ends with the test.
func Start(t testing.TB) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless,
		chromedp.NoSandbox, // the tests run as root, where chromium's sandbox cannot start
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.WindowSize(1100, 900),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelBrowser)
	Within(t, startTimeout, "starting chromium", func() error { return chromedp.Do(browser) })
	return browser
}

// Tab opens a new tab in browser's profile (same cookies); it closes with
// the test.
func Tab(t testing.TB, browser context.Context) context.Context {
	t.Helper()
	return open(t, browser, "opening a tab")
}

// Profile opens a tab in a new browser context of browser: a separate
// cookie jar, as another device or a private window is.
func Profile(t testing.TB, browser context.Context) context.Context {
	t.Helper()
	return open(t, browser, "opening a profile", chromedp.WithNewBrowserContext())
}

func open(t testing.TB, browser context.Context, what string, opts ...chromedp.ContextOption) context.Context {
	t.Helper()
	tab, closeTab := chromedp.NewContext(browser, opts...)
	t.Cleanup(closeTab)
	Within(t, Step, what, func() error { return chromedp.Do(tab) })
	return tab
}

// Within runs first, the first call on a new chromedp context, failing t
// if it errs or takes longer than d. That first call cannot take a timeout
// context: chromedp ties the browser's or tab's life to it.
func Within(t testing.TB, d time.Duration, what string, first func() error) {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- first() }()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(d):
		t.Fatalf("%s: not done within %s", what, d)
	}
}

// Do runs steps in tab within Step, failing t with what and the page's
// location when they fail.
func Do(t testing.TB, tab context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	Get(t, tab, what, chromedp.Steps(steps...))
}

// Get runs one action in tab within Step and returns its value, failing t
// with what and the page's location when it fails.
func Get[T any](t testing.TB, tab context.Context, what string, action chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, Step)
	defer cancel()
	v, err := chromedp.Run(ctx, action)
	if err != nil {
		// The location only names the page in the failure; a tab too busy
		// to answer within a few seconds is reported without it.
		lctx, cancelL := context.WithTimeout(tab, 5*time.Second)
		defer cancelL()
		at, _ := chromedp.Run(lctx, chromedp.Location())
		t.Fatalf("%s: %v (the browser is at %s)", what, err, at)
	}
	return v
}

// Until evaluates the JavaScript expression in tab (poll's few
// milliseconds apart) until it is true, failing t after Step. Unlike
// chromedp.Poll it outlasts navigations: an evaluation that fails because
// its page went away is tried again on the next page.
func Until(t testing.TB, tab context.Context, what, expr string) {
	t.Helper()
	var last error
	if poll.Within(Step, func() bool {
		// One evaluation takes microseconds; one that hangs on a page
		// being torn down is given up after a second and tried again.
		ctx, cancel := context.WithTimeout(tab, time.Second)
		defer cancel()
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("Boolean("+expr+")"))
		last = err
		return err == nil && ok
	}) {
		return
	}
	lctx, cancel := context.WithTimeout(tab, 5*time.Second)
	defer cancel()
	at, _ := chromedp.Run(lctx, chromedp.Location())
	t.Fatalf("%s: %s not true within %s (last error: %v; the browser is at %s)", what, expr, Step, last, at)
}

// Shots writes numbered full-page screenshots into a directory.
type Shots struct {
	Dir string
	n   int
}

// NewShots keeps the screenshots in dir, or under the test's temp dir when
// dir is empty.
func NewShots(t testing.TB, dir string) *Shots {
	t.Helper()
	if dir == "" {
		dir = filepath.Join(t.TempDir(), "screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A kept directory holds one run's screenshots: the last run's go.
	old, _ := filepath.Glob(filepath.Join(dir, "[0-9][0-9]-*.png"))
	for _, f := range old {
		_ = os.Remove(f)
	}
	return &Shots{Dir: dir}
}

// Take saves tab's whole page as NN-name.png.
func (s *Shots) Take(t testing.TB, tab context.Context, name string) {
	t.Helper()
	png := Get(t, tab, "screenshot "+name, chromedp.FullScreenshot(100))
	s.n++
	path := filepath.Join(s.Dir, fmt.Sprintf("%02d-%s.png", s.n, name))
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}
