//go:build integration

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/testing/syncbuf"
)

// The README's walkthrough ("Try it"), run as a reader runs it: against make
// run's script, each sh block in bash (curl and variables), each output block
// checked against what the block printed, and each `text stream` block against
// the event stream the reader left open in another terminal. So the README
// cannot show a command that fails or an answer that is not the one a
// reader gets.
//
// The rules the README's walkthrough follows:
//   - an sh block of curl commands, NAME=$(...) lines and comments is run
//     in bash; a variable it sets is seen by the later blocks, as in one
//     terminal; a `curl -N` (`-sN`) block is a stream, left running as in
//     a third terminal;
//   - a fenced block right after an sh block (only blank lines between) is
//     what it prints, `…` standing for anything;
//   - a `text stream` block is what the open stream prints by then;
//   - `<!-- walkthrough: the bank's page ... -->` is the reader opening the
//     last payment's payUrl in the browser, which must show the bank's
//     Approve; the curl block after it approves (the simulator's control
//     call), so only that block can make the stream show the payment ACSC;
//   - a `js` block is a verbatim part of web/client/examples/pay-from-node.mjs;
//   - any other sh block is one of walkthroughCommands, which says how the
//     test covers it.
func TestReadmeWalkthrough(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	steps := walkthroughSteps(t, string(readme))
	m := startMakeRun(t)
	w := &walker{t: t, m: m, dir: t.TempDir()}
	w.vars = filepath.Join(w.dir, "vars.sh")
	if err := os.WriteFile(w.vars, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		w.do(s)
	}

	// What the walkthrough must show, whatever its words: a payment made
	// (201 with a payUrl), listed in its record, and its live status.
	all := strings.Join(w.outputs, "\n")
	if !created.MatchString(all) {
		t.Errorf("no command of the walkthrough made a payment (a 201 with a payUrl)")
	}
	if !regexp.MustCompile(`"items":\[\{"key":"[^"]+","route":"/v2/payments","state":"done","status":201`).MatchString(all) {
		t.Errorf("no command of the walkthrough listed the payment's record (GET /bff/payments)")
	}
	if len(w.streams) == 0 || !strings.Contains(w.streams[0].out.String(), `"paymentStatus":"ACSC"`) {
		t.Errorf("the walkthrough's event stream did not show the approved payment")
	}
	if !w.sawBank || !w.ranExample {
		t.Errorf("the walkthrough opened the bank's page: %v; ran the Node.js example: %v", w.sawBank, w.ranExample)
	}
	// It ends with a logout, which closes the session's streams: the
	// reader's curl -N returns.
	for _, st := range w.streams {
		eventually(t, 10*time.Second, func() error {
			select {
			case <-st.exited:
				return nil
			default:
				return fmt.Errorf("the stream %q still runs after the walkthrough's logout", st.cmd)
			}
		})
	}
}

// walkthroughCommands are the sh blocks of the walkthrough that are not
// curl: how the test covers each (nil: covered elsewhere, named in the
// comment). A block the map does not name fails the test, so the README
// cannot gain an unchecked command.
var walkthroughCommands = map[string]func(w *walker, want string){
	// Running already: the test started make run's script.
	"make run": nil,
	// Both example apps run in Chromium through make run's script:
	// TestMakeRunOnAnyPort (web/app), e2e/browser_react_test.go (web/react-app).
	"make run\nmake run APP=web/react-app": nil,
	"npm ci --prefix web/client && npm run build --prefix web/client\nBFF_URL=http://localhost:8080 node web/client/examples/pay-from-node.mjs": (*walker).runExample,
}

type stepKind int

const (
	stepShell    stepKind = iota // an sh block, with what it prints (want, may be empty)
	stepStream                   // a text stream block: what the open stream prints by then
	stepBankPage                 // the reader opens the last payment's page at the bank
	stepSnippet                  // a js block: a verbatim part of the Node.js example
)

