package proxy_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/proxy"
)

// Headers pass by allowlist in both directions, and no 1xx answer of the
// upstream reaches the client.
func TestHeaderAllowlists(t *testing.T) {
	var got http.Header
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		h := w.Header()
		if r.URL.Path == "/v2/early" {
			h.Set("Link", "</app.css>; rel=preload")
			h.Set("Set-Cookie", "__Host-bff_session=attacker; Path=/; Secure")
			w.WriteHeader(http.StatusEarlyHints)
			h.Del("Set-Cookie")
			h.Del("Link")
		}
		for k, v := range map[string]string{
			"Server": "upstream/1.0", "X-Powered-By": "Express", "WWW-Authenticate": `Bearer realm="x"`,
			"Strict-Transport-Security": "max-age=0", "Clear-Site-Data": `"*"`, "Set-Cookie": "a=b", "Set-Cookie2": "c=d",
			"Access-Control-Allow-Origin": "*", "Cache-Control": "public, max-age=3600", "X-Content-Type-Options": "sniff-me",
			"Etag": `"v1"`, "Last-Modified": "Mon, 02 Jan 2006 15:04:05 GMT", "Content-Language": "he",
		} {
			h.Set(k, v)
		}
		if r.URL.Path == "/v2/untyped" {
			h["Content-Type"] = nil // no Content-Type at all (and no sniffing here)
		} else {
			h.Set("Content-Type", "application/json")
		}
		_, _ = io.WriteString(w, `<html><script>alert(1)</script></html>`)
	}))
	t.Cleanup(upstream.Close)
	base, _ := url.Parse(upstream.URL)
	fwd := proxy.New(proxy.Options{
		BaseURL: base, Routes: proxy.NewRoutes([]proxy.Route{{Prefix: "/v2", Methods: []string{"GET"}}}), Tokens: &fakeTokens{},
		Timeout: 5 * time.Second, MaxBodyBytes: 1024, Retry: proxy.Retry{MaxAttempts: 1, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond},
	})
	bff := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		forward(fwd, w, r, proxy.Call{UserID: "alice", RequestID: "req-123", Path: r.URL.EscapedPath(), ClientIP: "203.0.113.7"})
	}))
	t.Cleanup(bff.Close)

	get := func(path string, hdr map[string]string) (*http.Response, []int) {
		var informational []int
		trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, _ textproto.MIMEHeader) error {
			informational = append(informational, code)
			return nil
		}}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), "GET", bff.URL+path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp, informational
	}

	t.Run("only named request headers go upstream", func(t *testing.T) {
		get("/v2/data", map[string]string{
			"X-Http-Method-Override": "DELETE", "X-Original-Url": "/oauth/token", "X-Real-Ip": "10.0.0.1",
			"X-User-Id": "bob", "X-Forwarded-Host": "evil.example", "User-Agent": "client/1",
			"Accept": "application/json", "If-None-Match": `"v0"`, "Traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		})
		for _, h := range []string{"X-Http-Method-Override", "X-Original-Url", "X-Real-Ip", "X-User-Id", "X-Forwarded-Host", "User-Agent"} {
			if v := got.Get(h); v != "" {
				t.Errorf("the upstream got %s: %q", h, v)
			}
		}
		for _, h := range []string{"Accept", "If-None-Match", "Traceparent", "Authorization", "X-Request-Id", "X-Forwarded-For"} {
			if got.Get(h) == "" {
				t.Errorf("the upstream did not get %s", h)
			}
		}
	})

	t.Run("only named response headers reach the client", func(t *testing.T) {
		resp, _ := get("/v2/data", nil)
		for _, h := range []string{"Server", "X-Powered-By", "WWW-Authenticate", "Strict-Transport-Security", "Clear-Site-Data",
			"Set-Cookie", "Set-Cookie2", "Access-Control-Allow-Origin", "Cache-Control", "X-Content-Type-Options"} {
			if v := resp.Header.Get(h); v != "" {
				t.Errorf("the client got the upstream's %s: %q", h, v)
			}
		}
		for _, h := range []string{"Etag", "Last-Modified", "Content-Language", "Content-Type"} {
			if resp.Header.Get(h) == "" {
				t.Errorf("the client did not get %s", h)
			}
		}
	})

	t.Run("no 1xx answer passes", func(t *testing.T) {
		resp, informational := get("/v2/early", nil)
		if len(informational) != 0 {
			t.Fatalf("the client got informational answers %v", informational)
		}
		if resp.StatusCode != 200 || strings.Contains(strings.Join(resp.Header.Values("Set-Cookie"), ";"), "attacker") {
			t.Fatalf("got %d with Set-Cookie %q", resp.StatusCode, resp.Header.Values("Set-Cookie"))
		}
	})

	t.Run("a reply without a Content-Type is never sniffed as HTML", func(t *testing.T) {
		resp, _ := get("/v2/untyped", nil)
		if ct := resp.Header.Get("Content-Type"); ct != "application/octet-stream" {
			t.Fatalf("got Content-Type %q, want application/octet-stream", ct)
		}
	})
}
