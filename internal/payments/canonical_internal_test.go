package payments

import "testing"

func TestCanonicalPath(t *testing.T) {
	for _, tc := range []struct {
		path, want string
		ok         bool
	}{
		{"/v2/payments", "/v2/payments", true},
		{"/v2/payments/", "/v2/payments", true},
		{"/v2/pay/open-banking-init", "/v2/pay/open-banking-init", true},
		{"/v2/pay/open-banking-init/", "/v2/pay/open-banking-init", true},
		{"/v2/payments/01JPAY", "", false},
		{"/v2/payments/x/", "", false},
		{"/v2/pay", "", false},
		{"/v2/pay/", "", false},
		{"/v2/pay/other", "", false},
		{"/v2/pay/open-banking-init/x", "", false},
		{"/v3/transfers", "/v3/transfers", true},
		{"/v3/transfers/", "/v3/transfers", true},
	} {
		got, ok := canonicalPath(tc.path)
		if got != tc.want || ok != tc.ok {
			t.Errorf("canonicalPath(%q): got %q, %v; want %q, %v", tc.path, got, ok, tc.want, tc.ok)
		}
	}
}

func TestDuplicateKey(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"paymentInformation":{"amount":1},"PaymentInformation":{"amount":2}}`, "PaymentInformation"},
		{`{"paymentInformation":{"amount":1,"amount":2}}`, "paymentInformation.amount"},
		{`{"paymentInformation":{"creditorAccount":{"iban":"A","IBAN":"B"}}}`, "paymentInformation.creditorAccount.IBAN"},
		{`{"a":[{"x":1,"X":2}]}`, "a.X"},
		{`{"paymentInformation":{"amount":1},"redirectUrl":"u"}`, ""},
		{`[{"a":1},{"a":1}]`, ""},
		{`not json`, ""},
		{`{"a":1,`, ""},
	} {
		if got := duplicateKey([]byte(tc.body)); got != tc.want {
			t.Errorf("duplicateKey(%s): got %q, want %q", tc.body, got, tc.want)
		}
	}
}

// A body read as the upstream reads it: the exact keys, an existing
// paymentId creating nothing.
func TestCreates(t *testing.T) {
	for _, tc := range []struct {
		body string
		want bool
	}{
		{`{"paymentInformation":{"amount":1}}`, true},
		{`{"PaymentInformation":{"amount":1}}`, false},
		{`{"paymentInformation":{}}`, false},
		{`{"paymentId":"01J","paymentInformation":{"amount":1}}`, false},
		{`{"paymentId":"","paymentInformation":{"amount":1}}`, true},
		{`{"paymentId":1,"paymentInformation":{"amount":1}}`, false},
		{`{"paymentInformation":{"amount":1},"redirectUrl":3}`, false},
	} {
		if _, got := creates([]byte(tc.body), initPath); got != tc.want {
			t.Errorf("creates(%s) on the init: got %v, want %v", tc.body, got, tc.want)
		}
	}
	// A creation reads its paymentInformation whatever paymentId it
	// carries: the upstream's POST /v2/payments reads none.
	for _, body := range []string{`{"paymentId":"01J","paymentInformation":{"amount":1}}`, `{"paymentId":{},"paymentInformation":{"amount":1}}`} {
		if _, got := creates([]byte(body), creationPath); !got {
			t.Errorf("creates(%s) on the creation: got false, want true", body)
		}
	}
}
