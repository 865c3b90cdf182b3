package login

import (
	"crypto/elliptic"
	"testing"
)

// RFC 9449 section 4.2: htu is the target URI without query and fragment.
// A token endpoint with a query (a tenant, say) still gets a valid proof.
func TestDPoPProofHTUHasNoQuery(t *testing.T) {
	keys, _ := ParseClientKeys(privateJWKS(t, ecKey(t, elliptic.P256())), "")
	op := newFAPIOP(t, keys.PublicJWKS())
	op.meta["token_endpoint"] = op.srv.URL + "/token?tenant=a"
	p, err := newFAPI2(t, op, keys)
	if err != nil {
		t.Fatal(err)
	}
	if err := fapi2Login(t, p, op); err != nil {
		t.Fatalf("login at a token endpoint with a query: %v", err)
	}
}
