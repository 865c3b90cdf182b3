package config

import (
	"crypto/rand"
	"encoding/base64"
	"os"
	"strings"
	"testing"
)

// payments.webhook_secrets are read as start-up reads them, so that a
// malformed one stops Load (and bff -check) naming the key, and a secret
// printed in the repository (the simulator's, a test's) is refused in
// production as the other development settings are.
func TestValidateWebhookSecrets(t *testing.T) {
	const simulator = "whsec_dXBzdHJlYW0tc2ltIGRldmVsb3BtZW50IHdlYmhvb2tzIQ==" // upstreamsim.DefaultWebhookSecret
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	own := "whsec_" + base64.StdEncoding.EncodeToString(key) // random: printed nowhere
	short := "whsec_" + base64.StdEncoding.EncodeToString([]byte("a short key"))
	tests := []struct {
		name    string
		base    map[string]string
		secrets string
		want    string // substring of the error; "" for a valid config
	}{
		{"production, its own secret", prodEnv(), `["` + own + `"]`, ""},
		{"production, the simulator's", prodEnv(), `["` + own + `", "` + simulator + `"]`, "payments.webhook_secrets[1]: a secret printed in the BFF's repository"},
		{"production, the Standard Webhooks example", prodEnv(), `["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]`, "payments.webhook_secrets[0]: a secret printed"},
		{"development, the simulator's", devEnv(), `["` + simulator + `"]`, ""},
		{"development, no prefix", devEnv(), `["` + strings.TrimPrefix(own, "whsec_") + `"]`, `payments.webhook_secrets[0]: want the "whsec_" prefix`},
		{"development, not base64", devEnv(), `["whsec_not*base64"]`, `payments.webhook_secrets[0]: want standard base64 after "whsec_"`},
		{"development, too short", devEnv(), `["` + own + `", "` + short + `"]`, "payments.webhook_secrets[1]: key of 11 bytes: want 24 to 64"},
		{"production, too short", prodEnv(), `["` + short + `"]`, "payments.webhook_secrets[0]: key of 11 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(t, "", with(tt.base, map[string]string{
				"BFF_PAYMENTS_WEBHOOK_PATH":    "/webhooks/payments",
				"BFF_PAYMENTS_WEBHOOK_SECRETS": tt.secrets,
			}))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("got error %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(fromEnv.ReplaceAllString(err.Error(), ""), tt.want) {
				t.Fatalf("got error %v, want it to contain %q", err, tt.want)
			}
			for _, s := range []string{own, simulator, short, strings.TrimPrefix(own, "whsec_"), "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"} {
				if strings.Contains(err.Error(), strings.TrimPrefix(s, "whsec_")) {
					t.Errorf("the error quotes a secret: %v", err)
				}
			}
		})
	}
}

// config.dev.yaml, run with env: production, is refused for its webhook
// secret (the simulator's), whatever else is also wrong with it there.
func TestDevConfigWebhookSecretRefusedInProduction(t *testing.T) {
	b, err := os.ReadFile("../../config.dev.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := load(t, string(b), map[string]string{}); err != nil {
		t.Fatalf("config.dev.yaml in development: %v", err)
	}
	_, err = load(t, string(b), map[string]string{"BFF_ENV": "production"})
	if err == nil || !strings.Contains(err.Error(), "payments.webhook_secrets[0]: a secret printed in the BFF's repository") {
		t.Fatalf("got %v, want payments.webhook_secrets[0] refused", err)
	}
}
