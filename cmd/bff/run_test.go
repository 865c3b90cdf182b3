package main

import (
	"github.com/fintech-bff/bff/internal/testing/poll"
	"github.com/fintech-bff/bff/internal/testing/syncbuf"

	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// run serves until its context ends, /readyz turns 503 while draining, and
// it returns nil after a clean shutdown.
func TestRunServesAndShutsDownCleanly(t *testing.T) {
	adm := freePort(t)
	cfg := devConfig(t, adm, "shutdown_delay: 2s\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"bff", "-config", cfg}, nil, &stdout, &stderr)
	}()
	status := func(path string) int {
		resp, err := http.Get("http://" + adm + path)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if !poll.Within(10*time.Second, func() bool { return status("/readyz") == 200 }) {
		t.Fatalf("not ready after 10s:\n%s", stderr.String())
	}
	if got := status("/healthz"); got != 200 {
		t.Fatalf("healthz: got %d, want 200", got)
	}
	if !strings.Contains(stderr.String(), "NO PAYMENTS LEDGER") {
		t.Fatalf("development without ledger.postgres_url must warn loudly; log:\n%s", stderr.String())
	}
	cancel()
	poll.Until(t, 5*time.Second, "readyz turned 503 during the shutdown delay", func() bool { return status("/readyz") == 503 })
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run returned %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after shutdown")
	}
	if strings.Contains(stderr.String(), "run-test-secret") {
		t.Fatal("the client secret appears in the logs")
	}
	if !strings.Contains(stderr.String(), "DEVELOPMENT LOGIN ENABLED") {
		t.Fatal("no loud warning for auth.mode dev")
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	_ = os.WriteFile(cfg, []byte("env: staging\n"), 0o600)
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"bff", "-config", cfg}, nil, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "env") {
		t.Fatalf("got %v, want an error naming env", err)
	}
}

// A static_dir that is not a built app stops the BFF at start, naming the key.
func TestRunRefusesStaticDirWithoutApp(t *testing.T) {
	dir := t.TempDir()
	cfg := devConfig(t, freePort(t), `static_dir: "`+dir+`"`+"\n")
	var out, errOut syncbuf.Buffer
	err := run(context.Background(), []string{"bff", "-config", cfg}, nil, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "static_dir: ") || !strings.Contains(err.Error(), "index.html") {
		t.Fatalf("got %v, want an error naming static_dir and index.html", err)
	}
}

// devConfig writes a development config (dev login, in-process store, an
// unreachable upstream) listening on a free port with its admin listener
// on adm, plus extra YAML lines, and returns its path.
func devConfig(t *testing.T, adm, extra string) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	err := os.WriteFile(cfg, []byte(`env: development
listen: "`+freePort(t)+`"
admin_listen: "`+adm+`"
upstream: { base_url: "http://127.0.0.1:1", client_id: c, client_secret: run-test-secret }
redis: { url: "" }
session: { secure_cookie: false }
auth: { mode: dev }
`+extra), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
