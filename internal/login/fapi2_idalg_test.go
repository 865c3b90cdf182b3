package login

import (
	"context"
	"crypto/elliptic"
	"crypto/rsa"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/fintech-bff/bff/internal/kv"
)

// signAlg is a JWT of claims signed by key with alg.
func signAlg(t *testing.T, alg jose.SignatureAlgorithm, key *rsa.PrivateKey, kid string, claims map[string]any) string {
	t.Helper()
	return signTyped(t, alg, "JWT", key, kid, claims)
}

// newFAPI2 is a fapi2 Provider at op, made after the test changed op's
// discovery document.
func newFAPI2(t *testing.T, op *fapiOP, keys *ClientKeys) (*Provider, error) {
	t.Helper()
	return New(context.Background(), Options{Issuer: op.srv.URL, ClientID: "bff", RedirectURL: "https://bff.example/auth/callback",
		UserIDClaim: "sub", Store: kv.NewMemory(nil), EncryptionKey: make([]byte, 32), Profile: ProfileFAPI2, ClientKeys: keys})
}

func fapi2Login(t *testing.T, p *Provider, op *fapiOP) error {
	t.Helper()
	_, state, err := p.Begin(context.Background(), "/", nil)
	if err != nil {
		return err
	}
	_, err = p.Callback(context.Background(), state, "the-code", op.srv.URL, "")
	return err
}

// FAPI 2.0 section 5.4.1: a client processing JWTs uses PS256, ES256 or
// EdDSA only. An RS256 ID token is refused in the fapi2 profile even when
// the provider lists RS256 among its algorithms, and a provider whose ID
// tokens can only be RS256 is refused at start, naming it.
func TestFAPI2RefusesRS256IDTokens(t *testing.T) {
	keys, _ := ParseClientKeys(privateJWKS(t, ecKey(t, elliptic.P256())), "")

	op := newFAPIOP(t, keys.PublicJWKS())
	op.meta["id_token_signing_alg_values_supported"] = []string{"RS256", "PS256"}
	op.idAlg = jose.RS256
	p, err := newFAPI2(t, op, keys)
	if err != nil {
		t.Fatal(err)
	}
	if err := fapi2Login(t, p, op); err == nil {
		t.Fatal("an RS256 ID token was accepted in the fapi2 profile")
	}
	op.idAlg = jose.PS256
	if err := fapi2Login(t, p, op); err != nil {
		t.Fatalf("a PS256 ID token: %v", err)
	}

	for _, algs := range [][]string{{"RS256"}, nil} {
		op := newFAPIOP(t, keys.PublicJWKS())
		if algs == nil {
			delete(op.meta, "id_token_signing_alg_values_supported")
		} else {
			op.meta["id_token_signing_alg_values_supported"] = algs
		}
		if _, err := newFAPI2(t, op, keys); err == nil || !strings.Contains(err.Error(), "id_token_signing_alg_values_supported") {
			t.Errorf("ID token algorithms %v: got %v, want a refusal naming id_token_signing_alg_values_supported", algs, err)
		}
	}
}
