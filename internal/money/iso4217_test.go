package money

import (
	"testing"

	"golang.org/x/text/currency"
)

// The evidence for keeping an ISO 4217 table of this package's own: the Go
// library that knows currencies (golang.org/x/text/currency, CLDR's data)
// gives display digits that would send a payment in these currencies at a
// hundredth or a thousandth of its amount, and does not know several
// codes in use today.
func TestMinorDigitsAreISO4217NotCLDR(t *testing.T) {
	iso := map[string]int{"IQD": 3, "IDR": 2, "COP": 2, "PKR": 2, "AMD": 2, "RSD": 2}
	for code, want := range iso {
		if got, ok := MinorDigits(code); !ok || got != want {
			t.Errorf("%s: got %d, want ISO 4217's %d", code, got, want)
		}
		u, err := currency.ParseISO(code)
		if err != nil {
			t.Fatalf("x/text does not know %s: %v", code, err)
		}
		if scale, _ := currency.Standard.Rounding(u); scale == want {
			t.Errorf("%s: x/text now gives ISO 4217's %d digits: the table may be replaced by it (check every code)", code, want)
		}
	}
	for _, code := range []string{"VES", "MRU", "SLE", "XCG", "ZWG"} {
		if _, ok := MinorDigits(code); !ok {
			t.Errorf("%s is an ISO 4217 code in use: want it known", code)
		}
		if _, err := currency.ParseISO(code); err == nil {
			t.Logf("x/text knows %s now", code)
		}
	}
	for code, d := range minorDigits {
		if len(code) != 3 || d < 0 || d > 4 {
			t.Errorf("%s: %d digits is no ISO 4217 entry", code, d)
		}
	}
}
