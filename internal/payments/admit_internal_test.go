package payments

import (
	"net/url"
	"strings"
	"testing"

	"github.com/fintech-bff/bff/internal/problem"
)

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

// A money body is read once into the model: an init names an existing
// payment or creates one, never both; members are read by their exact
// names, and a creation naming a paymentId is refused, not read two ways.
func TestReadBody(t *testing.T) {
	info := `{"amount":1,"currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}}`
	for _, tc := range []struct {
		path, body string
		creates    bool
		refused    string // the field named, "" when read
	}{
		{initPath, `{"providerId":"p","paymentInformation":` + info + `}`, true, ""},
		{initPath, `{"providerId":"p","PaymentInformation":` + info + `}`, false, "PaymentInformation"},
		{initPath, `{"providerId":"p","paymentInformation":{}}`, false, "paymentInformation.currency"},
		{initPath, `{"providerId":"p","paymentId":"01J"}`, false, ""},
		{initPath, `{"providerId":"p","paymentId":"01J","paymentInformation":` + info + `}`, false, "paymentId"},
		{initPath, `{"providerId":"p","paymentId":"","paymentInformation":` + info + `}`, true, ""},
		{initPath, `{"providerId":"p","paymentId":1,"paymentInformation":` + info + `}`, false, "paymentId"},
		{initPath, `{"providerId":"p","paymentInformation":` + info + `,"redirectUrl":3}`, false, "redirectUrl"},
		{creationPath, `{"paymentInformation":` + info + `}`, true, ""},
		{creationPath, `{"paymentId":"01J","paymentInformation":` + info + `}`, false, "paymentId"},
	} {
		b, p := readBody(tc.path, []byte(tc.body))
		switch {
		case tc.refused != "" && (p == nil || len(p.Fields) != 1 || p.Fields[0].Field != tc.refused):
			t.Errorf("%s %s: got %v, want a refusal naming %q", tc.path, tc.body, p, tc.refused)
		case tc.refused == "" && p != nil:
			t.Errorf("%s %s: refused %v", tc.path, tc.body, p)
		case tc.refused == "" && b.Creates() != tc.creates:
			t.Errorf("%s %s: creates %v, want %v", tc.path, tc.body, b.Creates(), tc.creates)
		}
	}
}

// A money body nested past maxDepth is refused at once, before anything
// reads it whole: a megabyte of brackets costs a bounded scan, not a
// recursion per bracket.
func TestDeepBodyIsRefused(t *testing.T) {
	deep := `{"a":` + strings.Repeat("[", 1<<20) + strings.Repeat("]", 1<<20) + `}`
	p := checkBody([]byte(deep))
	if p == nil || p.Code != problem.CodeValidationError || len(p.Fields) != 1 || p.Fields[0].Field != "body" {
		t.Fatalf("a body nested a million deep: got %v, want 400 VALIDATION_ERROR naming the body", p)
	}
	ok := `{"paymentInformation":{"amount":1,"currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}}}`
	if p := checkBody([]byte(ok)); p != nil {
		t.Fatalf("a payment: got %v", p)
	}
}

// The endpoints the BFF reads whole take no query: an upstream that merges
// query parameters into the body would act on what the BFF never read.
func TestNoQuery(t *testing.T) {
	for raw, refused := range map[string]bool{
		"/v2/payments": false, "/v2/payments?": true, "/v2/payments?amount=99999": true, "/v2/payments?x": true,
	} {
		u, _ := url.Parse(raw)
		if p := noQuery(u); (p != nil) != refused {
			t.Errorf("%s: got %v, want refused %v", raw, p, refused)
		}
	}
}
