package login

import (
	"crypto/elliptic"
	"encoding/json"
	"strings"
	"testing"
)

// A key whose JWK says it is for encryption, or for another algorithm
// than the one it would sign with, does not sign client assertions; a
// symmetric key is refused without its value in the error.
func TestParseClientKeysRefusesKeysNotForSigning(t *testing.T) {
	k := ecKey(t, elliptic.P256())
	withMember := func(member, value string) []byte {
		var m map[string]any
		_ = json.Unmarshal([]byte(jwkOf(t, k, "k1")), &m)
		m[member] = value
		b, _ := json.Marshal(map[string]any{"keys": []any{m}})
		return b
	}
	for name, tc := range map[string]struct {
		jwks []byte
		want string
	}{
		"use enc":      {withMember("use", "enc"), `use "enc"`},
		"alg ES384":    {withMember("alg", "ES384"), `alg "ES384"`},
		"alg RSA-OAEP": {withMember("alg", "RSA-OAEP"), `alg "RSA-OAEP"`},
		"oct":          {[]byte(`{"keys":[{"kty":"oct","kid":"s","k":"c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA"}]}`), "s"},
	} {
		_, err := ParseClientKeys(tc.jwks, "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", name, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "c2VjcmV0") || strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: the error shows the key: %v", name, err)
		}
	}
	// use sig and the matching alg are fine.
	b := withMember("alg", "ES256")
	if _, err := ParseClientKeys(b, ""); err != nil {
		t.Fatalf("alg ES256 on a P-256 key: %v", err)
	}
	if _, err := ParseClientKeys(withMember("use", "sig"), ""); err != nil {
		t.Fatalf("use sig: %v", err)
	}
}
