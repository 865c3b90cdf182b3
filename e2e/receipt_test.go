//go:build integration

package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-jose/go-jose/v4"
	"github.com/gowebpki/jcs"

	"github.com/fintech-bff/bff/internal/receipts"
)

var (
	verifierOnce sync.Once
	verifierBin  string
	verifierErr  error
)

// verifyReceiptBin builds cmd/verify-receipt once per run.
func verifyReceiptBin(t *testing.T) string {
	t.Helper()
	verifierOnce.Do(func() {
		dir, err := os.MkdirTemp("", "verify-receipt")
		if err != nil {
			verifierErr = err
			return
		}
		verifierBin = filepath.Join(dir, "verify-receipt")
		out, err := exec.Command("go", "build", "-o", verifierBin, "../cmd/verify-receipt").CombinedOutput()
		if err != nil {
			verifierErr = fmt.Errorf("%v: %s", err, out)
		}
	})
	if verifierErr != nil {
		t.Fatal(verifierErr)
	}
	return verifierBin
}

// verifyOffline runs the Go command on a receipt against a key set saved
// to a file, as a support team would; it returns its exit code and output.
func verifyOffline(t *testing.T, jwks []byte, receipt string) (int, string) {
	t.Helper()
	dir := t.TempDir()
	jwksFile, receiptFile := filepath.Join(dir, "jwks.json"), filepath.Join(dir, "receipt.jws")
	if err := os.WriteFile(jwksFile, jwks, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(receiptFile, []byte(receipt), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(verifyReceiptBin(t), "-jwks", jwksFile, receiptFile)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, out.String()
}

// receiptOf fetches a payment's receipt and the instance's published keys.
func receiptOf(t *testing.T, c *client, key string) (string, []byte) {
	t.Helper()
	r := c.do("GET", "/bff/payments/"+key+"/receipt", "")
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/jose" {
		t.Fatalf("GET /bff/payments/%s/receipt: %d %q %s", key, r.status, r.header.Get("Content-Type"), r.body)
	}
	k := c.do("GET", "/bff/receipts/jwks.json", "")
	if k.status != http.StatusOK {
		t.Fatalf("GET /bff/receipts/jwks.json: %d %s", k.status, k.body)
	}
	return string(r.body), k.body
}

// A finished payment's receipt verifies offline under the published keys
// with the Go command, and states what the ledger knows: the amount in
// minor units, the payee with a masked account, the payment id, the
// status, the hash of the body sent. A tampered receipt fails; another
// user's key is 404 as an unknown one; another instance of the same
// deployment signs alike.
func TestReceiptVerifiesOffline(t *testing.T) {
	t.Parallel()
	e := start(t, options{})
	alice := e.browser()
	alice.login("alice")
	r := alice.do("POST", "/api/v2/payments", eurPayment("1234.56", "receipt test"), "Idempotency-Key", "rcpt-1", "X-CSRF", "1")
	if r.status != http.StatusCreated {
		t.Fatalf("payment: %d %s", r.status, r.body)
	}
	receipt, jwks := receiptOf(t, alice, "rcpt-1")
	code, out := verifyOffline(t, jwks, receipt)
	if code != 0 {
		t.Fatalf("verify-receipt exited %d:\n%s", code, out)
	}
	for _, want := range []string{"idempotency key:   rcpt-1", "amount:            1234.56 EUR (123456 minor units)", "payee:             Jane Doe",
		"payee account:     DE89 … 3000", "outcome:           done, answered 201", "signed by " + e.public} {
		if !strings.Contains(out, want) {
			t.Errorf("verify-receipt's facts lack %q:\n%s", want, out)
		}
	}
	d, _, err := receipts.Verify(receipt, jwks)
	if err != nil {
		t.Fatal(err)
	}
	if rec := record(t, alice, "rcpt-1"); d.PaymentID == "" || d.PaymentID != rec["paymentId"] || d.UserID != "alice" || d.BodySHA256 == "" {
		t.Fatalf("receipt %+v, record %v", d, rec)
	}
	if strings.Contains(receipt, "DE89370400440532013000") || strings.Contains(string(mustB64(t, strings.Split(receipt, ".")[1])), "DE89370400440532013000") {
		t.Fatal("the receipt carries the payee's whole IBAN")
	}

	t.Run("tampered", func(t *testing.T) {
		parts := strings.Split(receipt, ".")
		payload := strings.Replace(string(mustB64(t, parts[1])), `"minor":123456`, `"minor":12345`, 1)
		forged := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." + parts[2]
		if code, out := verifyOffline(t, jwks, forged); code != 1 || !strings.Contains(out, "NOT VERIFIED") {
			t.Fatalf("a tampered receipt: exit %d\n%s", code, out)
		}
	})
	t.Run("another user", func(t *testing.T) {
		bob := e.browser()
		bob.login("bob")
		wantProblem(t, bob.do("GET", "/bff/payments/rcpt-1/receipt", ""), http.StatusNotFound, "ROUTE_NOT_FOUND")
		wantProblem(t, bob.do("GET", "/bff/payments/never-used/receipt", ""), http.StatusNotFound, "ROUTE_NOT_FOUND")
	})
	t.Run("no session", func(t *testing.T) {
		wantProblem(t, e.browser().do("GET", "/bff/payments/rcpt-1/receipt", ""), http.StatusUnauthorized, "SESSION_REQUIRED")
	})
	t.Run("another instance", func(t *testing.T) {
		other := e.another(options{})
		c := other.browser()
		c.login("alice")
		again, otherKeys := receiptOf(t, c, "rcpt-1")
		if string(otherKeys) != string(jwks) {
			t.Fatalf("two instances publish different keys:\n%s\n%s", jwks, otherKeys)
		}
		if code, out := verifyOffline(t, jwks, again); code != 0 {
			t.Fatalf("the other instance's receipt under the first's keys: %d\n%s", code, out)
		}
	})
}

func mustB64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Keys from payments.receipts.keys_file: a receipt signed before a
// rotation (a second key added and made active) still verifies under the
// keys the rotated deployment publishes, and new receipts carry the new
// kid.
func TestReceiptKeyRotation(t *testing.T) {
	t.Parallel()
	k1, k2 := mustECKey(t), mustECKey(t)
	dir := t.TempDir()
	before, after := filepath.Join(dir, "before.json"), filepath.Join(dir, "after.json")
	writeJWKS(t, before, jose.JSONWebKey{Key: k1, KeyID: "r1"})
	writeJWKS(t, after, jose.JSONWebKey{Key: k1, KeyID: "r1"}, jose.JSONWebKey{Key: k2, KeyID: "r2"})
	keysYAML := func(file, active string) string {
		return fmt.Sprintf("payments:\n  receipts:\n    keys_file: %q\n    key_id: %q", file, active)
	}
	e := start(t, options{extraYAML: keysYAML(before, "r1")})
	c := e.browser()
	c.login("alice")
	if r := c.do("POST", "/api/v2/payments", eurPayment("10.00", "before"), "Idempotency-Key", "rot-1", "X-CSRF", "1"); r.status != http.StatusCreated {
		t.Fatalf("payment: %d %s", r.status, r.body)
	}
	old, _ := receiptOf(t, c, "rot-1")

	rotated := e.another(options{extraYAML: keysYAML(after, "r2")})
	rc := rotated.browser()
	rc.login("alice")
	fresh, jwks := receiptOf(t, rc, "rot-1")
	if _, kid, err := receipts.Verify(old, jwks); err != nil || kid != "r1" {
		t.Fatalf("the receipt from before the rotation under the rotated keys: %v (kid %q)", err, kid)
	}
	if _, kid, err := receipts.Verify(fresh, jwks); err != nil || kid != "r2" {
		t.Fatalf("a receipt after the rotation: %v (kid %q), want r2", err, kid)
	}
	if code, out := verifyOffline(t, jwks, old); code != 0 {
		t.Fatalf("verify-receipt on the old receipt: %d\n%s", code, out)
	}
}

func writeJWKS(t *testing.T, path string, keys ...jose.JSONWebKey) {
	t.Helper()
	b, _ := json.Marshal(jose.JSONWebKeySet{Keys: keys})
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A held payment has no receipt while it waits (409, saying why); once
// approved and sent, its receipt carries the approval: the acr the
// provider asserted, its auth_time, and the SHA-256 of the canonical JSON
// of the details it granted, which anyone holding them computes again.
func TestReceiptOfAnApprovedPayment(t *testing.T) {
	t.Parallel()
	e, _ := stepUpEnv(t, options{})
	b := webLogin(t, e, "alice")
	stepUp := held(t, b, eurPayment("500.00", "approved receipt"), "rcpt-held", "X-CSRF", "1")
	p := wantProblem(t, b.do("GET", "/bff/payments/rcpt-held/receipt", ""), http.StatusConflict, "IDEMPOTENCY_IN_PROGRESS")
	if !strings.Contains(fmt.Sprint(p["detail"]), "approval") {
		t.Fatalf("the held payment's 409 does not say why: %v", p)
	}
	authURL := beginStepUp(t, b, stepUp, "&returnTo=/paid")
	granted := mustURL(t, authURL).Query().Get("authorization_details")
	cb, _ := opDecide(t, b.http, authURL, "alice", "123456", "approve")
	wantBackTo(t, "the approval", b.follow(t, cb), "/paid?payment=rcpt-held&stepUp=approved")

	receipt, jwks := receiptOf(t, b, "rcpt-held")
	d, _, err := receipts.Verify(receipt, jwks)
	if err != nil {
		t.Fatal(err)
	}
	canonical, err := jcs.Transform([]byte(granted))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(canonical)
	a := d.Approval
	if a == nil || a.ACR != "urn:bff:acr:mfa" || a.AuthTime == "" || a.DetailsSHA256 != base64.RawURLEncoding.EncodeToString(sum[:]) {
		t.Fatalf("the receipt's approval %+v, want acr urn:bff:acr:mfa, an auth_time and the granted details' hash", a)
	}
	if d.Status != http.StatusCreated || d.Amount == nil || d.Amount.Minor != 50000 {
		t.Fatalf("receipt %+v", d)
	}
}