type step struct {
	kind stepKind
	text string // the block's text
	want string // stepShell: the output block after it
	line int    // in README.md
}

// walkthroughSteps reads the steps of README.md's "## Try it" section.
func walkthroughSteps(t *testing.T, readme string) []step {
	t.Helper()
	lines := strings.Split(readme, "\n")
	from, to := -1, len(lines)
	for i, l := range lines {
		if strings.HasPrefix(l, "## ") {
			if from >= 0 {
				to = i
				break
			}
			if strings.HasPrefix(l, "## Try it") {
				from = i
			}
		}
	}
	if from < 0 {
		t.Fatal(`README.md has no "## Try it" section`)
	}
	var steps []step
	lastFenceEnd := -1 // the line after the closing fence of the last sh block
	for i := from; i < to; i++ {
		l := lines[i]
		if strings.HasPrefix(l, "<!-- walkthrough: the bank's page") {
			steps = append(steps, step{kind: stepBankPage, line: i + 1})
			continue
		}
		if !strings.HasPrefix(l, "```") {
			continue
		}
		info := strings.Fields(strings.TrimPrefix(l, "```"))
		start := i + 1
		for i++; i < to && !strings.HasPrefix(lines[i], "```"); i++ {
		}
		if i == to {
			t.Fatalf("README.md:%d: a fenced block that does not end", start)
		}
		text := strings.Join(lines[start:i], "\n")
		lang := ""
		if len(info) > 0 {
			lang = info[0]
		}
		onlyBlank := lastFenceEnd >= 0 && strings.TrimSpace(strings.Join(lines[lastFenceEnd:start-1], "")) == ""
		switch {
		case lang == "sh":
			steps = append(steps, step{kind: stepShell, text: text, line: start})
			lastFenceEnd = i + 1
			continue
		case len(info) > 1 && info[1] == "stream":
			steps = append(steps, step{kind: stepStream, text: text, line: start})
		case onlyBlank:
			steps[len(steps)-1].want = text
		case lang == "js":
			steps = append(steps, step{kind: stepSnippet, text: text, line: start})
		default:
			t.Fatalf("README.md:%d: a %q block the walkthrough test does not know what to do with", start, lang)
		}
		lastFenceEnd = -1
	}
	if len(steps) == 0 {
		t.Fatal("the walkthrough has no steps")
	}
	return steps
}

// walker runs the walkthrough's steps in order.
type walker struct {
	t          *testing.T
	m          *makeRun
	dir        string
	vars       string   // the variables the blocks set, as declare -p lines
	outputs    []string // what each block printed
	streams    []*shellStream
	sawBank    bool
	ranExample bool
}

type shellStream struct {
	cmd    string
	out    *syncbuf.Buffer
	exited chan struct{}
}

// local makes a README text (command or output) this run's: make run's
// port instead of 8080, the simulator's instead of 8081, the test's cookie
// jar instead of /tmp/bff.jar.
func (w *walker) local(s string) string {
	return strings.NewReplacer(
		"localhost:8080", fmt.Sprintf("localhost:%d", w.m.port),
		"127.0.0.1:8081", fmt.Sprintf("127.0.0.1:%d", w.m.simPort),
		"/tmp/bff.jar", filepath.Join(w.dir, "bff.jar"),
	).Replace(s)
}

var (
	// created is the answer to a payment made: 201 {id, payUrl}.
	created    = regexp.MustCompile(`(?m)^\{"id":"[0-9A-Z]{26}","payUrl":"([^"]+)"\}$`)
	assignLine = regexp.MustCompile(`(?m)^([A-Z][A-Z0-9_]*)=\$\(`)
	streamCurl = regexp.MustCompile(`\bcurl\b[^\n]*\s-[a-zA-Z]*N\b`)
)

