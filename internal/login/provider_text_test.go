package login

import (
	"crypto/elliptic"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// What the provider's answers say reaches the BFF's logs only bounded and
// as the provider's word: a token_type of any length is cut short, and an
// error body cannot set the HTTP status the error names.
func TestProviderTextInErrorsIsBounded(t *testing.T) {
	keys, _ := ParseClientKeys(privateJWKS(t, ecKey(t, elliptic.P256())), "")

	op := newFAPIOP(t, keys.PublicJWKS())
	long := strings.Repeat("B", 100_000)
	op.meta["token_endpoint"] = op.srv.URL + "/token-long"
	op.mux.HandleFunc("/token-long", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"token_type": long, "id_token": "x"})
	})
	p, err := newFAPI2(t, op, keys)
	if err != nil {
		t.Fatal(err)
	}
	if err := fapi2Login(t, p, op); err == nil || len(err.Error()) > 400 {
		t.Errorf("a %d-byte token_type: error of %d bytes", len(long), len(errText(err)))
	}

	op2 := newFAPIOP(t, keys.PublicJWKS())
	op2.meta["token_endpoint"] = op2.srv.URL + "/token-status"
	op2.mux.HandleFunc("/token-status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"invalid_client","status":200}`))
	})
	p2, err := newFAPI2(t, op2, keys)
	if err != nil {
		t.Fatal(err)
	}
	if err := fapi2Login(t, p2, op2); err == nil || !strings.Contains(err.Error(), "status 401, invalid_client") {
		t.Fatalf("a 401 whose body says status 200: %v", err)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
