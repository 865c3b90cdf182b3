package config

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/configuration.md from config.example.yaml")

// refEntry is one key of the configuration reference.
type refEntry struct {
	path, def, doc string
}

// reference reads config.example.yaml: every "key: default  # doc" line
// (with its indented continuation comments) becomes an entry.
func reference(t *testing.T) []refEntry {
	t.Helper()
	f, err := os.Open("../../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		out   []refEntry
		stack []string // keys by indentation level (2 spaces)
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "- ") {
			continue
		}
		if strings.HasPrefix(trimmed, "#") {
			if indent := len(line) - len(strings.TrimLeft(line, " ")); indent > 20 && len(out) > 0 {
				out[len(out)-1].doc += " " + strings.TrimSpace(strings.TrimPrefix(trimmed, "#"))
			}
			continue
		}
		level := (len(line) - len(strings.TrimLeft(line, " "))) / 2
		body, doc, _ := strings.Cut(trimmed, "#")
		key, def, ok := strings.Cut(body, ":")
		if !ok {
			continue
		}
		stack = append(stack[:min(level, len(stack))], strings.TrimSpace(key))
		def = strings.TrimSpace(def)
		if def == "" && strings.TrimSpace(doc) == "" { // a section without a note
			continue
		}
		if def == "" {
			def = "(section or list, see config.example.yaml)"
		}
		out = append(out, refEntry{path: strings.Join(stack, "."), def: def, doc: strings.TrimSpace(doc)})
	}
	return out
}

func renderReference(entries []refEntry) string {
	var b strings.Builder
	b.WriteString("# Configuration reference\n\n")
	b.WriteString("Generated from `config.example.yaml` by `go test ./internal/config -run TestConfigReference -update`;\n")
	b.WriteString("a test fails when the two differ. Every key can also be set by the environment variable shown.\n\n")
	b.WriteString("| Key | Environment | Default | Meaning |\n|---|---|---|---|\n")
	for _, e := range entries {
		env := "BFF_" + strings.ToUpper(strings.ReplaceAll(e.path, ".", "_"))
		fmt.Fprintf(&b, "| `%s` | `%s` | `%s` | %s |\n", e.path, env, strings.ReplaceAll(e.def, "|", "\\|"), strings.ReplaceAll(e.doc, "|", "\\|"))
	}
	return b.String()
}

// TestConfigReference keeps docs/configuration.md in step with
// config.example.yaml, and checks that every documented key is a real one.
func TestConfigReference(t *testing.T) {
	entries := reference(t)
	if len(entries) < 40 {
		t.Fatalf("read %d keys from config.example.yaml, want them all", len(entries))
	}
	known := map[string]string{}
	for _, k := range envKeys() {
		known[k.path] = k.name
	}
	for _, e := range entries {
		if known[e.path] == "" {
			t.Errorf("config.example.yaml documents %q, which is not a configuration key", e.path)
		}
	}
	want := renderReference(entries)
	const doc = "../../docs/configuration.md"
	if *update {
		if err := os.WriteFile(doc, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(doc)
	if err != nil || string(got) != want {
		t.Fatalf("docs/configuration.md is out of date: run go test ./internal/config -run TestConfigReference -update")
	}
}
