package edge

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"path"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/fintech-bff/bff/internal/problem"
)

// Static is a built web app served at / from the BFF's own origin
// (static_dir), so the session cookie is first-party by construction.
//
// A path that names a file serves it; any other path without a file
// extension serves index.html (the app's router takes it from there); a
// missing asset is 404, logged with its path. /api and /auth are never the
// app's. Files are read through an os.Root: no path, .. or symlink leaves the
// directory, and no dotfile is served. A file whose extension names no known
// type is application/octet-stream, never sniffed.
type Static struct {
	root *os.Root
	hsts bool
	// missLogEvery is the least time between two "static miss" lines.
	missLogEvery time.Duration
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
	return &Static{root: root, hsts: hsts, missLogEvery: time.Second}, nil
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
// A miss is logged to log with its path, which the access log line (route
// "static") does not carry: an operator sees which asset a release lost.
func (s *Static) handler(log *slog.Logger) echo.HandlerFunc {
	// A scanner's misses: one line a second at most, with the count left out.
	misses := newSparseLog(log, slog.LevelInfo, "static miss", s.missLogEvery)
	return func(c echo.Context) error {
		r := c.Request()
		p := r.URL.Path
		if bffOwn(p) {
			return echo.ErrNotFound // the BFF's own, never the app's: a problem, not index.html
		}
		st := state(c)
		st.route = "static"
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
			misses.write(r.Context(), slog.String("requestId", st.requestID), slog.String("path", logPath(p)))
			return problem.New(problem.CodeNotFound, "no such file")
		}
		defer f.Close()
		h := c.Response().Header()
		s.headers(h, name)
		h.Set("Content-Type", contentType(name)) // set, so ServeContent never sniffs
		http.ServeContent(c.Response(), r, name, fi.ModTime(), f)
		return nil
	}
}

// webTypes are the types of files a built web app ships that Go's own
// table lacks, so they do not hang on the host's /etc/mime.types.
var webTypes = map[string]string{
	".woff2": "font/woff2", ".woff": "font/woff", ".ttf": "font/ttf", ".otf": "font/otf",
	".ico": "image/x-icon", ".txt": "text/plain; charset=utf-8", ".map": "application/json",
	".webmanifest": "application/manifest+json",
}

// contentType is the Content-Type of a static file, by its extension. A
// file of no known type is application/octet-stream: sniffing its bytes,
// as http.ServeContent would, makes a stray file holding markup text/html
// on the app's origin, a page that runs with the user's session
// (docs/endpoints.md, "The web app").
func contentType(name string) string {
	ext := strings.ToLower(path.Ext(name))
	if t, ok := webTypes[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return t
	}
	return "application/octet-stream"
}

// maxLogPath bounds the path a miss logs: a scanner's 8 KiB request line
// is not worth a log line of that size.
const maxLogPath = 256

// logPath is a request path made safe for a log line: control, format
// (bidi overrides) and separator characters dropped, so a text log gets no
// forged line; invalid UTF-8 replaced by U+FFFD; cut on a character
// boundary after maxLogPath bytes, "…" marking the cut. The query is not
// part of a path: callers pass r.URL.Path, never the request URI.
func logPath(p string) string {
	var b strings.Builder
	for _, r := range p {
		if !unicode.IsPrint(r) { // IsPrint keeps the ASCII space, no other
			continue
		}
		if b.Len()+utf8.RuneLen(r) > maxLogPath {
			b.WriteString("…")
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// open opens a regular, non-hidden file under the root; anything else is
// fs.ErrNotExist.
// bffOwn reports whether path is under one of the BFF's own prefixes
// (/api, /auth, /bff): a path there that no route serves is the BFF's 404,
// never the app's index.html.
func bffOwn(path string) bool {
	for _, prefix := range []string{"/api", "/auth", "/bff"} {
		if path == prefix || strings.HasPrefix(path, prefix+"/") {
			return true
		}
	}
	return false
}

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
