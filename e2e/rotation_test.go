//go:build integration

package e2e

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/upstreamsim"
)

func writeSecret(t *testing.T, path, secret string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil { // atomic, as a secret mount updates
		t.Fatal(err)
	}
}

// Rotation without downtime: the simulator's secret rotates (old secret and
// its tokens die at once), the file is updated, the instances are signalled,
// and every request afterwards succeeds, on either instance, with one mint
// per user under the new secret.
func TestSecretRotationAcrossTwoInstances(t *testing.T) {
	t.Parallel()
	secretFile := filepath.Join(t.TempDir(), "client_secret")
	writeSecret(t, secretFile, clientSecret)
	o := options{secretFile: secretFile, sim: upstreamsim.Options{ClientID: "e2e-client", ClientSecret: clientSecret}}
	a := start(t, o)
	b := a.another(o)

	token := a.browser().login("rosa")
	viaA, viaB := a.app(token), b.app(token)
	for _, c := range []*client{viaA, viaB, viaA, viaB} {
		if r := c.do("GET", "/api/v2/payments", ""); r.status != 200 {
			t.Fatalf("before rotation: got %d %s", r.status, r.body)
		}
	}
	if got := a.sim.Mints("rosa"); got != 1 {
		t.Fatalf("before rotation: got %d mints across two instances, want 1", got)
	}

	a.sim.RotateSecret("e2e-rotated-secret-Pz7")
	writeSecret(t, secretFile, "e2e-rotated-secret-Pz7")
	for _, e := range []*env{a, b} {
		if err := e.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	// Whichever instance handles its SIGHUP first rotates and announces it;
	// the other may pick the new secret up from that announcement before
	// its own SIGHUP (which then finds it unchanged). Either way each
	// instance must say it switched.
	for _, e := range []*env{a, b} {
		waitLog(t, e, "client secret rotated", "client secret re-read after another instance announced a rotation")
	}

	for i := 0; i < 20; i++ {
		c := viaA
		if i%2 == 1 {
			c = viaB
		}
		if r := c.do("GET", "/api/v2/payments", ""); r.status != 200 {
			t.Fatalf("request %d after rotation: got %d %s, want 200", i, r.status, r.body)
		}
	}
	if got := a.sim.Mints("rosa"); got != 2 {
		t.Fatalf("got %d mints in all, want 2 (one under each secret)", got)
	}
	for _, e := range []*env{a, b} {
		if strings.Contains(e.logs.String(), "e2e-rotated-secret-Pz7") || strings.Contains(e.logs.String(), clientSecret) {
			t.Fatal("a client secret appears in the logs")
		}
	}
}

// Signalling one instance is enough: it announces the rotation and the
// other re-reads its own secret file.
func TestRotationSignalledOnOneInstance(t *testing.T) {
	t.Parallel()
	secretFile := filepath.Join(t.TempDir(), "client_secret")
	writeSecret(t, secretFile, clientSecret)
	o := options{secretFile: secretFile, sim: upstreamsim.Options{ClientID: "e2e-client", ClientSecret: clientSecret}}
	a := start(t, o)
	b := a.another(o)
	token := a.browser().login("sam")
	if r := b.app(token).do("GET", "/api/v2/payments", ""); r.status != 200 {
		t.Fatalf("before rotation: got %d", r.status)
	}
	a.sim.RotateSecret("one-signal-secret")
	writeSecret(t, secretFile, "one-signal-secret")
	if err := a.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, b, "another instance announced a rotation")
	for i := 0; i < 5; i++ {
		if r := b.app(token).do("GET", "/api/v2/payments", ""); r.status != 200 {
			t.Fatalf("request %d via the unsignalled instance: got %d %s", i, r.status, r.body)
		}
	}
}

// Without any signal, a refused secret makes the BFF re-read the file once:
// the request that met the rotation still succeeds.
func TestRotationWithoutSignalSelfHeals(t *testing.T) {
	t.Parallel()
	secretFile := filepath.Join(t.TempDir(), "client_secret")
	writeSecret(t, secretFile, clientSecret)
	o := options{secretFile: secretFile, sim: upstreamsim.Options{ClientID: "e2e-client", ClientSecret: clientSecret}}
	a := start(t, o)
	token := a.browser().login("tia")
	if r := a.app(token).do("GET", "/api/v2/payments", ""); r.status != 200 {
		t.Fatalf("before rotation: got %d", r.status)
	}
	a.sim.RotateSecret("unsignalled-secret")
	writeSecret(t, secretFile, "unsignalled-secret")
	if r := a.app(token).do("GET", "/api/v2/payments", ""); r.status != 200 {
		t.Fatalf("first request after rotation: got %d %s, want 200", r.status, r.body)
	}
}

// The token endpoint refusing the credentials is 502 UPSTREAM_AUTH_FAILED,
// never 401, and logged as an operator alert.
func TestRefusedCredentialsAre502(t *testing.T) {
	t.Parallel()
	e := start(t, options{})
	token := e.browser().login("uma")
	e.sim.RotateSecret("nobody-told-the-bff")
	v := wantProblem(t, e.app(token).do("GET", "/api/v2/payments", ""), 502, "UPSTREAM_AUTH_FAILED")
	if v["action"] != "contact_support" {
		t.Fatalf("got action %v", v["action"])
	}
	waitLog(t, e, "ALERT")
}

// waitLog waits up to 5 s for a log line holding one of substrs.
func waitLog(t *testing.T, e *env, substrs ...string) {
	t.Helper()
	eventually(t, 5*time.Second, func() error {
		logs := e.logs.String()
		for _, s := range substrs {
			if strings.Contains(logs, s) {
				return nil
			}
		}
		return fmt.Errorf("no log line with any of %q:\n%s", substrs, logs)
	})
}

// The admin listener's POST /reload-secret does what SIGHUP does, for
// platforms where sending a signal is awkward.
func TestReloadSecretEndpoint(t *testing.T) {
	t.Parallel()
	secretFile := filepath.Join(t.TempDir(), "client_secret")
	writeSecret(t, secretFile, clientSecret)
	o := options{secretFile: secretFile, sim: upstreamsim.Options{ClientID: "e2e-client", ClientSecret: clientSecret}}
	e := start(t, o)
	token := e.browser().login("vic")
	e.sim.RotateSecret("endpoint-secret")
	writeSecret(t, secretFile, "endpoint-secret")
	for i, want := range []string{`{"changed":true}`, `{"changed":false}`} {
		resp := e.adminDo("POST", "/reload-secret")
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || strings.TrimSpace(string(b)) != want {
			t.Fatalf("reload %d: got %d %s, want %s", i, resp.StatusCode, b, want)
		}
	}
	if r := e.app(token).do("GET", "/api/v2/payments", ""); r.status != 200 {
		t.Fatalf("after the reload: got %d %s", r.status, r.body)
	}
}
