package money

import (
	"strings"
	"testing"
)

func TestParseAmount(t *testing.T) {
	for _, c := range []struct {
		text, cur string
		minor     int64
		refused   string // a word of the refusal, "" when accepted
	}{
		{"10.50", "EUR", 1050, ""},
		{"10.5", "EUR", 1050, ""},
		{"10", "EUR", 1000, ""},
		{"0.01", "EUR", 1, ""},
		{"1000", "JPY", 1000, ""},
		{"1.250", "BHD", 1250, ""},
		{"9999999999999.99", "EUR", 999999999999999, ""},
		{"10000000000000.00", "EUR", 0, "significant"},
		{"10.0000000000000008881784197001262323389053", "EUR", 0, "decimals"},
		{"10.009999999999998898658759571845711899757385254", "EUR", 0, "decimals"},
		{"10.500", "EUR", 0, "decimals"},
		{"10.5", "JPY", 0, "decimals"},
		{"NaN", "EUR", 0, "plain decimal"},
		{"Infinity", "EUR", 0, "plain decimal"},
		{"1e999", "EUR", 0, "plain decimal"},
		{"1E2", "EUR", 0, "plain decimal"},
		{"0", "EUR", 0, "greater than 0"},
		{"0.00", "EUR", 0, "greater than 0"},
		{"-5", "EUR", 0, "greater than 0"},
		{"+5", "EUR", 0, "plain decimal"},
		{" 5", "EUR", 0, "plain decimal"},
		{"5.", "EUR", 0, "plain decimal"},
		{".5", "EUR", 0, "plain decimal"},
		{"05", "EUR", 0, "zero"},
		{"", "EUR", 0, "empty"},
		{"5", "eur", 0, "ISO 4217"},
		{"5", "XYZ", 0, "ISO 4217"},
		{"1,50", "EUR", 0, "plain decimal"},
		{"١٠", "EUR", 0, "plain decimal"}, // Arabic-Indic digits
	} {
		a, err := ParseAmount(c.text, c.cur)
		switch {
		case c.refused == "" && err != nil:
			t.Errorf("%q %s: refused (%v), want %d", c.text, c.cur, err, c.minor)
		case c.refused == "" && (a.Minor != c.minor || a.Currency != c.cur):
			t.Errorf("%q %s: got %+v, want %d", c.text, c.cur, a, c.minor)
		case c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused)):
			t.Errorf("%q %s: got %+v, %v; want a refusal saying %q", c.text, c.cur, a, err, c.refused)
		}
	}
}

func TestAmountString(t *testing.T) {
	for _, c := range []struct {
		a    Amount
		want string
	}{
		{Amount{1050, "EUR"}, "10.50"}, {Amount{1, "EUR"}, "0.01"}, {Amount{1000, "JPY"}, "1000"},
		{Amount{5, "BHD"}, "0.005"}, {Amount{999999999999999, "EUR"}, "9999999999999.99"},
	} {
		if got := c.a.String(); got != c.want {
			t.Errorf("%+v: got %q, want %q", c.a, got, c.want)
		}
		back, err := ParseAmount(c.want, c.a.Currency)
		if err != nil || back != c.a {
			t.Errorf("%q does not read back as %+v: %+v %v", c.want, c.a, back, err)
		}
	}
}

func TestReadAmountAndNear(t *testing.T) {
	eur := func(m int64) Amount { return Amount{m, "EUR"} }
	for _, c := range []struct {
		text  string
		cur   string
		exact bool
		minor int64
		near  []int64 // minor units of EUR it is near
		far   []int64
	}{
		{"10.01", "EUR", true, 1001, []int64{1001}, []int64{1000, 1002}},
		{"10.010", "EUR", true, 1001, []int64{1001}, []int64{1000}},
		{"1.001e1", "EUR", true, 1001, []int64{1001}, nil},
		{"1001e-2", "eur", true, 1001, []int64{1001}, nil},
		{"10.009999999999998", "EUR", false, 0, []int64{1000, 1001}, []int64{1002, 999}},
		{"10.000000000000002", "EUR", false, 0, []int64{1000, 1001}, []int64{999}},
		{"10", "", false, 0, []int64{1000}, []int64{1001, 999}},
		{"1e999", "EUR", false, 0, []int64{1, 1000}, nil}, // beyond reading: never ruled out
	} {
		r := ReadAmount(c.text, c.cur)
		if r.Exact != c.exact || (c.exact && r.Minor != c.minor) {
			t.Errorf("%q %s: got %+v, want exact=%v %d", c.text, c.cur, r, c.exact, c.minor)
		}
		for _, m := range c.near {
			if !r.Near(eur(m)) {
				t.Errorf("%q: want near %d", c.text, m)
			}
		}
		for _, m := range c.far {
			if r.Near(eur(m)) {
				t.Errorf("%q: want not near %d", c.text, m)
			}
		}
	}
}

func TestDecodeEncode(t *testing.T) {
	body := `{"providerIds":["demobank-sandbox"],"paymentInformation":{"remittanceInformation":"","currency":"EUR","amount":"10.5","creditorAccount":{"iban":"DE89370400440532013000"},"debtorAccount":null,"merchantId":null},"redirectUrl":""}`
	b, e := Decode(Creation, []byte(body))
	if e != nil {
		t.Fatal(e)
	}
	want := `{"paymentInformation":{"amount":10.50,"currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}},"providerIds":["demobank-sandbox"]}`
	if got := string(b.Encode()); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	again, e := Decode(Creation, b.Encode())
	if e != nil || string(again.Encode()) != want {
		t.Fatalf("the encoding does not read back as itself: %v %s", e, again.Encode())
	}
	if !b.Creates() {
		t.Error("a creation creates")
	}
}

