//go:build integration

package e2e

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	loginRounds = flag.Int("login-rounds", 5, "TestLoginThroughEachFrontChannel: logins per mode (make bench-login: 200)")
	loginOut    = flag.String("login-out", "", "TestLoginThroughEachFrontChannel: write the latency table to this file")
)

// TestLoginThroughEachFrontChannel logs in through each way the BFF can
// send the authorization request: the front channel (a provider without
// PAR), PAR because the provider offers it (no profile, a secret), and the
// fapi2 profile (PAR, private_key_jwt, DPoP with the provider's nonce). In
// each, every login ends in a session, and the browser carries the whole
// request only in the first. It also measures what PAR costs: the time of
// GET /auth/login (the BFF's answer, PAR included) and of the callback
// (the code's redemption), medians and p90 over -login-rounds logins per
// mode; the provider's own pages are not timed. No figure is asserted;
// make bench-login runs it long and writes bench/login-par.txt.
func TestLoginThroughEachFrontChannel(t *testing.T) {
	type mode struct {
		name  string
		start func(t *testing.T) (*env, *OP)
		par   bool
	}
	modes := []mode{
		{"front channel (no PAR)", func(t *testing.T) (*env, *OP) { return oidcEnv(t) }, false},
		{"PAR offered, client_secret", func(t *testing.T) (*env, *OP) { return parOfferedEnv(t) }, true},
		{"fapi2 (PAR, private_key_jwt, DPoP)", func(t *testing.T) (*env, *OP) {
			e, op, _ := fapi2Env(t, options{})
			return e, op
		}, true},
	}
	var table strings.Builder
	fmt.Fprintf(&table, "%-36s %10s %8s %10s %8s  (ms, %d logins each)\n", "mode", "start p50", "p90", "cb p50", "p90", *loginRounds)
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			e, op := m.start(t)
			var starts, callbacks []time.Duration
			for i := range *loginRounds {
				b := e.browser()
				t0 := time.Now()
				r := b.do("GET", "/auth/login?returnTo=/", "")
				starts = append(starts, time.Since(t0))
				loc := r.header.Get("Location")
				if r.status != http.StatusFound {
					t.Fatalf("login %d: GET /auth/login: %d %s", i, r.status, r.body)
				}
				if m.par {
					pushedOnly(t, op, loc)
				} else if q := mustURL(t, loc).Query(); q.Get("code_challenge") == "" || q.Has("request_uri") {
					t.Fatalf("login %d: the front channel's URL %s lacks the request", i, loc)
				}
				cb := opLogin(t, b.http, loc, fmt.Sprintf("user%d", i))
				t1 := time.Now()
				r = b.follow(t, cb)
				callbacks = append(callbacks, time.Since(t1))
				if r.status != http.StatusFound || r.header.Get("Location") != "/" {
					t.Fatalf("login %d: callback: %d %s", i, r.status, r.body)
				}
			}
			fmt.Fprintf(&table, "%-36s %10.2f %8.2f %10.2f %8.2f\n", m.name, ms(pct(starts, 50)), ms(pct(starts, 90)), ms(pct(callbacks, 50)), ms(pct(callbacks, 90)))
		})
	}
	t.Logf("login latency at the BFF:\n%s", table.String())
	if *loginOut != "" {
		if err := os.WriteFile(*loginOut, []byte(table.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// parOfferedEnv is oidcEnv against a provider that offers PAR without
// requiring it: the BFF, with no profile and a client secret, uses it.
func parOfferedEnv(t *testing.T) (*env, *OP) {
	t.Helper()
	pub := freeAddr(t)
	base := "http://" + pub
	op := startOPWith(t, OPMode{PAR: "offered"}, OPClient{ID: opClientID, Secret: opClientSecret, RedirectURIs: []string{base + "/auth/callback"}})
	return secretClientBFF(t, pub, op), op
}

// secretClientBFF is a BFF on pub in auth.mode oidc with no profile,
// authenticating to op with the client secret.
func secretClientBFF(t *testing.T, pub string, op *OP) *env {
	t.Helper()
	return start(t, options{publicAddr: pub, authYAML: fmt.Sprintf(`auth:
  mode: oidc
  oidc:
    issuer: %q
    client_id: %q
    client_secret: %q
    redirect_url: %q
    user_id_claim: sub`, op.Issuer, opClientID, opClientSecret, "http://"+pub+"/auth/callback")})
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