func (w *walker) do(s step) {
	t := w.t
	t.Helper()
	switch s.kind {
	case stepBankPage:
		w.bankPage(s)
	case stepSnippet:
		example, err := os.ReadFile("../web/client/examples/pay-from-node.mjs")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(example), s.text) {
			t.Errorf("README.md:%d: the js block is not a verbatim part of web/client/examples/pay-from-node.mjs", s.line)
		}
	case stepStream:
		if len(w.streams) == 0 {
			t.Fatalf("README.md:%d: a stream's output, and no stream open before it", s.line)
		}
		st := w.streams[len(w.streams)-1]
		re := outputPattern(w.local(s.text), false)
		eventually(t, 30*time.Second, func() error { // the bank's status comes by webhook, or the BFF's poll
			if !re.MatchString(st.out.String()) {
				return fmt.Errorf("README.md:%d: the stream %q printed\n%s\nwant (… for anything)\n%s", s.line, st.cmd, st.out.String(), s.text)
			}
			return nil
		})
	case stepShell:
		if cover, known := walkthroughCommands[commandsOf(s.text)]; known {
			if cover != nil {
				cover(w, s.want)
			}
			return
		}
		for _, l := range strings.Split(s.text, "\n") {
			if first := strings.Fields(l); len(first) > 0 && !strings.HasPrefix(l, " ") &&
				first[0] != "curl" && !strings.HasPrefix(first[0], "#") && !assignLine.MatchString(l) {
				t.Fatalf("README.md:%d: %q is neither curl nor NAME=$(...), nor one of the commands this test knows (walkthroughCommands)", s.line, l)
			}
		}
		if streamCurl.MatchString(s.text) {
			w.openStream(s)
			return
		}
		w.shell(s)
	}
}

