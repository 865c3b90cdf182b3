package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fintech-bff/bff/internal/receipts"
	"github.com/fintech-bff/bff/internal/signing"
)

func signed(t *testing.T, d receipts.Document) (jws, jwksFile string) {
	t.Helper()
	k, err := signing.Derived("verify-receipt test", []byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	jws, err = receipts.Sign(k, d)
	if err != nil {
		t.Fatal(err)
	}
	jwksFile = filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(jwksFile, k.PublicJWKS(), 0o600); err != nil {
		t.Fatal(err)
	}
	return jws, jwksFile
}

func document() receipts.Document {
	return receipts.Document{Version: receipts.Version, Issuer: "https://bff.example", IssuedAt: "2026-12-05T10:00:00Z",
		UserID: "alice", Key: "k1", Route: "/v2/payments", State: "done", Status: 201, PaymentID: "pay_1",
		Amount: &receipts.Amount{Minor: 100050, Currency: "EUR", Text: "1000.50"}, Payee: &receipts.Payee{Name: "Jane Doe"},
		RequestedAt: "2026-12-05T09:59:59Z"}
}

func TestPrintsAVerifiedReceipt(t *testing.T) {
	jws, jwks := signed(t, document())
	var out, errs bytes.Buffer
	if code := run([]string{"-jwks", jwks, "-"}, strings.NewReader(jws+"\n"), &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	if !strings.Contains(out.String(), "amount:            1000.50 EUR (100050 minor units)\n") ||
		!strings.Contains(out.String(), "payee:             Jane Doe\n") {
		t.Fatalf("output:\n%s", out.String())
	}
}

// The facts a receipt states are the user's own words in part (the
// payee's name): a name with a line break or a terminal's escape sequence
// must not print as a fact of its own, nor rewrite what is on the screen.
func TestPrintsNoControlCharacters(t *testing.T) {
	d := document()
	d.Payee.Name = "Jane\namount:            1.00 EUR (100 minor units)\x1b[2A\u202e"
	jws, jwks := signed(t, d)
	var out, errs bytes.Buffer
	if code := run([]string{"-jwks", jwks, "-"}, strings.NewReader(jws), &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	amounts := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "amount:") {
			amounts++
		}
	}
	if amounts != 1 || strings.ContainsAny(out.String(), "\x1b\u202e") {
		t.Fatalf("a payee's name printed as more than itself:\n%s", out.String())
	}
}

// Plain http only to this machine: a host that merely starts with
// "localhost" or "127.0.0.1" is another machine, and a redirect is held
// to the same rule, so the keys cannot be swapped on the way.
func TestJWKSOverHTTPSOrFromThisMachine(t *testing.T) {
	for _, u := range []string{"http://localhost.invalid/jwks.json", "http://127.0.0.1.invalid/jwks.json", "http://localhost@example.invalid/jwks.json"} {
		if _, err := readJWKS(u); err == nil || !strings.Contains(err.Error(), "https") {
			t.Errorf("%s: %v, want the refusal of plain http", u, err)
		}
	}
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://example.invalid/jwks.json", http.StatusFound)
	}))
	defer redirect.Close()
	if _, err := readJWKS(redirect.URL + "/jwks.json"); err == nil || !strings.Contains(err.Error(), "https") {
		t.Errorf("a redirect to plain http elsewhere: %v, want the refusal of plain http", err)
	}
	keys := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`{"keys":[]}`)) }))
	defer keys.Close()
	if b, err := readJWKS(keys.URL + "/jwks.json"); err != nil || string(b) != `{"keys":[]}` {
		t.Errorf("this machine's key set: %q %v", b, err)
	}
}

// An input over the bound is refused as such (a usage error), not cut to
// the bound and then called a receipt that does not verify.
func TestRefusesAnInputOverTheBound(t *testing.T) {
	_, jwks := signed(t, document())
	var out, errs bytes.Buffer
	if code := run([]string{"-jwks", jwks, "-"}, bytes.NewReader(bytes.Repeat([]byte("a"), maxInput+1)), &out, &errs); code != 2 ||
		!strings.Contains(errs.String(), "larger than") {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	big := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(big, bytes.Repeat([]byte(" "), maxInput+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if code := run([]string{"-jwks", big, "-"}, strings.NewReader("x"), &out, &errs); code != 2 || !strings.Contains(errs.String(), "larger than") {
		t.Fatalf("a key set over the bound: exit %d: %s", code, errs.String())
	}
}

// A request the upstream refused is "done" (answered) with its error
// status and no payment id: the outcome line says it was no success, so
// that the amount and payee printed below are not read as paid.
func TestPrintsARefusalAsSuch(t *testing.T) {
	d := document()
	d.Status, d.PaymentID = 422, ""
	jws, jwks := signed(t, d)
	var out, errs bytes.Buffer
	if code := run([]string{"-jwks", jwks, "-"}, strings.NewReader(jws), &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	if !strings.Contains(out.String(), "outcome:           done, answered 422: an error, not a success\n") {
		t.Fatalf("output:\n%s", out.String())
	}
}
