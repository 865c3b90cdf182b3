package login

import (
	"crypto/elliptic"
	"testing"
)

// RFC 9449 section 8.2: a provider may hand out its next nonce in a
// successful response's DPoP-Nonce; the next login uses it, no retry.
func TestDPoPNonceOfASuccessfulResponseIsKept(t *testing.T) {
	keys, _ := ParseClientKeys(privateJWKS(t, ecKey(t, elliptic.P256())), "")
	op := newFAPIOP(t, keys.PublicJWKS())
	p, err := newFAPI2(t, op, keys)
	if err != nil {
		t.Fatal(err)
	}
	if err := fapi2Login(t, p, op); err != nil { // use_dpop_nonce, then nonce-1
		t.Fatal(err)
	}
	op.mu.Lock()
	op.rotate = "nonce-2"
	op.mu.Unlock()
	if err := fapi2Login(t, p, op); err != nil { // nonce-1, answered with nonce-2 next
		t.Fatal(err)
	}
	if err := fapi2Login(t, p, op); err != nil { // nonce-2
		t.Fatal(err)
	}
	if op.nonceFor != 1 || len(op.tokens) != 4 {
		t.Fatalf("%d token requests for 3 logins, use_dpop_nonce %d times; want the nonce of the successful response used", len(op.tokens), op.nonceFor)
	}
}
