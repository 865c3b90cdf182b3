package problem

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// catalogueDoc is the error catalogue every frontend reads. Its tables sit
// between marker comments, one row per entry, the entry's name in backticks
// in the first cell:
//
//	<!-- catalogue:envelope --> | `name` | … |                   <!-- /catalogue:envelope -->
//	<!-- catalogue:actions -->  | `action` | … |                 <!-- /catalogue:actions -->
//	<!-- catalogue:codes -->    | `CODE` | status | `action` | yes/no | when | what to do |
//	                                                            <!-- /catalogue:codes -->
//
// A code the BFF passes on from the upstream with the upstream's status
// (not one of specs) has "as upstream" in its status cell and "by status"
// in its action and retryable cells.
const catalogueDoc = "../../docs/errors.md"

const (
	passThroughStatus = "as upstream"
	passThroughAction = "by status"
)

// catalogueRow is one row of a catalogue table.
type catalogueRow struct {
	line  int
	name  string   // the first name in backticks in the first cell
	first string   // the whole first cell
	cells []string // the cells after the first, trimmed
}

// readCatalogue returns the rows of each marked section of the document.
func readCatalogue(t *testing.T) map[string][]catalogueRow {
	t.Helper()
	f, err := os.Open(catalogueDoc)
	if err != nil {
		t.Fatalf("the error catalogue: %v (it documents every code of this package)", err)
	}
	defer f.Close()
	reBegin := regexp.MustCompile(`^<!-- catalogue:([a-z]+) -->$`)
	reEnd := regexp.MustCompile(`^<!-- /catalogue:([a-z]+) -->$`)
	reRow := regexp.MustCompile("^\\|\\s*`([^`]+)`")
	out := map[string][]catalogueRow{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if m := reBegin.FindStringSubmatch(line); m != nil {
			if section != "" {
				t.Fatalf("docs/errors.md:%d: section %q opens inside section %q", n, m[1], section)
			}
			section = m[1]
			out[section] = out[section][:0:0]
			continue
		}
		if m := reEnd.FindStringSubmatch(line); m != nil {
			if m[1] != section {
				t.Fatalf("docs/errors.md:%d: section %q closes, but %q is open", n, m[1], section)
			}
			section = ""
			continue
		}
		m := reRow.FindStringSubmatch(line)
		if section == "" || m == nil {
			continue
		}
		cells := strings.Split(strings.TrimSuffix(line, "|"), "|")[1:]
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		out[section] = append(out[section], catalogueRow{line: n, name: m[1], first: cells[0], cells: cells[1:]})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if section != "" {
		t.Fatalf("docs/errors.md: section %q is never closed (<!-- /catalogue:%s -->)", section, section)
	}
	for _, s := range []string{"envelope", "actions", "codes"} {
		if _, ok := out[s]; !ok {
			t.Fatalf("docs/errors.md has no <!-- catalogue:%s --> … <!-- /catalogue:%s --> section", s, s)
		}
	}
	return out
}

// declaredConstants returns the string constants of this package's
// non-test files whose names start with prefix, by value.
func declaredConstants(t *testing.T, prefix string) map[string]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	out := map[string]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if !strings.HasPrefix(id.Name, prefix) || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out[v] = id.Name
				}
			}
		}
	}
	return out
}