func TestDecodeRefusals(t *testing.T) {
	info := `{"amount":10,"currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}}`
	for _, c := range []struct {
		kind  Kind
		body  string
		field string
	}{
		{Creation, `[]`, ""},
		{Creation, "\xff{}", ""},
		{Creation, `{"paymentInformation":` + info + `,"purposeCode":"OTHR"}`, "purposeCode"},
		{Creation, `{"paymentInformation":{"amount":10,"currency":"EUR","endToEndId":"x"}}`, "paymentInformation.endToEndId"},
		{Creation, `{"paymentInformation":` + info + `,"paymentId":"p1"}`, "paymentId"},
		{Creation, `{"providerIds":["x"]}`, "paymentInformation"},
		{Creation, `{"paymentInformation":{"amount":"NaN","currency":"EUR"}}`, "paymentInformation.amount"},
		{Creation, `{"paymentInformation":{"amount":1e999,"currency":"EUR"}}`, "paymentInformation.amount"},
		{Creation, `{"paymentInformation":{"amount":-5,"currency":"EUR"}}`, "paymentInformation.amount"},
		{Creation, `{"paymentInformation":{"amount":0,"currency":"EUR"}}`, "paymentInformation.amount"},
		{Creation, `{"paymentInformation":{"amount":true,"currency":"EUR"}}`, "paymentInformation.amount"},
		{Creation, `{"paymentInformation":{"amount":"10.001","currency":"EUR"}}`, "paymentInformation.amount"},
		{Creation, `{"paymentInformation":{"amount":10}}`, "paymentInformation.currency"},
		{Creation, `{"paymentInformation":{"amount":10,"currency":"eur"}}`, "paymentInformation.currency"},
		{Creation, `{"paymentInformation":{"amount":10,"currency":"EUR","creditorAccount":{}}}`, "paymentInformation.creditorAccount.iban"},
		{Creation, `{"paymentInformation":{"amount":10,"currency":"EUR","creditorAccount":{"iban":"X","bic":"Y"}}}`, "paymentInformation.creditorAccount.bic"},
		{Creation, `{"paymentInformation":{"amount":10,"currency":"EUR","creditorName":5}}`, "paymentInformation.creditorName"},
		{Creation, `{"paymentInformation":` + info + `,"providerIds":"x"}`, "providerIds"},
		{Creation, `{"paymentInformation":` + info + `,"includeFakeProviders":"yes"}`, "includeFakeProviders"},
		{Init, `{"providerId":"p","paymentId":"01J","paymentInformation":` + info + `}`, "paymentId"},
		{Init, `{"providerId":"p"}`, "paymentInformation"},
		{Creation, `{"paymentInformation":{"amount":10,"currency":"EUR","merchantId":"m1","creditorAccount":{"iban":"DE89370400440532013000"}}}`, "paymentInformation.merchantId"},
		{Creation, `{"paymentInformation":{"amount":10,"currency":"EUR","creditorName":"Jane \u202eeoD","creditorAccount":{"iban":"DE89"}}}`, "paymentInformation.creditorName"},
		{Creation, `{"paymentInformation":{"amount":10,"currency":"EUR","remittanceInformation":"rent\u200b","creditorAccount":{"iban":"DE89"}}}`, "paymentInformation.remittanceInformation"},
		{Creation, `{"paymentInformation":{"amount":10,"currency":"EUR","creditorAccount":{"iban":"DE89\u0000"}}}`, "paymentInformation.creditorAccount.iban"},
	} {
		_, e := Decode(c.kind, []byte(c.body))
		if e == nil || e.Field != c.field {
			t.Errorf("%s: got %v, want a refusal naming %q", c.body, e, c.field)
		}
	}
}

func TestEqualAndSimilar(t *testing.T) {
	b, e := Decode(Creation, []byte(`{"paymentInformation":{"amount":"10.01","currency":"EUR","creditorAccount":{"iban":"DE89"},"remittanceInformation":"rent"}}`))
	if e != nil {
		t.Fatal(e)
	}
	i := b.Info
	for _, c := range []struct {
		listed         string
		equal, similar bool
	}{
		{`{"amount":10.01,"currency":"EUR","creditorAccount":{"iban":"DE89"},"remittanceInformation":"rent"}`, true, true},
		{`{"amount":"10.010","currency":"EUR","creditorAccount":{"iban":"DE89"},"remittanceInformation":"rent","purposeCode":"OTHR"}`, true, true},
		{`{"amount":10.01,"currency":"EUR","creditorAccount":{"iban":"DE89"}}`, false, true},
		{`{"amount":10.01,"currency":"EUR","creditorAccount":{"iban":"DE89"},"remittanceInformation":"rent","debtorAccount":null}`, true, true},
		{`{"amount":10.009999999999998,"currency":"EUR","creditorAccount":{"iban":"DE89"},"remittanceInformation":"rent"}`, false, true},
		{`{"amount":10.02,"currency":"EUR","creditorAccount":{"iban":"DE89"},"remittanceInformation":"rent"}`, false, false},
		{`{"amount":10.01,"currency":"GBP"}`, false, false},
		{`{"amount":10.01,"currency":"eur","creditorAccount":{"iban":"DE89"},"remittanceInformation":"rent"}`, false, true},
		{`{"currency":"EUR"}`, false, true},
	} {
		s := ReadSeen([]byte(c.listed))
		if got := i.Equal(s); got != c.equal {
			t.Errorf("%s: equal %v, want %v", c.listed, got, c.equal)
		}
		if got := i.Similar(s); got != c.similar {
			t.Errorf("%s: similar %v, want %v", c.listed, got, c.similar)
		}
	}
	if !i.Similar(nil) || i.Equal(nil) {
		t.Error("a payment listed without content is similar and never equal")
	}
}
