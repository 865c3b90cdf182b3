package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/fintech-bff/bff/internal/testing/leaktest"
)

// asBFF, set in a child's environment, makes the test binary run main
// (TestMain) with the child's arguments: the exit status is then the
// real one. Its name does not start with BFF_, which config refuses.
const asBFF = "RUN_TEST_BINARY_AS_BFF"

func TestMain(m *testing.M) {
	if os.Getenv(asBFF) == "1" {
		main()
		os.Exit(0)
	}
	leaktest.Main(m)
}

// bff -check reads every payments.webhook_secrets entry as start-up does:
// a malformed one is a non-zero exit naming the key, not "configuration
// OK" for a file that then stops every instance.
func TestCheckRefusesAMalformedWebhookSecret(t *testing.T) {
	const short = "whsec_c2hvcnQ=" // 5 bytes: start-up's NewVerifier refuses it
	cfg := devConfig(t, freePort(t), "payments: { webhook_path: /webhooks/payments, webhook_secrets: [\""+short+"\"] }\n")

	var out, errOut bytes.Buffer
	err := run(t.Context(), []string{"bff", "-check", "-config", cfg}, nil, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "payments.webhook_secrets[0]") {
		t.Fatalf("run -check: got %v, want an error naming payments.webhook_secrets[0]", err)
	}
	if strings.Contains(out.String(), "configuration OK") {
		t.Fatalf("run -check printed %q for a secret start-up refuses", out.String())
	}

	cmd := exec.Command(os.Args[0], "-check", "-config", cfg)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BFF_") { // the test's own BFF_TEST_* would be refused as unknown keys
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, asBFF+"=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("bff -check: got %v, want a non-zero exit (stdout %q, stderr %q)", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "payments.webhook_secrets[0]") || strings.Contains(stdout.String(), "configuration OK") {
		t.Fatalf("bff -check: stdout %q, stderr %q; want the key named and no \"configuration OK\"", stdout.String(), stderr.String())
	}
	if strings.Contains(stderr.String(), strings.TrimPrefix(short, "whsec_")) {
		t.Fatalf("bff -check quotes the secret: %q", stderr.String())
	}

	// The same file with a well-formed secret passes the check, and the
	// secret is not printed with the configuration.
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	good := "whsec_" + base64.StdEncoding.EncodeToString(key) // random: printed nowhere
	cfg = devConfig(t, freePort(t), "payments: { webhook_path: /webhooks/payments, webhook_secrets: [\""+good+"\"] }\n")
	out.Reset()
	if err := run(t.Context(), []string{"bff", "-check", "-config", cfg}, nil, &out, &errOut); err != nil || !strings.Contains(out.String(), "configuration OK") {
		t.Fatalf("run -check with a good secret: got %v, %q", err, out.String())
	}
	if strings.Contains(out.String(), strings.TrimPrefix(good, "whsec_")) {
		t.Fatalf("run -check printed the secret: %q", out.String())
	}
}
