// Package api holds the BFF's public API description, api/openapi.yaml
// (OpenAPI 3.1): every endpoint of the public listener, the forwarded
// routes of the default allowlist with the upstream's known reply shapes,
// and the error envelope. Frontends generate their types from the file;
// the tests hold the BFF's real answers to it (docs/openapi.md).
//
// The bff binary does not import this package.
package api

import (
	_ "embed"

	"github.com/getkin/kin-openapi/openapi3"
)

// OpenAPI is the text of openapi.yaml. Callers must not modify it.
//
//go:embed openapi.yaml
var OpenAPI []byte

// Load parses OpenAPI with every $ref resolved. It does not validate the
// document (openapi3.T.Validate does); each call returns a new document,
// which the caller owns.
func Load() (*openapi3.T, error) {
	return openapi3.NewLoader().LoadFromData(OpenAPI)
}
