package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoad feeds arbitrary files to Load: it must not panic, and no error
// may hold a secret value the input did not itself spell out.
func FuzzLoad(f *testing.F) {
	example, err := os.ReadFile(examplePath)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)
	f.Add([]byte(""))
	f.Add([]byte("env: development\nauth: {mode: dev}\nredis: {url: \"\"}\n"))
	f.Add([]byte("upstream:\n  timeout: abc\n  retry: {max_attempts: 11}\n  routes:\n    - {prefix: /oauth, methods: [get]}\n    - {prefix: /v2/x, methodz: [GET]}\n"))
	f.Add([]byte("redis:\n  sentinel: {master: m, addrs: [\"s:26379\"]}\n  cluster_addrs: [c1]\nsession: {cookie_name: __Host-x, secure_cookie: false, keys: [abc]}\n"))
	f.Add([]byte("a: &a [1, 2]\nb: *a\n---\nc: 1\n"))
	f.Add([]byte("trusted_proxies: [\"10.0.0.0/8\", nope]\ncors: {allowed_origins: [\"*\"]}\nauth: {mobile_redirect_uris: [\"x:/y#z\"]}\n"))
	f.Add([]byte("pprof: true\nadmin_token_file: /nonexistent\ntrusted_proxies: [\"0.0.0.0/0\"]\ncors: {allowed_origins: [\"https://*.example.com\"]}\nsession: {secure_cookie: false}\nauth: {mobile_redirect_uris: [\"http://localhost/cb\"]}\n"))

	dir := f.TempDir()
	secretFile := filepath.Join(dir, "secret")
	if err := os.WriteFile(secretFile, []byte(upstreamSecret+"\n"), 0o600); err != nil {
		f.Fatal(err)
	}
	env := with(prodEnv(), map[string]string{
		"BFF_UPSTREAM_CLIENT_SECRET":      "",
		"BFF_UPSTREAM_CLIENT_SECRET_FILE": secretFile,
		"BFF_REDIS_SENTINEL_PASSWORD":     sentinelSecret,
	})
	// Each fuzzing process runs its inputs one at a time, so one file will do.
	path := filepath.Join(dir, "bff.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Load(path, getenv(env))
		if err != nil {
			for _, s := range secretValues() {
				if strings.Contains(err.Error(), s) && !strings.Contains(string(data), s) {
					t.Errorf("error holds a secret: %v", err)
				}
			}
			return
		}
		dump := c.Dump()
		for _, s := range secretValues() {
			if strings.Contains(dump, s) && !strings.Contains(string(data), s) {
				t.Errorf("Dump holds a secret:\n%s", dump)
			}
		}
	})
}
