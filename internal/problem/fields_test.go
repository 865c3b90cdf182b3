package problem

import (
	"reflect"
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
				{Field: "x", Message: `x\y bad`},
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
