package edge

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
	"github.com/fintech-bff/bff/internal/testing/syncbuf"
)

// staticApp writes a small built app into a temp dir, with a file outside
// it that a symlink inside points at, and returns the public edge serving it
// and its log.
func staticApp(t *testing.T, hsts bool) (http.Handler, *syncbuf.Buffer) {
	t.Helper()
	base := t.TempDir()
	dir := filepath.Join(base, "app")
	files := map[string]string{
		"index.html":               "<!doctype html><title>app</title>",
		"assets/index-B4x9_kQz.js": "console.log('app')",
		"assets/logo.svg":          "<svg/>",
		"assets/notes.weird":       "<html><script>alert(document.cookie)</script>",
		"assets/LICENSE":           "<!doctype html><p>MIT</p>",
		"assets/font.woff2":        "wOF2",
		".env":                     "SECRET=outside-the-app",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	outside := filepath.Join(base, "private.txt")
	if err := os.WriteFile(outside, []byte("private-outside-content"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "leak.txt")); err != nil {
		t.Fatal(err)
	}
	st, err := OpenStatic(dir, hsts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	st.missLogEvery = 0 // every miss logged (TestSparseLog has the throttle)
	upstream, _ := url.Parse("http://127.0.0.1:1")
	fwd := proxy.New(proxy.Options{BaseURL: upstream, Routes: proxy.NewRoutes(nil), Tokens: fixedToken{}})
	var logs syncbuf.Buffer
	return NewPublic(Deps{Observability: Observability{Logger: slog.New(slog.NewJSONHandler(&logs, nil))},
		API: API{Forwarder: fwd}, Clients: Clients{PublicOrigin: "https://app.example.com"}, Static: st}), &logs
}

func TestStaticApp(t *testing.T) {
	app, _ := staticApp(t, false)
	get := func(method, target string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		app.ServeHTTP(w, httptest.NewRequest(method, target, nil))
		return w
	}
	wantProblem := func(t *testing.T, w *httptest.ResponseRecorder, status int, code string) {
		t.Helper()
		var p problem.Problem
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != status || p.Code != code {
			t.Fatalf("got %d %s, want %d %s", w.Code, w.Body, status, code)
		}
		if strings.Contains(w.Body.String(), "outside") {
			t.Fatalf("the answer shows a file outside the app: %s", w.Body)
		}
	}

	t.Run("index and the app's routes get index.html, revalidated, with the security headers", func(t *testing.T) {
		for _, target := range []string{"/", "/index.html", "/accounts/01K/transactions", "/payments?status=ACSC", "/%2e%2e/private"} {
			w := get("GET", target)
			if w.Code != 200 || w.Body.String() != "<!doctype html><title>app</title>" {
				t.Fatalf("%s: got %d %q, want index.html", target, w.Code, w.Body)
			}
			h := w.Header()
			if h.Get("Cache-Control") != "no-cache" || h.Get("X-Content-Type-Options") != "nosniff" ||
				h.Get("Referrer-Policy") != "no-referrer" || h.Get("X-Frame-Options") != "DENY" ||
				!strings.HasPrefix(h.Get("Content-Type"), "text/html") {
				t.Fatalf("%s: headers %v", target, h)
			}
			csp := h.Get("Content-Security-Policy")
			if !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "script-src 'self';") || strings.Contains(csp, "unsafe") {
				t.Fatalf("%s: CSP %q, want own scripts only and never framed", target, csp)
			}
			if h.Get("Strict-Transport-Security") != "" {
				t.Fatalf("%s: HSTS on a plain-http deployment", target)
			}
		}
	})

	t.Run("a fingerprinted asset is cached for a year, others revalidated", func(t *testing.T) {
		w := get("GET", "/assets/index-B4x9_kQz.js")
		if w.Code != 200 || w.Body.String() != "console.log('app')" || w.Header().Get("Cache-Control") != "public, max-age=31536000, immutable" ||
			!strings.Contains(w.Header().Get("Content-Type"), "javascript") {
			t.Fatalf("got %d %v %q", w.Code, w.Header(), w.Body)
		}
		if w := get("GET", "/assets/logo.svg"); w.Code != 200 || w.Header().Get("Cache-Control") != "no-cache" {
			t.Fatalf("logo: got %d %v", w.Code, w.Header())
		}
		if w := get("HEAD", "/assets/index-B4x9_kQz.js"); w.Code != 200 || w.Body.Len() != 0 || w.Header().Get("Content-Length") != "18" {
			t.Fatalf("HEAD: got %d %v %q", w.Code, w.Header(), w.Body)
		}
	})

	t.Run("a missing asset, a dotfile and a symlink out of the app are 404", func(t *testing.T) {
		for _, target := range []string{"/assets/missing-B4x9_kQz.js", "/.env", "/assets/../.env", "/leak.txt"} {
			wantProblem(t, get("GET", target), 404, problem.CodeNotFound)
		}
	})

	t.Run("the BFF's own paths are never the app's", func(t *testing.T) {
		wantProblem(t, get("GET", "/auth/nope"), 404, problem.CodeRouteNotFound)
		wantProblem(t, get("GET", "/bff/nope"), 404, problem.CodeRouteNotFound)
		wantProblem(t, get("GET", "/bff"), 404, problem.CodeRouteNotFound)
		wantProblem(t, get("GET", "/auth"), 404, problem.CodeRouteNotFound)
	})

	t.Run("a validator from the file answers 304", func(t *testing.T) {
		first := get("GET", "/assets/logo.svg")
		r := httptest.NewRequest("GET", "/assets/logo.svg", nil)
		r.Header.Set("If-Modified-Since", first.Header().Get("Last-Modified"))
		w := httptest.NewRecorder()
		app.ServeHTTP(w, r)
		if w.Code != http.StatusNotModified {
			t.Fatalf("got %d, want 304", w.Code)
		}
	})
}

// A file of no known type is a download, never sniffed into a page that
// runs on the app's origin.
func TestStaticAppUnknownTypeIsOctetStream(t *testing.T) {
	app, _ := staticApp(t, false)
	cases := []struct{ target, want string }{
		{"/assets/notes.weird", "application/octet-stream"},
		{"/assets/LICENSE", "application/octet-stream"},
		{"/assets/font.woff2", "font/woff2"},
		{"/assets/logo.svg", "image/svg+xml"},
	}
	for _, tc := range cases {
		for _, method := range []string{"GET", "HEAD"} {
			w := httptest.NewRecorder()
			app.ServeHTTP(w, httptest.NewRequest(method, tc.target, nil))
			if w.Code != 200 || w.Header().Get("Content-Type") != tc.want || w.Header().Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("%s %s: got %d Content-Type %q nosniff %q, want 200 %q nosniff",
					method, tc.target, w.Code, w.Header().Get("Content-Type"), w.Header().Get("X-Content-Type-Options"), tc.want)
			}
		}
	}
}

