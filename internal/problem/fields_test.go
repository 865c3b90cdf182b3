package problem

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseFields(t *testing.T) {
	tests := []struct {
		name    string
		message string
		want    []Field
	}{
		{
			name:    "JSON list",
			message: `["\"clientSecret\" is required", "paymentInformation should not be empty"]`,
			want: []Field{
				{Field: "clientSecret", Message: `"clientSecret" is required`},
				{Field: "paymentInformation", Message: "paymentInformation should not be empty"},
			},
		},
		{
			name:    "Python list",
			message: `['"amount" must be a number', 'currency is required']`,
			want: []Field{
				{Field: "amount", Message: `"amount" must be a number`},
				{Field: "currency", Message: "currency is required"},
			},
		},
		{
			name:    "Python list with both quotes and escapes",
			message: `["debtor's \"iban\" is invalid", 'it\'s "name" again', u'x\\y bad']`,
			want: []Field{
				{Field: "iban", Message: `debtor's "iban" is invalid`},
				{Field: "name", Message: `it's "name" again`},
				// "x" followed by a backslash is not a field problem: no field.
				{Field: "", Message: `x\y bad`},
			},
		},
		{
			name:    "nested dotted path",
			message: `["paymentInformation.creditorAccount.iban must be a valid IBAN"]`,
			want: []Field{{
				Field:   "paymentInformation.creditorAccount.iban",
				Message: "paymentInformation.creditorAccount.iban must be a valid IBAN",
			}},
		},
		{
			name:    "brackets",
			message: `["items[0].amount must be positive", "items[1]['label'] is required"]`,
			want: []Field{
				{Field: "items[0].amount", Message: "items[0].amount must be positive"},
				{Field: "items[1]['label']", Message: "items[1]['label'] is required"},
			},
		},
		{
			name:    "quoted nested path",
			message: `["\"paymentInformation.debtorAccount\" is required"]`,
			want:    []Field{{Field: "paymentInformation.debtorAccount", Message: `"paymentInformation.debtorAccount" is required`}},
		},
		{
			name:    "escaped quotes in a JSON list",
			message: `["\"remittance\" must not contain \\\"", "\"a\\\"b\" bad"]`,
			want: []Field{
				{Field: "remittance", Message: `"remittance" must not contain \"`},
				{Field: `a"b`, Message: `"a\"b" bad`},
			},
		},
		{
			name:    "list stringified twice",
			message: `"[\"\\\"clientSecret\\\" is required\"]"`,
			want:    []Field{{Field: "clientSecret", Message: `"clientSecret" is required`}},
		},
		{
			name:    "single message with quoted field",
			message: `"clientSecret" is required`,
			want:    []Field{{Field: "clientSecret", Message: `"clientSecret" is required`}},
		},
		{
			name:    "single message with bare field",
			message: "paymentInformation should not be empty",
			want:    []Field{{Field: "paymentInformation", Message: "paymentInformation should not be empty"}},
		},
		{
			name:    "single message with path and colon",
			message: "items[0].amount: must be positive",
			want:    []Field{{Field: "items[0].amount", Message: "items[0].amount: must be positive"}},
		},
		{name: "not a list: prose", message: "No providers were found"},
		{name: "not a list: prose with a quoted value", message: `Provider "abc-sandbox" not allowed`},
		{name: "not a list: sentence starting lower-case", message: "production access is not enabled for this organization"},
		{name: "not a list: abbreviation", message: "e.g. use a sandbox provider"},
		{name: "not a list: numbers", message: "[1, 2, 3]"},
		{name: "not a list: objects", message: `[{"field":"a"}]`},
		{name: "not a list: broken", message: `["unterminated`},
		{name: "not a list: empty", message: "   "},
		{name: "empty list", message: "[]"},
		{name: "list naming no field", message: `["!!!", "???"]`},
		{
			name:    "secret in the quoted token is not a field",
			message: `["\"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.c2lnbmF0dXJlc2lnbmF0dXJl\" is invalid", "amount is required"]`,
			want: []Field{
				{Field: "", Message: `"[redacted]" is invalid`},
				{Field: "amount", Message: "amount is required"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ParseFields(tc.message)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseFields(%q):\n got %#v\nwant %#v", tc.message, got, tc.want)
			}
		})
	}
}

