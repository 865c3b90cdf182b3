//go:build integration

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/testing/redistest"
	"github.com/fintech-bff/bff/internal/upstreamsim"
)

// Every key the BFF writes and every channel it uses is under
// redis.key_prefix. Two instances run as the Redis user
// docs/operations.md gives operators ("Sharing a Redis": keys and channels
// under the prefix, the commands the BFF runs), on a single Redis and on a
// Cluster, through the whole request path: OpenID logins (browser and
// native apps), API calls, a payment and its event, the refresh credit
// guard, every per-address budget and the session budget refusing past
// their limits, a client secret rotation announced across instances, a
// logout and a back-channel logout ending a session and its stream on the
// other instance. Then Redis's ACL LOG holds no refusal and the servers
// no key outside the prefix. Before: the per-address budgets' keys were
// "rate:<prefix>lim:…", refused, and every budget let requests through.
func TestRedisUserLimitedToThePrefix(t *testing.T) {
	t.Run("single", func(t *testing.T) {
		s := redistest.StartServer(t)
		prefix, password := redistest.Prefix(), randomHex(16)
		s.SetUser(t, "bff", redistest.DocumentedUser(t, prefix, password)...)
		yaml := fmt.Sprintf("url: %q", "redis://bff:"+password+"@"+s.Addr+"/0")
		checkPrefixedRun(t, prefix, yaml, prefixedServers{denials: s.Denials, keys: s.AllKeys, tracking: func(t *testing.T) {
			c := s.Client()
			defer c.Close()
			list, err := c.ClientList(context.Background()).Result()
			if err != nil {
				t.Fatal(err)
			}
			// Each instance tracks its session and token keys: a
			// connection of its own with tracking on ("t") per layer.
			tracking := 0
			for _, line := range strings.Split(list, "\n") {
				f := fields(line)
				if strings.HasPrefix(f["name"], "bff-track-") && f["user"] == "bff" && strings.Contains(f["flags"], "t") {
					tracking++
				}
			}
			if tracking < 4 {
				t.Errorf("%d connections of user bff track keys, want at least 4 (2 instances × sessions and tokens):\n%s", tracking, list)
			}
		}})
	})
	t.Run("cluster", func(t *testing.T) {
		c := redistest.StartCluster(t, 3)
		prefix, password := redistest.Prefix(), randomHex(16)
		c.SetUser(t, "bff", redistest.DocumentedUser(t, prefix, password)...)
		yaml := fmt.Sprintf("url: \"\"\n  cluster_addrs: [%s]\n  username: bff\n  password: %q", quoteAll(c.Addrs()), password)
		checkPrefixedRun(t, prefix, yaml, prefixedServers{denials: c.Denials, keys: c.AllKeys})
	})
}

// prefixedServers are the Redis servers of one run, read as their default
// (unrestricted) user.
type prefixedServers struct {
	denials func(testing.TB) []string
	keys    func(testing.TB) []string
	// tracking checks the key tracking is live; nil on a Cluster, where
	// the BFF does not track.
	tracking func(t *testing.T)
}

