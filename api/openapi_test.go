package api_test

import (
	"context"
	"testing"

	"github.com/fintech-bff/bff/api"
)

// TestOpenAPIValid loads the document and validates it as OpenAPI 3.1:
// every $ref resolves, every schema is well formed, every example matches.
func TestOpenAPIValid(t *testing.T) {
	doc, err := api.Load()
	if err != nil {
		t.Fatalf("loading api/openapi.yaml: %v", err)
	}
	if got := doc.OpenAPIMajorMinor(); got != "3.1" {
		t.Errorf("got OpenAPI %s, want 3.1", got)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("api/openapi.yaml is not a valid OpenAPI document: %v", err)
	}
}

// TestOpenAPIOperations: every public endpoint of the BFF is described.
func TestOpenAPIOperations(t *testing.T) {
	doc, err := api.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []struct{ method, path string }{
		{"GET", "/auth/login"},
		{"GET", "/auth/callback"},
		{"POST", "/auth/mobile/token"},
		{"POST", "/auth/dev/login"},
		{"GET", "/auth/methods"},
		{"GET", "/auth/session"},
		{"GET", "/auth/sessions"},
		{"DELETE", "/auth/sessions"},
		{"DELETE", "/auth/sessions/{id}"},
		{"POST", "/auth/logout"},
		{"POST", "/auth/backchannel-logout"},
		// Payments the user approves (payments.step_up).
		{"GET", "/auth/step-up"},
		{"POST", "/auth/step-up/token"},
		{"GET", "/bff/payments"},
		{"GET", "/bff/payments/{idempotencyKey}"},
		{"GET", "/bff/events"},
		// The upstream's webhook, at payments.webhook_path's example value.
		{"POST", "/webhooks/payments"},
	} {
		item := doc.Paths.Value(op.path)
		if item == nil || item.GetOperation(op.method) == nil {
			t.Errorf("api/openapi.yaml does not describe %s %s", op.method, op.path)
		}
	}
}
