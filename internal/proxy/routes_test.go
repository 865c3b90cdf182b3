package proxy_test

import (
	"strings"
	"testing"

	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
)

var contractRoutes = []proxy.Route{
	{Prefix: "/v2/payments", Methods: []string{"GET", "POST", "DELETE"}},
	{Prefix: "/v2/pay", Methods: []string{"POST"}},
	{Prefix: "/v2/connections", Methods: []string{"GET", "POST", "DELETE"}},
	{Prefix: "/v2/data/accounts", Methods: []string{"GET"}},
	{Prefix: "/v2/data/transactions", Methods: []string{"GET", "PATCH"}},
	{Prefix: "/v2/data/transaction-categories", Methods: []string{"GET"}},
	{Prefix: "/v2/providers", Methods: []string{"GET"}},
	{Prefix: "/v2/bank-branches", Methods: []string{"GET"}},
	{Prefix: "/v2/merchants", Methods: []string{"GET", "POST", "PUT", "DELETE"}},
	{Prefix: "/chat/chat/connections/refresh", Methods: []string{"POST"}},
}

func TestCheckPath(t *testing.T) {
	cases := []struct {
		in, want string // want "" = BAD_PATH
	}{
		{"/v2/payments", "/v2/payments"},
		{"/v2/payments/01HXYZ", "/v2/payments/01HXYZ"},
		{"/v2/merchants/caf%C3%A9", "/v2/merchants/café"},
		{"/v2/payments/a%20b", "/v2/payments/a b"},
		{"/v2/payments/", "/v2/payments/"},
		{"/v2/../oauth/token", ""},
		{"/v2/%2e%2e/oauth/token", ""},
		{"/v2/%2E%2E/oauth/token", ""},
		{"/v2/payments/..", ""},
		{"/v2/payments/./x", ""},
		{"/v2//payments", ""},
		{"/v2/payments%2f..%2foauth", ""},
		{"/v2/payments%2Fx", ""},
		{"/v2/payments%5cx", ""},
		{"/v2/payments\\x", ""},
		{"/v2/payments%00", ""},
		{"/v2/payments%0a", ""},
		{"/v2/payments%7f", ""},
		{"/v2/payments%252e%252e", ""},
		{"/v2/payments%zz", ""},
		{"v2/payments", ""},
		{"", ""},
		{"/v2/payments/a..b", ""},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, p := proxy.CheckPath(tc.in)
			if tc.want == "" {
				if p == nil || p.Code != problem.CodeBadPath || p.Status != 400 {
					t.Fatalf("got %q, %v; want 400 BAD_PATH", got, p)
				}
				return
			}
			if p != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, p, tc.want)
			}
		})
	}
}

func TestMatch(t *testing.T) {
	rt := proxy.NewRoutes(contractRoutes)
	cases := []struct {
		path, method, route, code, allow string
	}{
		{"/v2/payments", "GET", "/v2/payments", "", ""},
		{"/v2/payments/123", "DELETE", "/v2/payments", "", ""},
		{"/v2/pay", "POST", "/v2/pay", "", ""},
		{"/v2/pay/open-banking-init", "POST", "/v2/pay", "", ""},
		{"/v2/payments", "PATCH", "/v2/payments", problem.CodeMethodNotAllowed, "DELETE, GET, HEAD, POST"},
		{"/v2/pay", "GET", "/v2/pay", problem.CodeMethodNotAllowed, "POST"},
		{"/v2/data/accounts/a1", "HEAD", "/v2/data/accounts", "", ""},
		{"/v2/data/accounts", "POST", "/v2/data/accounts", problem.CodeMethodNotAllowed, "GET, HEAD"},
		{"/v2/pay", "HEAD", "/v2/pay", problem.CodeMethodNotAllowed, "POST"},
		{"/chat/chat/connections/refresh", "HEAD", "/chat/chat/connections/refresh", problem.CodeMethodNotAllowed, "POST"},
		{"/v2/paym", "GET", "", problem.CodeRouteNotFound, ""},
		{"/v2/payment", "GET", "", problem.CodeRouteNotFound, ""},
		{"/v2/data/transactions/abc", "PATCH", "/v2/data/transactions", "", ""},
		{"/v2/data/transaction-categories", "GET", "/v2/data/transaction-categories", "", ""},
		{"/v2/data", "GET", "", problem.CodeRouteNotFound, ""},
		{"/oauth/token", "POST", "", problem.CodeRouteNotFound, ""},
		{"/chat/chat/connections/refresh", "POST", "/chat/chat/connections/refresh", "", ""},
		{"/chat/chat/connections", "POST", "", problem.CodeRouteNotFound, ""},
		{"/", "GET", "", problem.CodeRouteNotFound, ""},
	}
	for _, tc := range cases {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			route, p := rt.Match(tc.path, tc.method)
			if route != tc.route {
				t.Fatalf("got route %q, want %q", route, tc.route)
			}
			code := ""
			if p != nil {
				code = p.Code
			}
			if code != tc.code {
				t.Fatalf("got code %q, want %q", code, tc.code)
			}
			if p != nil && p.Allow != tc.allow {
				t.Fatalf("got Allow %q, want %q", p.Allow, tc.allow)
			}
		})
	}
}

// The token endpoint is never reachable, even if a route were configured
// over it.
func TestOAuthNeverMatches(t *testing.T) {
	rt := proxy.NewRoutes([]proxy.Route{{Prefix: "/oauth", Methods: []string{"POST"}}, {Prefix: "/", Methods: []string{"POST"}}})
	if _, p := rt.Match("/oauth/token", "POST"); p == nil || p.Code != problem.CodeRouteNotFound {
		t.Fatalf("got %v, want ROUTE_NOT_FOUND", p)
	}
}

func FuzzCheckPath(f *testing.F) {
	for _, s := range []string{"/v2/payments", "/v2/../x", "/v2/%2e%2e/x", "/v2/%2fx", "/v2//x", "/a%00", "/%25", "/v2/caf%C3%A9"} {
		f.Add(s)
	}
	rt := proxy.NewRoutes(contractRoutes)
	f.Fuzz(func(t *testing.T, in string) {
		path, p := proxy.CheckPath(in)
		if p != nil {
			if p.Code != problem.CodeBadPath || p.Status != 400 {
				t.Fatalf("got %v, want BAD_PATH", p)
			}
			return
		}
		// Whatever passes is a clean absolute path with no way back up.
		if !strings.HasPrefix(path, "/") || strings.Contains(path, "..") || strings.Contains(path, "//") ||
			strings.ContainsAny(path, "\\%\x00") {
			t.Fatalf("CheckPath(%q) passed %q", in, path)
		}
		for _, r := range path {
			if r < 0x20 || r == 0x7f {
				t.Fatalf("CheckPath(%q) passed a control character: %q", in, path)
			}
		}
		if route, _ := rt.Match(path, "POST"); strings.HasPrefix(path, "/oauth") && route != "" {
			t.Fatalf("%q matched route %q", path, route)
		}
	})
}

func BenchmarkCheckPathAndMatch(b *testing.B) {
	rt := proxy.NewRoutes(contractRoutes)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		path, _ := proxy.CheckPath("/v2/data/transactions/01HXYZABCDEF")
		_, _ = rt.Match(path, "GET")
	}
}
