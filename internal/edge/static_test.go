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

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
)

// staticApp writes a small built app into a temp dir, with a file outside
// it that a symlink inside points at, and returns the public edge serving it.
func staticApp(t *testing.T, hsts bool) http.Handler {
	t.Helper()
	base := t.TempDir()
	dir := filepath.Join(base, "app")
	files := map[string]string{
		"index.html":               "<!doctype html><title>app</title>",
		"assets/index-B4x9_kQz.js": "console.log('app')",
		"assets/logo.svg":          "<svg/>",
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
	upstream, _ := url.Parse("http://127.0.0.1:1")
	fwd := proxy.New(proxy.Options{BaseURL: upstream, Routes: proxy.NewRoutes(nil), Tokens: fixedToken{}})
	return NewPublic(Deps{Logger: slog.New(slog.DiscardHandler), Metrics: NewMetrics(prometheus.NewRegistry()),
		Forwarder: fwd, PublicOrigin: "https://app.example.com", Static: st})
}

func TestStaticApp(t *testing.T) {
	app := staticApp(t, false)
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

func TestStaticAppHSTS(t *testing.T) {
	w := httptest.NewRecorder()
	staticApp(t, true).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
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
