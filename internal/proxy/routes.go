// Package proxy forwards allowlisted API calls to the upstream with the
// user's token, and turns every upstream failure into the error envelope
// of docs/errors.md. It is plain net/http: the edge mounts it.
package proxy

import (
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/fintech-bff/bff/internal/problem"
)

// Route is one allowlisted upstream path prefix and the methods it accepts.
// GET allows HEAD as well: RFC 9110 (9.3.2) has HEAD wherever GET is
// served, and it is sent upstream as HEAD.
type Route struct {
	Prefix  string
	Methods []string
}

type route struct {
	prefix  string
	methods map[string]bool
	allow   string // the Allow header for a 405
}

// Routes is the allowlist. Matching is on whole path segments: /v2/pay
// matches /v2/pay and /v2/pay/..., never /v2/payments. Safe for concurrent use.
type Routes struct {
	routes []route // longest prefix first
}

// NewRoutes builds the allowlist.
func NewRoutes(rs []Route) *Routes {
	out := make([]route, 0, len(rs))
	for _, r := range rs {
		m := make(map[string]bool, len(r.Methods))
		for _, method := range r.Methods {
			m[strings.ToUpper(method)] = true
		}
		if m[http.MethodGet] {
			m[http.MethodHead] = true
		}
		allow := make([]string, 0, len(m))
		for method := range m {
			allow = append(allow, method)
		}
		sort.Strings(allow)
		out = append(out, route{prefix: strings.TrimSuffix(r.Prefix, "/"), methods: m, allow: strings.Join(allow, ", ")})
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i].prefix) > len(out[j].prefix) })
	return &Routes{routes: out}
}

// Prefixes lists the allowlisted prefixes (the route templates Match returns).
func (rt *Routes) Prefixes() []string {
	out := make([]string, len(rt.routes))
	for i, r := range rt.routes {
		out[i] = r.prefix
	}
	return out
}

// Match finds the route for an already checked upstream path and method. It
// returns the route's prefix (the metrics label), or a ROUTE_NOT_FOUND or
// METHOD_NOT_ALLOWED problem. The token endpoint never matches.
func (rt *Routes) Match(path, method string) (string, *problem.Problem) {
	if underPrefix(path, "/oauth") {
		return "", problem.New(problem.CodeRouteNotFound, "no API route matches this path")
	}
	for _, r := range rt.routes {
		if !underPrefix(path, r.prefix) {
			continue
		}
		if !r.methods[method] {
			p := problem.Newf(problem.CodeMethodNotAllowed, "%s is not allowed on this route", method)
			p.Allow = r.allow
			return r.prefix, p
		}
		return r.prefix, nil
	}
	return "", problem.New(problem.CodeRouteNotFound, "no API route matches this path")
}

// Under returns the longest prefix path is under, without allocating.
func (rt *Routes) Under(path string) (string, bool) {
	for _, r := range rt.routes {
		if underPrefix(path, r.prefix) {
			return r.prefix, true
		}
	}
	return "", false
}

func underPrefix(path, prefix string) bool {
	return strings.HasPrefix(path, prefix) && (len(path) == len(prefix) || path[len(prefix)] == '/')
}

// CheckPath validates the escaped upstream path of an /api request and
// returns its decoded form. It refuses, as 400 BAD_PATH, anything whose
// encoded form holds an encoded slash, backslash or NUL, and anything whose
// decoded form holds "..", "//", a "." segment, a backslash, a percent sign
// (double encoding), NUL or another control character.
func CheckPath(escaped string) (string, *problem.Problem) {
	bad := func(why string) (string, *problem.Problem) {
		return "", problem.New(problem.CodeBadPath, why)
	}
	if escaped == "" || escaped[0] != '/' {
		return bad("the path must start with /")
	}
	lower := strings.ToLower(escaped)
	for _, enc := range [...]string{"%2f", "%5c", "%00"} {
		if strings.Contains(lower, enc) {
			return bad("the path holds an encoded slash, backslash or NUL")
		}
	}
	path, err := url.PathUnescape(escaped)
	if err != nil {
		return bad("the path is not validly percent-encoded")
	}
	for i := 0; i < len(path); i++ {
		switch c := path[i]; {
		case c < 0x20 || c == 0x7f:
			return bad("the path holds a control character")
		case c == '\\':
			return bad("the path holds a backslash")
		case c == '%':
			return bad("the path holds an encoded percent sign")
		}
	}
	if strings.Contains(path, "//") {
		return bad("the path holds an empty segment")
	}
	for _, seg := range strings.Split(path[1:], "/") {
		if seg == "." || seg == ".." || strings.Contains(seg, "..") {
			return bad("the path holds a dot segment")
		}
	}
	return path, nil
}
