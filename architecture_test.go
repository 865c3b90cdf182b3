package bff

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The imports between the BFF's packages are the ones docs/architecture.md
// allows: every production package has a row there, and imports no
// internal package its row does not list.
func TestArchitecture(t *testing.T) {
	doc, err := os.ReadFile("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	allowed, err := importsTable(doc)
	if err != nil {
		t.Fatalf("docs/architecture.md: %v", err)
	}
	module, pkgs := listPackages(t)
	for _, v := range violations(module, allowed, pkgs) {
		t.Error(v)
	}
}

// The checker is shown to catch an import its table does not list, a
// listed import the package does not make, a package with no row, and a
// row for a package that does not exist.
func TestArchitectureCatchesWhatTheTableDoesNotAllow(t *testing.T) {
	allowed, err := importsTable([]byte(`
| Package | Owns | Imports |
|---|---|---|
| ` + "`internal/proxy`" + ` | forwarding | ` + "`internal/problem`" + ` |
| ` + "`internal/problem`" + ` | errors | — |
| ` + "`internal/gone`" + ` | nothing | — |
`))
	if err != nil {
		t.Fatal(err)
	}
	const m = "example.com/bff"
	got := violations(m, allowed, []listed{
		{ImportPath: m + "/internal/proxy", GoFiles: []string{"a.go"}, Imports: []string{"net/http", m + "/internal/payments"}},
		{ImportPath: m + "/internal/problem", GoFiles: []string{"a.go"}},
		{ImportPath: m + "/internal/extra", GoFiles: []string{"a.go"}},
	})
	want := []string{
		"internal/extra has no row in docs/architecture.md's table of imports",
		"internal/gone has a row in docs/architecture.md's table of imports, and no package",
		"internal/proxy imports internal/payments, which its row in docs/architecture.md does not list",
		"internal/proxy's row in docs/architecture.md lists internal/problem, which it does not import",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// listed is what go list says of a package.
type listed struct {
	ImportPath string
	GoFiles    []string
	Imports    []string
}

// listPackages lists the module's packages with go list (as the build
// sees them: this machine's GOOS, no build tags).
func listPackages(t *testing.T) (string, []listed) {
	t.Helper()
	mod, err := exec.Command("go", "list", "-m").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,GoFiles,Imports", "./...")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []listed
	for d := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listed
		if err := d.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return strings.TrimSpace(string(mod)), pkgs
}

// importsTable reads the table whose header is "| Package | Owns | Imports
// |": for each package (its path in the module, in backquotes), the
// internal packages it may import.
func importsTable(doc []byte) (map[string]map[string]bool, error) {
	path := regexp.MustCompile("`([a-z0-9./_-]+)`")
	table := map[string]map[string]bool{}
	in := false
	for _, line := range strings.Split(string(doc), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case !in && strings.HasPrefix(strings.ReplaceAll(line, " ", ""), "|Package|Owns|Imports|"):
			in = true
		case in && !strings.HasPrefix(line, "|"):
			in = false
		case in && !strings.HasPrefix(line, "|---"):
			cells := strings.Split(strings.Trim(line, "|"), "|")
			if len(cells) != 3 {
				return nil, errors.New("a row of the table of imports without 3 cells: " + line)
			}
			pkg := path.FindStringSubmatch(cells[0])
			if pkg == nil {
				return nil, errors.New("a row of the table of imports names no package: " + line)
			}
			if table[pkg[1]] != nil {
				return nil, errors.New("two rows for " + pkg[1])
			}
			table[pkg[1]] = map[string]bool{}
			for _, m := range path.FindAllStringSubmatch(cells[2], -1) {
				table[pkg[1]][m[1]] = true
			}
		}
	}
	if len(table) == 0 {
		return nil, errors.New("no table of imports (| Package | Owns | Imports |)")
	}
	return table, nil
}

// violations are the imports of pkgs the table does not allow, the
// production packages it has no row for, and its rows for packages that do
// not exist, sorted.
func violations(module string, table map[string]map[string]bool, pkgs []listed) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range pkgs {
		rel, ok := strings.CutPrefix(p.ImportPath, module+"/")
		if !ok {
			continue // the module's root: this test, and no production code
		}
		seen[rel] = true
		allowed, listed := table[rel]
		if !listed {
			if len(p.GoFiles) > 0 {
				out = append(out, rel+" has no row in docs/architecture.md's table of imports")
			}
			continue
		}
		imported := map[string]bool{}
		for _, imp := range p.Imports {
			dep, ok := strings.CutPrefix(imp, module+"/")
			if ok && !allowed[dep] {
				out = append(out, rel+" imports "+dep+", which its row in docs/architecture.md does not list")
			}
			imported[dep] = ok
		}
		// Both directions: a row lists only what the package imports, so
		// the table draws the code as it is, not as it may become.
		for dep := range allowed {
			if !imported[dep] {
				out = append(out, rel+"'s row in docs/architecture.md lists "+dep+", which it does not import")
			}
		}
	}
	for rel := range table {
		if !seen[rel] {
			out = append(out, rel+" has a row in docs/architecture.md's table of imports, and no package")
		}
	}
	sort.Strings(out)
	return out
}
