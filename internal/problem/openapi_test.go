package problem

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/fintech-bff/bff/api"
)

// openAPISchema returns a named schema of api/openapi.yaml's components.
func openAPISchema(t *testing.T, name string) *openapi3.Schema {
	t.Helper()
	doc, err := api.Load()
	if err != nil {
		t.Fatalf("loading api/openapi.yaml: %v", err)
	}
	ref := doc.Components.Schemas[name]
	if ref == nil || ref.Value == nil {
		t.Fatalf("api/openapi.yaml has no schema components.schemas.%s", name)
	}
	return ref.Value
}

// enumStrings returns a schema's enum, each value a string.
func enumStrings(t *testing.T, name string, s *openapi3.Schema) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, v := range s.Enum {
		str, ok := v.(string)
		if !ok {
			t.Errorf("api/openapi.yaml: %s's enum holds %v (%T), want only strings", name, v, v)
			continue
		}
		if out[str] {
			t.Errorf("api/openapi.yaml: %s's enum lists %s twice", name, str)
		}
		out[str] = true
	}
	return out
}

// compareEnum reports every value in want but not in the document's enum,
// and every value in the enum but not in want.
func compareEnum(t *testing.T, schema string, documented, want map[string]bool, what string) {
	t.Helper()
	for _, v := range sortedKeys(want) {
		if !documented[v] {
			t.Errorf("api/openapi.yaml: %s %s is missing from components.schemas.%s.enum: add it", what, v, schema)
		}
	}
	for _, v := range sortedKeys(documented) {
		if !want[v] {
			t.Errorf("api/openapi.yaml: components.schemas.%s.enum lists %s %s, which the BFF never returns: remove it, or add it to problem.go first", schema, what, v)
		}
	}
}

// TestOpenAPICodes keeps the document's ProblemCode enumeration equal to
// the codes the BFF can return: every key of specs, every Code constant,
// and every code FromUpstream makes of the upstream's known error types
// (the same set docs/errors.md's catalogue is held to).
func TestOpenAPICodes(t *testing.T) {
	want := map[string]bool{}
	for code := range specs {
		want[code] = true
	}
	for code := range declaredConstants(t, "Code") {
		want[code] = true
	}
	for code := range upstreamOnlyCodes() {
		want[code] = true
	}
	compareEnum(t, "ProblemCode", enumStrings(t, "ProblemCode", openAPISchema(t, "ProblemCode")), want, "code")
}

// TestOpenAPIActions keeps the document's ProblemAction enumeration equal
// to the Action constants.
func TestOpenAPIActions(t *testing.T) {
	want := map[string]bool{}
	for action := range declaredConstants(t, "Action") {
		want[action] = true
	}
	compareEnum(t, "ProblemAction", enumStrings(t, "ProblemAction", openAPISchema(t, "ProblemAction")), want, "action")
}

// extensionMembers are the extension members the package writes (the
// upstream 402's; the upstream's own message in development) and those of
// payments' STEP_UP_REQUIRED (docs/payments.md, "Payments the user
// approves"), which the document and docs/errors.md list with the standard
// ones.
var extensionMembers = []string{memberCost, memberBalance, memberUpstreamMessage,
	"stepUpUrl", "acrValues", "expiresAt", "maxAge"}

// TestOpenAPIEnvelope keeps the document's Problem schema equal to the
// members Write renders: the same names, required exactly when never
// omitted, and code and action bound to the enumerations. Those are the
// standard members (Problem's tagged fields) and the extension members
// FromUpstream sets, which are never required.
func TestOpenAPIEnvelope(t *testing.T) {
	s := openAPISchema(t, "Problem")
	var members []string
	typ := reflect.TypeFor[Problem]()
	for i := 0; i < typ.NumField(); i++ {
		name, opts, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		members = append(members, name)
		if _, ok := s.Properties[name]; !ok {
			t.Errorf("api/openapi.yaml: Problem lacks the member %s (Problem.%s): add it to its properties", name, typ.Field(i).Name)
		}
		omitted := strings.Contains(opts, "omitempty")
		if required := slices.Contains(s.Required, name); required == omitted {
			t.Errorf("api/openapi.yaml: Problem.%s required=%v, want %v (the member is %s)", name, required, !omitted,
				map[bool]string{true: "omitted when empty", false: "always rendered"}[omitted])
		}
	}
	for _, name := range extensionMembers {
		members = append(members, name)
		if _, ok := s.Properties[name]; !ok {
			t.Errorf("api/openapi.yaml: Problem lacks the extension member %s: add it to its properties", name)
		}
		if slices.Contains(s.Required, name) {
			t.Errorf("api/openapi.yaml: Problem.%s is required, want not (an extension member of one condition)", name)
		}
		if !extensible(name) {
			t.Errorf("the extension member %s is one Write leaves out", name)
		}
	}
	for name := range s.Properties {
		if !slices.Contains(members, name) {
			t.Errorf("api/openapi.yaml: Problem has the member %s, which Write never renders: remove it", name)
		}
	}
	if s.AdditionalProperties.Has == nil || *s.AdditionalProperties.Has {
		t.Errorf("api/openapi.yaml: Problem must say additionalProperties: false (Write renders no other member)")
	}
	if got := s.Properties["action"].Ref; got != "#/components/schemas/ProblemAction" {
		t.Errorf("api/openapi.yaml: Problem.action is %q, want a $ref to #/components/schemas/ProblemAction", got)
	}
	code := s.Properties["code"].Value
	if len(code.AnyOf) == 0 || code.AnyOf[0].Ref != "#/components/schemas/ProblemCode" {
		t.Errorf("api/openapi.yaml: Problem.code must be anyOf [ProblemCode, UpstreamErrorType], with ProblemCode first")
	}
}
