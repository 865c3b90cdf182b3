//go:build integration

package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/fintech-bff/bff/internal/testing/redistest"
)

// metricValue is the value of one sample line of e's /metrics ("name" or
// "name{labels}"), 0 when absent.
func metricValue(t *testing.T, e *env, sample string) float64 {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(scrape(t, e)))
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if ok && name == sample {
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				t.Fatalf("%s: %v", sample, err)
			}
			return v
		}
	}
	return 0
}

// forgedLogoutToken is a well-formed logout token for the provider's
// issuer and client, signed by a key the provider never had, naming key
// id kid.
func forgedLogoutToken(t *testing.T, key *rsa.PrivateKey, kid, issuer string) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("logout+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Unix()
	b, _ := json.Marshal(map[string]any{"iss": issuer, "aud": opClientID, "iat": now, "exp": now + 120, "jti": rand.Text(), "sub": "victim",
		"events": map[string]any{"http://schemas.openid.net/event/backchannel-logout": map[string]any{}}})
	obj, err := signer.Sign(b)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := obj.CompactSerialize()
	return s
}

func postLogoutToken(t *testing.T, e *env, token string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", e.public+"/auth/backchannel-logout", strings.NewReader(url.Values{"logout_token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Forged back-channel logout tokens: the endpoint has
// its own budget per address, of refused tokens only (a genuine logout
// from the same address still works when forged ones have spent it); unknown key ids make the BFF fetch the
// provider's keys at most once per 30 s, known ones never; the refusals
// are logged at most once per 10 s, with a count of those left out.
// Before: 50 forged tokens made 50 fetches and 362 warning lines.
func TestForgedBackchannelLogoutsAreCheap(t *testing.T) {
	t.Parallel()
	e, op := oidcEnvWith(t, options{limitsYAML: "limits: { requests_per_second: 0, auth_per_minute: 0, refresh_interval: 0s, sessions_per_user: 0, backchannel_per_minute: 120, pending_logins_per_address: 0 }"})
	issuer := op.Issuer
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	fetchesBefore := metricValue(t, e, "bff_oidc_key_fetches_total")
	began := time.Now()
	for i := range 50 {
		if got := postLogoutToken(t, e, forgedLogoutToken(t, key, fmt.Sprintf("forged-%d", i), issuer)); got != 400 {
			t.Fatalf("forged token %d: got %d, want 400", i, got)
		}
	}
	fetches := metricValue(t, e, "bff_oidc_key_fetches_total") - fetchesBefore
	if fetches > 1 {
		t.Fatalf("50 forged logout tokens made %v fetches of the provider's keys, want at most 1", fetches)
	}

	// 200 in parallel: past the budget (120 a minute, 50 spent), 429.
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[int]int{}
	for i := range 200 {
		wg.Go(func() {
			code := postLogoutToken(t, e, forgedLogoutToken(t, key, fmt.Sprintf("flood-%d", i), issuer))
			mu.Lock()
			counts[code]++
			mu.Unlock()
		})
	}
	wg.Wait()
	// The budget refills at 2 a second meanwhile.
	rest := 70 + 2*int(time.Since(began).Seconds()+1)
	if counts[400] > rest || counts[400]+counts[429] != 200 {
		t.Fatalf("200 parallel forged tokens after 50: got %v, want at most %d × 400 (the budget's rest) and the others 429", counts, rest)
	}
	f := metricValue(t, e, "bff_oidc_key_fetches_total") - fetchesBefore
	if f > 1 {
		t.Fatalf("%v key fetches in all, want at most 1", f)
	}
	if got := metricValue(t, e, `bff_limit_refusals_total{limit="backchannel"}`); int(got) != counts[429] {
		t.Fatalf("bff_limit_refusals_total{limit=\"backchannel\"} = %v, want the refusals counted", got)
	}
	waitLog(t, e, `"msg":"back-channel logout refused"`)
	n := strings.Count(e.logs.String(), `"msg":"back-channel logout refused"`)
	if n > 3 {
		t.Fatalf("%d refusal lines for 120 forged tokens in a few seconds, want at most one per 10 s", n)
	}
	t.Logf("250 forged logout tokens (50, then 200 in parallel): answers %v, %v fetches of the provider's keys, %d refusal lines", counts, f, n)

	// The provider's genuine logout from the same address, with the
	// refusal budget spent: only refusals count, so it still ends the
	// session.
	b := e.browser()
	b.follow(t, opLogin(t, b.http, beginLogin(t, b, ""), "sara"))
	if r := b.do("GET", "/auth/session", ""); r.status != 200 {
		t.Fatalf("before the provider's logout: got %d", r.status)
	}
	opLogout(t, b.http, op, opClientID, e.public+"/")
	wantProblem(t, b.do("GET", "/auth/session", ""), 401, "SESSION_REQUIRED")
}

// Per-address limits key an IPv6 client by its /64 (limits.ipv6_prefix):
// 70 addresses of one /64, believed through X-Forwarded-For from a
// trusted proxy, share one /auth budget. Before: 70 × 401, no 429.
func TestIPv6ClientsShareTheirPrefixBudget(t *testing.T) {
	t.Parallel()
	e := start(t, options{extraYAML: `trusted_proxies: ["127.0.0.1/32"]`,
		limitsYAML: "limits: { requests_per_second: 0, auth_per_minute: 10, refresh_interval: 0s, sessions_per_user: 0, backchannel_per_minute: 0, pending_logins_per_address: 0 }"})
	c := e.browser()
	counts := map[int]int{}
	for i := range 70 {
		xff := fmt.Sprintf("2001:db8:1:2:%x:%x::%x", i, i*7, i+1)
		counts[c.do("GET", "/auth/session", "", "X-Forwarded-For", xff).status]++
	}
	if counts[401] != 10 || counts[429] != 60 {
		t.Fatalf("70 addresses of one /64: got %v, want 10 × 401 and 60 × 429", counts)
	}
	t.Logf("70 addresses of one /64 with a budget of 10: %v", counts)
	// Another /64 has its own budget; an IPv4 client is its address.
	if got := c.do("GET", "/auth/session", "", "X-Forwarded-For", "2001:db8:1:3::1").status; got != 401 {
		t.Fatalf("a client of another /64: got %d, want 401", got)
	}
	if got := c.do("GET", "/auth/session", "", "X-Forwarded-For", "198.51.100.7").status; got != 401 {
		t.Fatalf("an IPv4 client: got %d, want 401", got)
	}
}

// The logins one client starts and does not finish are bounded
// (limits.pending_logins_per_address): each GET /auth/login stores a record for 10 minutes.
func TestPendingLoginsPerAddressAreBounded(t *testing.T) {
	t.Parallel()
	e, _ := oidcEnvWith(t, options{limitsYAML: "limits: { requests_per_second: 0, auth_per_minute: 0, refresh_interval: 0s, sessions_per_user: 0, backchannel_per_minute: 0, pending_logins_per_address: 5 }"})
	c := e.browser()
	c.http.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	var statuses []int
	for range 8 {
		statuses = append(statuses, c.do("GET", "/auth/login?returnTo=/", "").status)
	}
	want := []int{302, 302, 302, 302, 302, 429, 429, 429}
	if fmt.Sprint(statuses) != fmt.Sprint(want) {
		t.Fatalf("8 logins started: got %v, want %v", statuses, want)
	}
	wantProblem(t, c.do("GET", "/auth/login?returnTo=/", ""), 429, "RATE_LIMITED")
	rc, _ := redistest.Client(t)
	var pending int
	for _, k := range redistest.Keys(context.Background(), rc, e.prefix) {
		if strings.HasPrefix(k, e.prefix+"login:") {
			pending++
		}
	}
	if pending != 5 {
		t.Fatalf("%d pending-login records stored, want 5", pending)
	}
}

// Production refuses a catch-all written another way, script-running
// mobile redirect URIs, and a missing admin token unless said so
// explicitly, through the real binary's -check.
func TestProductionRefusesCatchAllsWrittenOtherwise(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base := `env: production
public_url: "https://app.example.com"
upstream: { base_url: "https://api.example.com", client_id: c, client_secret: "s" }
redis: { url: "redis://redis.internal:6379/0", encryption_key: "` + randomB64(32) + `" }
session: { keys: ["` + randomB64(32) + `"] }
ledger: { postgres_url: "postgres://bff@db.internal/bff" }
auth: { mode: oidc, oidc: { issuer: "https://id.example.com", client_id: web, redirect_url: "https://app.example.com/auth/callback" } }
`
	cases := []struct{ name, extra, want string }{
		{"two halves of IPv4", "admin_mutations_disabled: true\ntrusted_proxies: [0.0.0.0/1, 128.0.0.0/1]\n", "trusted_proxies"},
		{"every IPv4-mapped address", "admin_mutations_disabled: true\ntrusted_proxies: [\"::ffff:0.0.0.0/96\"]\n", "trusted_proxies[0]"},
		{"a javascript: redirect", "admin_mutations_disabled: true\n", "auth.mobile_redirect_uris[0]"},
		{"a data: redirect", "admin_mutations_disabled: true\n", "auth.mobile_redirect_uris[0]"},
		{"no admin token, unsaid", "", "admin_token_file"},
		{"a catch-all traceparent_from", "admin_mutations_disabled: true\ntraceparent_from: [0.0.0.0/1, 128.0.0.0/1]\n", "traceparent_from"},
	}
	for i, tc := range cases {
		body := base + tc.extra
		switch tc.name {
		case "a javascript: redirect":
			body = strings.Replace(body, `redirect_url: "https://app.example.com/auth/callback" }`, `redirect_url: "https://app.example.com/auth/callback" }, mobile_redirect_uris: ["javascript:alert(document.cookie)"]`, 1)
		case "a data: redirect":
			body = strings.Replace(body, `redirect_url: "https://app.example.com/auth/callback" }`, `redirect_url: "https://app.example.com/auth/callback" }, mobile_redirect_uris: ["data:text/html,<script>alert(1)</script>"]`, 1)
		}
		p := filepath.Join(dir, fmt.Sprintf("c%d.yaml", i))
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bffBin, "-config", p, "-check")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: got %v\n%s\nwant a refusal naming %s", tc.name, err, out, tc.want)
		}
	}
	// Said explicitly, no admin token starts.
	p := filepath.Join(dir, "ok.yaml")
	if err := os.WriteFile(p, []byte(base+"admin_mutations_disabled: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bffBin, "-config", p, "-check")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("admin_mutations_disabled: true: got %v\n%s, want configuration OK", err, out)
	}
}
