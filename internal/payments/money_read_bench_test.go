package payments

import "testing"

// benchReadBody is BenchmarkPayment's body (money_test.go's payment): a
// typical creation, its amount a string, with a remittance and an IBAN.
const benchReadBody = `{"paymentInformation":{"amount":"12.50","currency":"ILS","remittanceInformation":"Order 7","creditorAccount":{"iban":"IL62 0108 0000 0009 9999 999"}},"providerIds":["demobank-sandbox"]}`

var benchSink []byte

// BenchmarkMoneyRead measures the canonical read of a money body alone,
// without the network or the ledger, to set against BenchmarkPayment's
// whole payment (money_bench_test.go, integration):
//
//   - readBody+Encode: the body decoded once into the model and re-encoded
//     as the upstream receives it;
//   - pay: all that pay and sendAsOwner do with the model on a payment
//     answered 201 (the above, the content the ledger records, and that
//     content read back for the snapshot).
func BenchmarkMoneyRead(b *testing.B) {
	body := []byte(benchReadBody)
	b.Run("readBody+Encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			read, p := readBody(creationPath, body)
			if p != nil {
				b.Fatal(p)
			}
			benchSink = read.Encode()
		}
	})
	b.Run("pay", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			read, p := readBody(creationPath, body)
			if p != nil {
				b.Fatal(p)
			}
			benchSink = read.Encode()
			content := contentOf(read).Encode()
			if _, ok := ParseContent(content); !ok {
				b.Fatal("the recorded content does not read back")
			}
		}
	})
}