func TestParseFieldsCapsEntries(t *testing.T) {
	msg := "["
	for i := range 200 {
		if i > 0 {
			msg += ","
		}
		msg += `"amount is required"`
	}
	msg += "]"
	if got := len(ParseFields(msg)); got != maxFields {
		t.Errorf("got %d fields, want %d", got, maxFields)
	}
}

// TestParseFieldsOnlyNamesFields: a field name comes from a quoted name at
// the start of an entry, a leading path or identifier that reads as a field
// problem, or a quoted name inside a lower-case list entry; a plain sentence
// (a malformed-JSON error above all) names no field.
func TestParseFieldsOnlyNamesFields(t *testing.T) {
	const unexpected = "Unexpected token } in JSON at position 12"
	tests := []struct {
		name    string
		message string
		want    []Field
	}{
		{name: "malformed JSON: a list", message: `["` + unexpected + `"]`},
		{name: "malformed JSON: a Python list", message: `['` + unexpected + `']`},
		{name: "malformed JSON: a list stringified twice", message: `"[\"` + unexpected + `\"]"`},
		{name: "malformed JSON: a single message", message: unexpected},
		{name: "malformed JSON: end of input", message: `["Unexpected end of JSON input"]`},
		{name: "malformed JSON: Node 20 with a quoted snippet", message: `["Unexpected token 'a', \"amount\" is not valid JSON"]`},
		{name: "malformed JSON: expected property name", message: `["Expected property name or '}' in JSON at position 1"]`},
		{
			name:    "malformed JSON beside a field problem",
			message: `["\"amount\" must be a number", "` + unexpected + `"]`,
			want: []Field{
				{Field: "amount", Message: `"amount" must be a number`},
				{Message: unexpected},
			},
		},
		{name: "list of prose: capitalised", message: `["Neither a Merchant Id nor creditor info supplied"]`},
		{name: "list of prose: lower-case", message: `["production access is not enabled for this organization"]`},
		{name: "list of prose: abbreviation", message: `["e.g. use a sandbox provider"]`},
		{name: "list of prose: contraction", message: `["it's bad"]`},
		{name: "list of prose: a quoted value in a sentence", message: `["Provider \"abc-sandbox\" not allowed"]`},
		{
			name:    "quoted paths with indexes",
			message: `["\"paymentInformation.amount\" must be a number", "\"items[0].amount\" must be positive", "\"[1]\" must be a string"]`,
			want: []Field{
				{Field: "paymentInformation.amount", Message: `"paymentInformation.amount" must be a number`},
				{Field: "items[0].amount", Message: `"items[0].amount" must be positive`},
				{Field: "[1]", Message: `"[1]" must be a string`},
			},
		},
		{
			name:    "a leading field before a quoted value",
			message: `["amount must not contain \"x\""]`,
			want:    []Field{{Field: "amount", Message: `amount must not contain "x"`}},
		},
		{
			name:    "single quoted dotted path",
			message: `"paymentInformation.amount" must be a number`,
			want:    []Field{{Field: "paymentInformation.amount", Message: `"paymentInformation.amount" must be a number`}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ParseFields(tc.message)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseFields(%q):\n got %#v\nwant %#v", tc.message, got, tc.want)
			}
		})
	}
}

// TestFromUpstreamMalformedJSON: the upstream's answer to a malformed JSON
// body keeps its message in detail and names no field.
func TestFromUpstreamMalformedJSON(t *testing.T) {
	for _, body := range []string{
		`{"statusCode":400,"message":"Unexpected token } in JSON at position 12","error":"Bad Request"}`,
		`{"type":"CLIENT_ERROR","message":"Unexpected token } in JSON at position 12"}`,
		`{"type":"CLIENT_ERROR","message":["Unexpected token } in JSON at position 12"]}`,
		`{"type":"VALIDATION_ERROR","message":"[\"Unexpected token } in JSON at position 12\"]"}`,
		`{"type":"VALIDATION_ERROR","message":["Unexpected token } in JSON at position 12"]}`,
	} {
		p := FromUpstream(400, nil, []byte(body))
		if p.Status != 400 || p.Fields != nil || !strings.Contains(p.Detail, "Unexpected token } in JSON at position 12") {
			t.Errorf("body %s: got status %d fields %#v detail %q, want 400, no fields and the message in detail",
				body, p.Status, p.Fields, p.Detail)
		}
	}
}