func checkPrefixedRun(t *testing.T, prefix, redisYAML string, servers prefixedServers) {
	secretFile := filepath.Join(t.TempDir(), "client_secret")
	writeSecret(t, secretFile, clientSecret)
	o := options{
		redisYAML: redisYAML, keyPrefix: prefix, secretFile: secretFile,
		sim: upstreamsim.Options{ClientID: "e2e-client", ClientSecret: clientSecret},
		// Each budget small enough to be reached below; the session budget
		// big enough for everything but the test that spends it.
		limitsYAML: "limits: { requests_per_second: 20, burst: 40, auth_per_minute: 60, refresh_interval: 15m, sessions_per_user: 20, backchannel_per_minute: 3, pending_logins_per_address: 5 }",
		// The per-address budgets are checked from addresses of their own.
		extraYAML: `trusted_proxies: ["127.0.0.1/32"]`,
	}
	a, op := oidcEnvWith(t, o)
	bo := a.opts
	bo.publicAddr, bo.adminAddr = "", ""
	b := a.another(bo)

	// A browser logs in on A; its session and an API call work on B.
	br := a.browser()
	br.follow(t, opLogin(t, br.http, beginLogin(t, br, ""), "ida"))
	brB := &client{e: b, http: br.http} // cookies are per host, not port: the same session
	if v := brB.do("GET", "/auth/session", "").json(t); v["userId"] != "ida" {
		t.Fatalf("the browser's session on B: got %v, want ida", v)
	}
	if r := brB.do("GET", "/api/v2/payments", ""); r.status != 200 {
		t.Fatalf("an API call on B: got %d %s", r.status, r.body)
	}

	// The native app logs in on A and exchanges its code on B.
	verifier, challenge := pkcePair()
	code := mobileCode(t, a, challenge, "ida")
	r := b.browser().do("POST", "/auth/mobile/token", fmt.Sprintf(`{"code":%q,"codeVerifier":%q}`, code, verifier))
	token, _ := r.json(t)["sessionToken"].(string)
	if r.status != 200 || token == "" {
		t.Fatalf("the code exchange on B: got %d %s", r.status, r.body)
	}

	// Another user's app logs in on B; its session outlives the others'.
	verifier, challenge = pkcePair()
	code = mobileCode(t, b, challenge, "max")
	r = a.browser().do("POST", "/auth/mobile/token", fmt.Sprintf(`{"code":%q,"codeVerifier":%q}`, code, verifier))
	other, _ := r.json(t)["sessionToken"].(string)
	if r.status != 200 || other == "" {
		t.Fatalf("the code exchange on A: got %d %s", r.status, r.body)
	}

	// A payment through A reaches the app's stream on B.
	s := openStream(t, b.public, token, "")
	pay(t, a, token, "acl-1")
	for i := 0; s.next(t, 10*time.Second).Data.Key != "acl-1"; i++ {
		if i == 20 {
			t.Fatal("20 events on the stream, none of the payment acl-1")
		}
	}

	t.Run("the refresh credit guard holds across instances", func(t *testing.T) {
		a.app(token).do("POST", "/api/v2/connections", `{"providerIds":["demobank-sandbox"]}`)
		if r := a.app(token).do("POST", "/api/chat/chat/connections/refresh", ""); r.status != 200 {
			t.Fatalf("the first refresh: got %d %s", r.status, r.body)
		}
		wantProblem(t, b.app(token).do("POST", "/api/chat/chat/connections/refresh", ""), 429, "REFRESH_TOO_SOON")
	})

	// Each per-address budget, spent from an address of its own on A and
	// B in turn, is one budget: exactly its size passes.
	t.Run("auth_per_minute", func(t *testing.T) {
		began := time.Now()
		passed := 0
		for i := range 70 {
			e := []*env{a, b}[i%2]
			switch r := e.browser().do("GET", "/auth/session", "", "X-Forwarded-For", "198.51.100.7"); r.status {
			case 401:
				passed++
			case 429:
			default:
				t.Fatalf("request %d: got %d %s", i, r.status, r.body)
			}
		}
		// 60 a minute: one more each second since the first.
		if most := 60 + int(time.Since(began)/time.Second); passed < 60 || passed > most {
			t.Fatalf("70 requests from one address on two instances: %d passed, want 60 to %d", passed, most)
		}
	})
	t.Run("pending_logins_per_address", func(t *testing.T) {
		var got []int
		for i := range 8 {
			e := []*env{a, b}[i%2]
			got = append(got, e.browser().do("GET", "/auth/login?returnTo=/", "", "X-Forwarded-For", "198.51.100.8").status)
		}
		if want := []int{302, 302, 302, 302, 302, 429, 429, 429}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("8 logins started from one address on two instances: got %v, want %v", got, want)
		}
	})
	t.Run("backchannel_per_minute", func(t *testing.T) {
		var got []int
		form := url.Values{"logout_token": {"not-a-jwt"}}.Encode()
		for i := range 5 {
			e := []*env{a, b}[i%2]
			got = append(got, e.browser().do("POST", "/auth/backchannel-logout", form,
				"Content-Type", "application/x-www-form-urlencoded", "X-Forwarded-For", "198.51.100.9").status)
		}
		if want := []int{400, 400, 400, 429, 429}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("5 forged logout tokens from one address on two instances: got %v, want %v", got, want)
		}
	})
	t.Run("requests_per_second", func(t *testing.T) {
		refused := 0
		for i := 0; i < 200 && refused == 0; i++ {
			c := []*client{br, brB}[i%2]
			switch r := c.do("GET", "/api/v2/providers", ""); r.status {
			case 200:
			case 429:
				wantProblem(t, r, 429, "RATE_LIMITED")
				refused++
			default:
				t.Fatalf("request %d: got %d %s", i, r.status, r.body)
			}
		}
		if refused == 0 {
			t.Fatal("200 rapid requests of one session within a budget of burst 40, 20 a second: none refused")
		}
	})

	t.Run("a rotation signalled on A reaches B", func(t *testing.T) {
		a.sim.RotateSecret("acl-rotated-secret")
		writeSecret(t, secretFile, "acl-rotated-secret")
		if err := a.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitLog(t, b, "another instance announced a rotation")
		if r := b.app(token).do("GET", "/api/v2/payments", ""); r.status != 200 {
			t.Fatalf("an API call on B after the rotation: got %d %s", r.status, r.body)
		}
	})

	t.Run("a logout on A ends the session and its stream on B", func(t *testing.T) {
		if r := a.app(token).do("POST", "/auth/logout", ""); r.status != 204 {
			t.Fatalf("logout: got %d %s", r.status, r.body)
		}
		s.ended(t, 10*time.Second, "logout on the other instance")
		wantProblem(t, b.app(token).do("GET", "/auth/session", ""), 401, "SESSION_REQUIRED")
	})
	t.Run("a back-channel logout ends the browser's session on B", func(t *testing.T) {
		opLogout(t, br.http, op, opClientID, a.public+"/")
		wantProblem(t, brB.do("GET", "/auth/session", ""), 401, "SESSION_REQUIRED")
	})

	if r := a.app(other).do("GET", "/api/v2/payments", ""); r.status != 200 {
		t.Errorf("another user's session after the rotation and the logouts: got %d %s, want 200", r.status, r.body)
	}

	if d := servers.denials(t); len(d) > 0 {
		t.Errorf("Redis refused the BFF's user:\n%s", strings.Join(d, "\n"))
	}
	if servers.tracking != nil {
		servers.tracking(t)
	}
	for _, e := range []*env{a, b} {
		for _, line := range strings.Split(e.logs.String(), "\n") {
			for _, bad := range []string{"NOPERM", "could not be checked", "could not be exchanged"} {
				if strings.Contains(line, bad) {
					t.Errorf("an instance logged %q: %s", bad, line)
				}
			}
		}
	}
	// What each part of the run leaves in Redis.
	want := []string{"sess:", "sessidx:", "tok:", "{sessions}:", "bcl:", "lim:auth:", "lim:pending_logins:", "lim:backchannel:", "lim:refresh:", "lim:b:", "lim:instances"}
	keys := servers.keys(t)
	kinds := map[string]int{}
	for _, k := range keys {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok {
			t.Errorf("key %q is outside the prefix %q", k, prefix)
			continue
		}
		for _, kind := range want {
			if strings.HasPrefix(rest, kind) {
				kinds[kind]++
			}
		}
	}
	for _, kind := range want {
		if kinds[kind] == 0 {
			t.Errorf("no %s%s… key: that part was not exercised", prefix, kind)
		}
	}
	t.Logf("%d keys, every one under %s: %v", len(keys), prefix, kinds)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// fields parses one CLIENT LIST line ("id=7 addr=… name=… flags=… …").
func fields(line string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Fields(line) {
		if k, v, ok := strings.Cut(kv, "="); ok {
			out[k] = v
		}
	}
	return out
}