// A miss is logged with its path, without the query, control characters
// or more than maxLogPath bytes, under the request's id.
func TestStaticMissLogsItsPath(t *testing.T) {
	app, logs := staticApp(t, false)
	long := "/assets/" + strings.Repeat("a", 400) + ".js"
	cases := []struct{ target, want string }{
		{"/assets/missing-B4x9_kQz.js?token=secret-query", "/assets/missing-B4x9_kQz.js"},
		{"/assets/x%0d%0a%7b%22level%22%3a%22ERROR%22%7d.js", `/assets/x{"level":"ERROR"}.js`},
		{"/assets/bidi%e2%80%aecod.js", "/assets/bidicod.js"},
		{long, long[:maxLogPath] + "…"},
	}
	for _, tc := range cases {
		from := len(logs.String())
		w := httptest.NewRecorder()
		app.ServeHTTP(w, httptest.NewRequest("GET", tc.target, nil))
		if w.Code != 404 {
			t.Fatalf("%s: got %d, want 404", tc.target, w.Code)
		}
		var miss map[string]any
		for _, line := range strings.Split(strings.TrimSpace(logs.String()[from:]), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "static miss" {
				miss = m
			}
		}
		if miss == nil || miss["path"] != tc.want || miss["requestId"] != w.Header().Get("X-Request-Id") {
			t.Errorf("%s: got miss line %v, want path %q and the request id %q", tc.target, miss, tc.want, w.Header().Get("X-Request-Id"))
		}
		if strings.Contains(logs.String()[from:], "secret-query") {
			t.Errorf("%s: the query reached the log", tc.target)
		}
	}
}

func TestStaticAppHSTS(t *testing.T) {
	w := httptest.NewRecorder()
	app, _ := staticApp(t, true)
	app.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if got := w.Header().Get("Strict-Transport-Security"); got != "max-age=31536000" {
		t.Fatalf("got HSTS %q, want a year on an https deployment", got)
	}
}

func TestOpenStaticNeedsABuiltApp(t *testing.T) {
	for name, dir := range map[string]string{"missing": filepath.Join(t.TempDir(), "nope"), "no index.html": t.TempDir()} {
		if _, err := OpenStatic(dir, false); err == nil || !strings.HasPrefix(err.Error(), "static_dir: ") {
			t.Errorf("%s: got %v, want an error naming static_dir", name, err)
		}
	}
}

func TestIsFingerprinted(t *testing.T) {
	for name, want := range map[string]bool{
		"assets/index-B4x9_kQz.js": true, "app.3f2a9c1e.css": true, "chunk-0123abcd.mjs": true,
		"app-TEVIXJDC.js": true, "index.html": false, "logo.svg": false, "chunk-abcdefgh.js": false, "a-1.js": false,
		"v1.2.js": false, "my-component.js": false,
	} {
		if got := isFingerprinted(name); got != want {
			t.Errorf("isFingerprinted(%q) = %v, want %v", name, got, want)
		}
	}
}

// FuzzLogPath: whatever a client sends, the logged path is valid UTF-8,
// holds only printable characters, is bounded, and a plain path is kept.
func FuzzLogPath(f *testing.F) {
	for _, s := range []string{"/", "/assets/app.js", "/a\r\nb", "/\xff\xfe", "/\u202e", strings.Repeat("é", 200)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got := logPath(p)
		if !utf8.ValidString(got) || len(got) > maxLogPath+len("…") {
			t.Fatalf("logPath(%q) = %q: invalid or over the bound", p, got)
		}
		for _, r := range got {
			if !unicode.IsPrint(r) {
				t.Fatalf("logPath(%q) = %q: holds %U", p, got, r)
			}
		}
		plain := len(p) <= maxLogPath
		for i := 0; i < len(p); i++ {
			plain = plain && p[i] >= 0x20 && p[i] < 0x7f
		}
		if plain && got != p {
			t.Fatalf("logPath(%q) = %q, want it unchanged", p, got)
		}
	})
}
