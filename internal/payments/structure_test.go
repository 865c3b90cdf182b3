package payments_test

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The package's shape is part of its review: each file depends only on the
// files before it in the order the package doc states, no type has more
// than maxMethods methods (promoted ones included), and no function is longer than maxFuncLines
// lines (here and in cmd/bff, which puts the parts together).
const (
	maxMethods   = 15
	maxFuncLines = 80
)

// TestFileOrder checks the order stated in the package doc (payments.go):
// every use of a name declared in another file of the package (a type, a
// function, a method, a field, a constant, a variable) points to a file
// earlier in the list, and the list names every file.
func TestFileOrder(t *testing.T) {
	order := statedOrder(t)
	files, info, fset := checkPackage(t)
	index := map[string]int{}
	for i, f := range order {
		index[f] = i
	}
	var names []string
	for name := range files {
		names = append(names, name)
		if _, ok := index[name]; !ok {
			t.Errorf("%s is not in the package doc's file order", name)
		}
	}
	for _, name := range order {
		if _, ok := files[name]; !ok {
			t.Errorf("the package doc's file order names %s, which does not exist", name)
		}
	}
	violations := fileDependencies(files, info, fset, index)
	for _, v := range violations {
		t.Error(v)
	}
	if len(names) < 10 {
		t.Fatalf("read %d files; the check reads nothing", len(names))
	}
}

// fileDependencies lists each use of a name from a later file.
func fileDependencies(files map[string]*ast.File, info *types.Info, fset *token.FileSet, index map[string]int) []string {
	var out []string
	seen := map[string]bool{}
	for name, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			if !ok {
				return true
			}
			obj := info.Uses[id]
			if obj == nil || obj.Pkg() == nil || obj.Pkg().Path() != "github.com/fintech-bff/bff/internal/payments" {
				return true
			}
			declared := filepath.Base(fset.Position(obj.Pos()).Filename)
			if declared == name || !declaredAtTop(obj) {
				return true
			}
			if index[declared] > index[name] {
				msg := fmt.Sprintf("%s uses %s, declared in %s, which comes after it", name, obj.Name(), declared)
				if !seen[msg] {
					seen[msg] = true
					out = append(out, msg)
				}
			}
			return true
		})
	}
	slices.Sort(out)
	return out
}

// declaredAtTop reports a name that belongs to the package rather than to
// one function: package-level, or a method or field of a package type.
func declaredAtTop(obj types.Object) bool {
	switch o := obj.(type) {
	case *types.Func:
		return true
	case *types.Var:
		if o.IsField() {
			return true
		}
	}
	return obj.Parent() == obj.Pkg().Scope()
}

// TestMethodsPerType: no type of the package has more than maxMethods
// methods in its whole method set: its own, those promoted from what it
// embeds (base's, on every part), and those of its pointer. Methods
// declared only for tests (export_test.go) are not counted: the package is
// read without its test files. Ledger is not counted: it is the union of
// the parts' slices that Options takes (the process has one ledger), and no
// part holds it.
func TestMethodsPerType(t *testing.T) {
	_, info, _ := checkPackage(t)
	counted, most, widest := 0, 0, ""
	for _, obj := range info.Defs {
		tn, ok := obj.(*types.TypeName)
		if !ok || tn.Parent() != tn.Pkg().Scope() {
			continue
		}
		named, ok := tn.Type().(*types.Named)
		if !ok || tn.Name() == "Ledger" {
			continue
		}
		counted++
		set := types.NewMethodSet(named)
		if _, isInterface := named.Underlying().(*types.Interface); !isInterface {
			set = types.NewMethodSet(types.NewPointer(named))
		}
		if n := set.Len(); n > maxMethods {
			t.Errorf("%s has %d methods (promoted ones included); at most %d", tn.Name(), n, maxMethods)
		} else if n > most {
			most, widest = n, tn.Name()
		}
	}
	if counted < 10 {
		t.Fatalf("counted %d types; the check reads nothing", counted)
	}
	t.Logf("the widest type is %s, %d methods", widest, most)
}

// TestFunctionLength: no function in the package or in cmd/bff, their
// tests included, is longer than maxFuncLines lines.
func TestFunctionLength(t *testing.T) {
	for _, dir := range []string{".", "../../cmd/bff"} {
		fset := token.NewFileSet()
		n := 0
		for _, f := range parseDir(t, fset, dir, true) {
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				n++
				lines := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
				if lines > maxFuncLines {
					t.Errorf("%s: %s is %d lines; at most %d", fset.Position(fd.Pos()), fd.Name.Name, lines, maxFuncLines)
				}
			}
		}
		if n < 10 {
			t.Fatalf("%s: read %d functions; the check reads nothing", dir, n)
		}
	}
}

// statedOrder reads the file order from the package doc in payments.go:
// the indented lines that start with a file name.
func statedOrder(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("payments.go")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	line := regexp.MustCompile(`^//\t(\w+\.go)\s`)
	var order []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := line.FindStringSubmatch(sc.Text()); m != nil {
			order = append(order, m[1])
		}
		if strings.HasPrefix(sc.Text(), "package ") {
			break
		}
	}
	if len(order) == 0 {
		t.Fatal("the package doc states no file order")
	}
	return order
}

// parseDir parses the Go files of dir: its test files too when tests.
func parseDir(t *testing.T, fset *token.FileSet, dir string, tests bool) map[string]*ast.File {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*ast.File{}
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") && !tests {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(p)] = f
	}
	return files
}

// checkPackage type-checks the package's own files against its imports'
// export data, as the go command built them.
func checkPackage(t *testing.T) (map[string]*ast.File, *types.Info, *token.FileSet) {
	t.Helper()
	fset := token.NewFileSet()
	files := parseDir(t, fset, ".", false)
	out, err := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	exports := map[string]string{}
	for _, l := range strings.Split(string(bytes.TrimSpace(out)), "\n") {
		if path, file, ok := strings.Cut(l, "\t"); ok && file != "" {
			exports[path] = file
		}
	}
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Defs: map[*ast.Ident]types.Object{}}
	list := make([]*ast.File, 0, len(files))
	for _, f := range files {
		list = append(list, f)
	}
	conf := types.Config{Importer: imp}
	if _, err := conf.Check("github.com/fintech-bff/bff/internal/payments", fset, list, info); err != nil {
		t.Fatalf("type-checking the package: %v", err)
	}
	return files, info, fset
}
