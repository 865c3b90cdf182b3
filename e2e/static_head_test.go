//go:build integration

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Through the real binary: a static file of no
// known type is application/octet-stream, never text/html; a static miss
// is logged with its path; HEAD on an allowlisted GET route answers as the
// GET without a body.
func TestStaticTypesMissesAndHead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, body := range map[string]string{"index.html": "<!doctype html><title>app</title>", "notes.weird": "<script>alert(1)</script>"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e := start(t, options{extraYAML: fmt.Sprintf("static_dir: %q", dir)})
	get := func(method, path string) (*http.Response, []byte) {
		req, _ := http.NewRequest(method, e.public+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	resp, _ := get("GET", "/notes.weird")
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "application/octet-stream" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("a file of no known type: got %d %q nosniff=%q, want 200 application/octet-stream with nosniff", resp.StatusCode, ct, resp.Header.Get("X-Content-Type-Options"))
	}
	if resp, _ := get("GET", "/assets/missing-7f3a.js?x=secret-query"); resp.StatusCode != 404 {
		t.Fatalf("a static miss: got %d, want 404", resp.StatusCode)
	}
	waitLog(t, e, `"msg":"static miss"`, `/assets/missing-7f3a.js`)
	if strings.Contains(e.logs.String(), "secret-query") {
		t.Fatal("the static miss's log line holds the query")
	}

	b := e.browser()
	b.login("head-user")
	want := b.do("GET", "/api/v2/providers", "")
	r := b.do("HEAD", "/api/v2/providers", "")
	if r.status != want.status || len(r.body) != 0 || r.header.Get("Content-Type") != want.header.Get("Content-Type") {
		t.Fatalf("HEAD: got %d, %d body bytes, %q; want %d, no body, %q", r.status, len(r.body), r.header.Get("Content-Type"), want.status, want.header.Get("Content-Type"))
	}
}
