package redistest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// DocumentedUser returns the rules of the Redis ACL user that
// docs/operations.md ("Sharing a Redis") gives operators, with prefix for
// its key prefix "bff:" and password for its placeholder: tests run as
// that very user, so the document cannot drift from what the BFF needs.
func DocumentedUser(t testing.TB, prefix, password string) []string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("DocumentedUser: no go.mod above the test's directory")
		}
		dir = parent
	}
	doc, err := os.ReadFile(filepath.Join(dir, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	const head = "ACL SETUSER bff "
	for _, line := range strings.Split(string(doc), "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), head)
		if !ok {
			continue
		}
		rules := strings.Fields(rest)
		seen := map[string]bool{}
		for i, r := range rules {
			switch {
			case strings.HasPrefix(r, ">"):
				rules[i], seen[">"] = ">"+password, true
			case r == "~bff:*":
				rules[i], seen["~"] = "~"+prefix+"*", true
			case r == "&bff:*":
				rules[i], seen["&"] = "&"+prefix+"*", true
			}
		}
		if len(seen) != 3 {
			t.Fatalf("docs/operations.md: %q lacks a >password, ~bff:* or &bff:*", line)
		}
		return rules
	}
	t.Fatalf("docs/operations.md has no line %q", head+"...")
	return nil
}

// SetUser runs ACL SETUSER name rules... on the server, as its default
// user: rules as an operator writes them ("on", ">password", "~bff:*",
// "+get", ...).
func (s *Server) SetUser(t testing.TB, name string, rules ...string) {
	t.Helper()
	c := s.Client()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	args := []any{"ACL", "SETUSER", name}
	for _, r := range rules {
		args = append(args, r)
	}
	if err := c.Do(ctx, args...).Err(); err != nil {
		t.Fatalf("ACL SETUSER %s on %s: %v", name, s.Name, err)
	}
}

// Denials returns what the server's ACL refused since it started (ACL
// LOG: the user, the command, and the key, channel or command refused),
// one line each.
func (s *Server) Denials(t testing.TB) []string {
	t.Helper()
	c := s.Client()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	entries, err := c.ACLLog(ctx, 128).Result()
	if err != nil {
		t.Fatalf("ACL LOG on %s: %v", s.Name, err)
	}
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, fmt.Sprintf("%s: user %q refused %s %q (%s, %d times)", s.Name, e.Username, e.Reason, e.Object, e.Context, e.Count))
	}
	return out
}

// AllKeys returns every key of the server, whatever its prefix.
func (s *Server) AllKeys(t testing.TB) []string {
	t.Helper()
	c := s.Client()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return Keys(ctx, c, "")
}

// SetUser runs ACL SETUSER on every node: a Cluster keeps its users per
// node.
func (c *Cluster) SetUser(t testing.TB, name string, rules ...string) {
	t.Helper()
	for _, s := range c.Nodes {
		s.SetUser(t, name, rules...)
	}
}

// Denials returns every node's ACL LOG (Server.Denials).
func (c *Cluster) Denials(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, s := range c.Nodes {
		out = append(out, s.Denials(t)...)
	}
	return out
}

// AllKeys returns every key of every node.
func (c *Cluster) AllKeys(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, s := range c.Nodes {
		out = append(out, s.AllKeys(t)...)
	}
	return out
}