// commandsOf is an sh block's commands, one a line, without comments and
// runs of spaces: how walkthroughCommands names it.
func commandsOf(block string) string {
	var out []string
	for _, l := range strings.Split(block, "\n") {
		if i := strings.Index(l, " #"); i >= 0 && !strings.ContainsAny(l, `'"`) {
			l = l[:i]
		}
		if l = strings.Join(strings.Fields(l), " "); l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// shell runs one sh block in bash with the variables the earlier blocks
// set, and checks what it printed.
func (w *walker) shell(s step) {
	t := w.t
	t.Helper()
	script := ". " + w.vars + "\n" + w.local(s.text) + "\n"
	var names []string
	for _, m := range assignLine.FindAllStringSubmatch(s.text, -1) {
		names = append(names, m[1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // a curl answers in well under a second
	defer cancel()
	var stdout, stderr strings.Builder
	cmd := exec.CommandContext(ctx, "bash", "-c", script+"status=$?\n"+declare(names, w.vars)+"exit $status\n")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("README.md:%d: %v\n%s\nstdout: %s\nstderr: %s", s.line, err, s.text, stdout.String(), stderr.String())
	}
	got := stdout.String()
	w.outputs = append(w.outputs, got)
	if s.want == "" {
		return
	}
	if !outputPattern(w.local(s.want), true).MatchString(strings.TrimSpace(got)) {
		t.Fatalf("README.md:%d: the block printed\n%s\nwant (… for anything)\n%s", s.line, got, s.want)
	}
}

// declare saves the named variables for the next blocks.
func declare(names []string, file string) string {
	if len(names) == 0 {
		return ""
	}
	return "declare -p " + strings.Join(names, " ") + " >> " + file + "\n"
}

// openStream starts a curl -N block as the reader's other terminal does.
func (w *walker) openStream(s step) {
	t := w.t
	st := &shellStream{cmd: s.text, out: &syncbuf.Buffer{}, exited: make(chan struct{})}
	cmd := exec.Command("bash", "-c", ". "+w.vars+"\n"+w.local(s.text))
	cmd.Stdout, cmd.Stderr = st.out, st.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(st.exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the reader's Ctrl-C
		<-st.exited
	})
	// The stream starts from now: it is open once its first line (the
	// retry: hint) came, before the next block pays.
	eventually(t, 10*time.Second, func() error {
		select {
		case <-st.exited:
			t.Fatalf("README.md:%d: the stream ended at once: %s", s.line, st.out.String())
		default:
		}
		if !strings.Contains(st.out.String(), "retry:") {
			return fmt.Errorf("README.md:%d: the stream printed nothing yet", s.line)
		}
		return nil
	})
	w.streams = append(w.streams, st)
}

// bankPage opens the last payUrl a block printed, as the reader's browser
// does, and checks that it is the bank's page with its Approve button. It
// does not approve: the README's next block does, with curl.
func (w *walker) bankPage(s step) {
	t := w.t
	t.Helper()
	var payURL string
	for _, out := range w.outputs {
		if m := created.FindStringSubmatch(out); m != nil {
			payURL = m[1]
		}
	}
	if payURL == "" {
		t.Fatalf("README.md:%d: approving at the bank, and no block printed a payUrl", s.line)
	}
	u, err := url.Parse(payURL)
	if err != nil {
		t.Fatal(err)
	}
	if u.Host != fmt.Sprintf("127.0.0.1:%d", w.m.simPort) {
		t.Fatalf("the payUrl %s is not on make run's simulator", payURL)
	}
	// The simulator's pages are no BFF answers: not held to the BFF's OpenAPI document.
	bank := &http.Client{Transport: baseTransport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	page, err := bank.Get(payURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(page.Body)
	page.Body.Close()
	if page.StatusCode != http.StatusOK || !strings.Contains(string(body), "Approve") {
		t.Fatalf("the bank's page %s: %d, want 200 with an Approve button:\n%s", payURL, page.StatusCode, body)
	}
	w.sawBank = true
}

// runExample runs web/client/examples/pay-from-node.mjs as the README's
// block does (npm run build, then node), against a client built into the
// test's own directory so the repository's dist/ is left alone: the
// package's package.json beside the build, so the example's import of
// @fintech-bff/client resolves to it as it does in web/client.
func (w *walker) runExample(want string) {
	t := w.t
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node (Node.js >= 20) is needed to run the client's example")
	}
	client, _ := filepath.Abs("../web/client")
	tsc := filepath.Join(client, "node_modules", "typescript", "bin", "tsc")
	if _, err := os.Stat(tsc); err != nil {
		t.Fatalf("web/client/node_modules/typescript is missing: run `npm ci --prefix web/client` (make test does it): %v", err)
	}
	pkg := filepath.Join(w.dir, "client")
	if out, err := exec.Command(node, tsc, "-p", filepath.Join(client, "tsconfig.src.json"), "--outDir", filepath.Join(pkg, "dist")).CombinedOutput(); err != nil {
		t.Fatalf("building the client: %v\n%s", err, out)
	}
	for _, f := range []string{"package.json", "examples/pay-from-node.mjs"} {
		b, err := os.ReadFile(filepath.Join(client, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(pkg, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pkg, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // it takes about a second
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(pkg, "examples", "pay-from-node.mjs"))
	cmd.Env = append(os.Environ(), "BFF_URL="+w.m.base)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the Node.js example: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	w.outputs = append(w.outputs, stdout.String())
	if want == "" || !outputPattern(w.local(want), true).MatchString(strings.TrimSpace(stdout.String())) {
		t.Fatalf("the Node.js example printed\n%s\nwant (… for anything)\n%s", stdout.String(), want)
	}
	w.ranExample = true
}

// outputPattern is a README output block as a pattern: … stands for
// anything; whole is the block being all of the output, not a part.
func outputPattern(want string, whole bool) *regexp.Regexp {
	parts := strings.Split(strings.TrimSpace(want), "…")
	for i := range parts {
		parts[i] = regexp.QuoteMeta(parts[i])
	}
	p := strings.Join(parts, "(?s:.*?)")
	if whole {
		p = `\A` + p + `\z`
	}
	return regexp.MustCompile(p)
}