// upstreamOnlyCodes runs FromUpstream over every upstream status and every
// error type and status value the normaliser knows (upstreamTypes,
// statusTypes), and returns the codes it produces that are not the BFF's
// own (specs), each with the upstream statuses that produced it.
func upstreamOnlyCodes() map[string][]*Problem {
	var bodies []string
	for typ := range upstreamTypes {
		bodies = append(bodies, `{"type":"`+typ+`","message":"m"}`, `{"message":"`+typ+`"}`)
	}
	for status := range statusTypes {
		bodies = append(bodies, `{"status":"`+status+`","message":"m"}`)
	}
	bodies = append(bodies, "", "not json", `{"message":"m"}`)
	out := map[string][]*Problem{}
	for status := 300; status <= 599; status++ {
		for _, b := range bodies {
			p := FromUpstream(status, http.Header{}, []byte(b))
			if _, own := specs[p.Code]; !own {
				out[p.Code] = append(out[p.Code], p)
			}
		}
	}
	return out
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// TestCatalogueCodes keeps docs/errors.md's code table equal to the codes
// the BFF can return: every key of specs, every Code constant, and every
// code FromUpstream makes of the upstream's known error types.
func TestCatalogueCodes(t *testing.T) {
	rows := readCatalogue(t)["codes"]
	documented := map[string]catalogueRow{}
	for _, r := range rows {
		if prev, dup := documented[r.name]; dup {
			t.Errorf("docs/errors.md:%d: code %s is documented twice (also line %d): remove one row", r.line, r.name, prev.line)
		}
		documented[r.name] = r
	}

	// Every Code constant must be one of the BFF's own codes: New turns an
	// unknown code into INTERNAL.
	declared := declaredConstants(t, "Code")
	for code, name := range declared {
		if _, ok := specs[code]; !ok {
			t.Errorf("%s (%q) is declared but has no entry in specs (problem.go): add its status, title, action and retryability there", name, code)
		}
	}
	upstreamOnly := upstreamOnlyCodes()
	want := map[string]bool{}
	for code := range specs {
		want[code] = true
	}
	for code := range declared {
		want[code] = true
	}
	for code := range upstreamOnly {
		want[code] = true
	}

	for _, code := range sortedKeys(want) {
		r, ok := documented[code]
		if !ok {
			if s, own := specs[code]; own {
				t.Errorf("docs/errors.md: code %s is missing: add the row \"| `%s` | %d | `%s` | %s | when it happens | what to do |\" to the code table", code, code, s.status, s.action, yesNo(s.retryable))
			} else {
				t.Errorf("docs/errors.md: code %s (made by FromUpstream from an upstream reply) is missing: add the row \"| `%s` | %s | %s | %s | when it happens | what to do |\" to the code table", code, code, passThroughStatus, passThroughAction, passThroughAction)
			}
			continue
		}
		if len(r.cells) < 5 {
			t.Errorf("docs/errors.md:%d: code %s: the row has %d cells after the code, want 5: status, action, retryable, when it happens, what to do", r.line, code, len(r.cells))
			continue
		}
		for i, what := range []string{"when it happens", "what to do"} {
			if r.cells[3+i] == "" {
				t.Errorf("docs/errors.md:%d: code %s: the %q cell is empty: say it", r.line, code, what)
			}
		}
		s, own := specs[code]
		if !own {
			if r.cells[0] != passThroughStatus || r.cells[1] != passThroughAction || r.cells[2] != passThroughAction {
				t.Errorf("docs/errors.md:%d: code %s keeps the upstream's status: write %q, %q, %q in its status, action and retryable cells (got %q, %q, %q)",
					r.line, code, passThroughStatus, passThroughAction, passThroughAction, r.cells[0], r.cells[1], r.cells[2])
			}
			continue
		}
		if got := r.cells[0]; got != strconv.Itoa(s.status) {
			t.Errorf("docs/errors.md:%d: code %s: status %q, but specs says %d: change the row to %d", r.line, code, got, s.status, s.status)
		}
		if got, want := r.cells[1], "`"+s.action+"`"; got != want {
			t.Errorf("docs/errors.md:%d: code %s: action %s, but specs says %s: change the row to %s", r.line, code, got, want, want)
		}
		if got, want := r.cells[2], yesNo(s.retryable); got != want {
			t.Errorf("docs/errors.md:%d: code %s: retryable %q, but specs says %q: change the row to %q", r.line, code, got, want, want)
		}
	}
	for _, r := range rows {
		if !want[r.name] {
			t.Errorf("docs/errors.md:%d: code %s is documented, but the BFF never returns it (not in specs, not made by FromUpstream): remove the row, or add the code to problem.go first", r.line, r.name)
		}
	}
}

// TestCataloguePassThrough checks what the document says of every code
// FromUpstream passes on from the upstream: it keeps the upstream's status,
// and its action and retryability follow that status (fix_request for a
// 4xx, retry_later for 408, 429 and 5xx).
func TestCataloguePassThrough(t *testing.T) {
	for code, ps := range upstreamOnlyCodes() {
		for _, p := range ps {
			ue, ok := p.Err.(*UpstreamError)
			if !ok {
				t.Fatalf("%s: the cause is %T, want *UpstreamError", code, p.Err)
			}
			wantAction, wantRetry := ActionFixRequest, false
			if ue.Status == http.StatusTooManyRequests || ue.Status == http.StatusRequestTimeout || ue.Status >= 500 {
				wantAction, wantRetry = ActionRetryLater, true
			}
			if p.Status != ue.Status || p.Action != wantAction || p.Retryable != wantRetry {
				t.Errorf("upstream %d %s: got %d %s retryable=%v, want the upstream's status with %s retryable=%v, as docs/errors.md says of codes passed on (%q)",
					ue.Status, code, p.Status, p.Action, p.Retryable, wantAction, wantRetry, passThroughStatus)
			}
		}
	}
}

// TestCatalogueActions keeps docs/errors.md's action table equal to the
// Action constants.
func TestCatalogueActions(t *testing.T) {
	rows := readCatalogue(t)["actions"]
	declared := declaredConstants(t, "Action")
	documented := map[string]int{}
	for _, r := range rows {
		if prev, dup := documented[r.name]; dup {
			t.Errorf("docs/errors.md:%d: action %s is documented twice (also line %d): remove one row", r.line, r.name, prev)
		}
		documented[r.name] = r.line
		if len(r.cells) < 1 || r.cells[len(r.cells)-1] == "" {
			t.Errorf("docs/errors.md:%d: action %s: say what a frontend does", r.line, r.name)
		}
		if _, ok := declared[r.name]; !ok {
			t.Errorf("docs/errors.md:%d: action %s is documented, but no Action constant has that value: remove the row", r.line, r.name)
		}
	}
	for _, action := range sortedKeys(declared) {
		if _, ok := documented[action]; !ok {
			t.Errorf("docs/errors.md: action %s (%s) is missing: add the row \"| `%s` | what a frontend does |\" to the action table", action, declared[action], action)
		}
	}
	for code, s := range specs {
		if _, ok := declared[s.action]; !ok {
			t.Errorf("specs[%s] has action %q, which is no Action constant", code, s.action)
		}
	}
}

// TestCatalogueEnvelope keeps docs/errors.md's envelope table equal to the
// members Write renders (Problem's JSON fields and the extension members).
func TestCatalogueEnvelope(t *testing.T) {
	rows := readCatalogue(t)["envelope"]
	reName := regexp.MustCompile("`([^`]+)`")
	documented := map[string]int{}
	for _, r := range rows {
		// The first cell may name several members: "`cost`, `balance`".
		for _, m := range reName.FindAllStringSubmatch(r.first, -1) {
			if prev, dup := documented[m[1]]; dup {
				t.Errorf("docs/errors.md:%d: envelope member %s is documented twice (also line %d): remove one", r.line, m[1], prev)
			}
			documented[m[1]] = r.line
		}
	}
	var members []string
	typ := reflect.TypeFor[Problem]()
	for i := 0; i < typ.NumField(); i++ {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		members = append(members, name)
		if _, ok := documented[name]; !ok {
			t.Errorf("docs/errors.md: envelope member %s (Problem.%s) is missing: add the row \"| `%s` | what it holds |\" to the envelope table", name, typ.Field(i).Name, name)
		}
	}
	for _, name := range extensionMembers {
		members = append(members, name)
		if _, ok := documented[name]; !ok {
			t.Errorf("docs/errors.md: extension member %s is missing: add it to the envelope table", name)
		}
	}
	for name, line := range documented {
		if !slices.Contains(members, name) {
			t.Errorf("docs/errors.md:%d: envelope member %s is documented, but Problem renders no such member: remove it", line, name)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
