package edge

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"regexp"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/fintech-bff/bff/internal/problem"
)

// Static is a built web app served at / from the BFF's own origin
// (static_dir), so the session cookie is first-party by construction.
//
// A path that names a file serves it; any other path without a file
// extension serves index.html (the app's router takes it from there); a
// missing asset is 404. /api and /auth are never the app's. Files are read
// through an os.Root: no path, .. or symlink leaves the directory, and no
// dotfile is served.
type Static struct {
	root *os.Root
	hsts bool
}

// OpenStatic opens dir, which must hold index.html. hsts adds
// Strict-Transport-Security (public_url is https).
func OpenStatic(dir string, hsts bool) (*Static, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("static_dir: %w", err)
	}
	fi, err := root.Stat("index.html")
	if err != nil || !fi.Mode().IsRegular() {
		_ = root.Close()
		return nil, fmt.Errorf("static_dir: %q has no index.html: it must be a built web app", dir)
	}
	return &Static{root: root, hsts: hsts}, nil
}

// Close releases the directory.
func (s *Static) Close() error { return s.root.Close() }

// appCSP is the app's Content-Security-Policy: its own scripts, styles and
// API only, no inline script, never framed.
const appCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

const (
	immutable  = "public, max-age=31536000, immutable"
	revalidate = "no-cache"
)

// fingerprinted finds the segment before the extension that a build tool
// puts a content hash in, such as index-B4x9_kQz.js, app.3f2a9c1e.css or
// esbuild's app-TEVIXJDC.js.
var fingerprinted = regexp.MustCompile(`[.-]([A-Za-z0-9_]{8,})\.[A-Za-z0-9]+$`)

var digit, upperOnly = regexp.MustCompile(`[0-9]`), regexp.MustCompile(`^[A-Z0-9]+$`)

// isFingerprinted reports a content-hashed file name: a segment of at least
// 8 characters before the extension that holds a digit or is all capitals
// (base32). Only these are cached for long; index.html and everything else
// is revalidated on every load.
func isFingerprinted(name string) bool {
	m := fingerprinted.FindStringSubmatch(path.Base(name))
	return m != nil && (digit.MatchString(m[1]) || upperOnly.MatchString(m[1]))
}

// handler serves GET and HEAD for every path the other routes do not take.
func (s *Static) handler() echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		p := r.URL.Path
		if p == "/api" || p == "/auth" || strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/auth/") {
			return echo.ErrNotFound // the BFF's own, never the app's: a problem, not index.html
		}
		state(c).route = "static"
		name := strings.TrimPrefix(path.Clean("/"+p), "/")
		if name == "" {
			name = "index.html"
		}
		f, fi, err := s.open(name)
		if errors.Is(err, fs.ErrNotExist) && path.Ext(name) == "" {
			name = "index.html" // a route of the app
			f, fi, err = s.open(name)
		}
		if err != nil {
			return problem.New(problem.CodeNotFound, "no such file")
		}
		defer f.Close()
		s.headers(c.Response().Header(), name)
		http.ServeContent(c.Response(), r, name, fi.ModTime(), f)
		return nil
	}
}

// open opens a regular, non-hidden file under the root; anything else is
// fs.ErrNotExist.
func (s *Static) open(name string) (io.ReadSeekCloser, fs.FileInfo, error) {
	for _, seg := range strings.Split(name, "/") {
		if strings.HasPrefix(seg, ".") {
			return nil, nil, fs.ErrNotExist
		}
	}
	f, err := s.root.Open(name)
	if err != nil { // missing, unreadable, or a symlink out of the root
		return nil, nil, fs.ErrNotExist
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, nil, fs.ErrNotExist
	}
	return f, fi, nil
}

// headers sets the app's security and caching headers.
func (s *Static) headers(h http.Header, name string) {
	h.Set("Content-Security-Policy", appCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	if s.hsts {
		h.Set("Strict-Transport-Security", "max-age=31536000") // a year
	}
	if isFingerprinted(name) {
		h.Set("Cache-Control", immutable)
	} else {
		h.Set("Cache-Control", revalidate)
	}
}
