// Package money is the BFF's own model of a money-moving request's body:
// a payment creation (POST /v2/payments) or an open-banking init
// (POST /v2/pay/open-banking-init), read once from the client's bytes into
// typed values (Decode), compared, held, approved and recorded as those
// values, and sent to the upstream re-encoded from them (Body.Encode),
// never as the client's bytes. Two readers of one body are two truths: a
// string amount that the BFF rounded one way and the upstream another paid
// twice, and a member that the upstream dropped made a false "paid".
//
// Amounts are exact: an Amount is an integer of its currency's minor units
// (ISO 4217), parsed from decimal text without a floating-point step and
// written back in one canonical form; there is no float64 in this package
// (but in mutant_float.go, the mutant that shows the checkers catch one).
// An amount is refused, with the field named, unless it is a plain decimal
// greater than zero with at most the currency's minor-unit digits and at
// most MaxDigits significant digits (so that every reader, an IEEE double
// included, reads the same value).
//
// The ISO 4217 minor units are a table of this package's own
// (iso4217.go), not a library's: the Go libraries that know currencies
// (golang.org/x/text/currency, github.com/bojanz/currency) take their
// digits from CLDR, whose digits are for display and differ from ISO 4217
// for about fifteen currencies (COP, HUF, IDR and PKR have 2 minor units
// in ISO 4217 and 0 in recent CLDR; IQD has 3 and 0): a payment converted
// with them would be sent at a hundredth of its amount. The test
// TestMinorDigitsAreISO4217NotCLDR keeps that evidence.
package money

import (
	"errors"
	"strconv"
	"strings"
)

// MaxDigits bounds an amount's significant digits, minor units included:
// every decimal of at most 15 digits survives a round trip through an IEEE
// 754 double, so an upstream that reads amounts as doubles reads exactly
// the amount the BFF compared and holds.
const MaxDigits = 15

// maxMinor is 10^MaxDigits: an amount's minor units are below it.
const maxMinor = 1_000_000_000_000_000

// Amount is an exact amount: Minor units of Currency (cents for EUR, yen
// for JPY, fils for BHD).
type Amount struct {
	Minor    int64
	Currency string
}

// ErrAmount is wrapped by every refusal of an amount's text.
var ErrAmount = errors.New("invalid amount")

type amountError string

func (e amountError) Error() string { return string(e) }
func (e amountError) Unwrap() error { return ErrAmount }

// ParseAmount reads text, a decimal amount in currency (a known ISO 4217
// code), exactly: digits, then optionally a point and at most the
// currency's minor-unit digits; no sign, exponent, space or leading zero;
// greater than zero; at most MaxDigits significant digits.
func ParseAmount(text, currency string) (Amount, error) {
	if strings.HasPrefix(text, "-") {
		return Amount{}, amountError("must be greater than 0")
	}
	minor, err := ParseMinor(text, currency)
	if err != nil {
		return Amount{}, err
	}
	if minor == 0 {
		return Amount{}, amountError("must be greater than 0")
	}
	return Amount{Minor: minor, Currency: currency}, nil
}

// ParseMinor is ParseAmount's grammar with zero allowed (a threshold may be
// 0): the minor units text stands for.
func ParseMinor(text, currency string) (int64, error) {
	digits, ok := MinorDigits(currency)
	if !ok {
		return 0, amountError("the currency is not an ISO 4217 code this BFF knows")
	}
	if n, ok := floatMinor(text, digits); ok {
		return n, nil
	}
	whole, frac, hasPoint := strings.Cut(text, ".")
	switch {
	case text == "":
		return 0, amountError("is empty")
	case strings.HasPrefix(text, "-"):
		return 0, amountError("must not be negative")
	case !allDigits(whole) || (hasPoint && !allDigits(frac)):
		return 0, amountError("must be a plain decimal such as 10.50 (digits and one point; no sign, exponent or space)")
	case len(whole) > 1 && whole[0] == '0':
		return 0, amountError("must not start with a zero")
	case len(frac) > digits:
		return 0, amountError("has more decimals than " + currency + " has (" + strconv.Itoa(digits) + ")")
	}
	frac += strings.Repeat("0", digits-len(frac))
	all := strings.TrimLeft(whole+frac, "0")
	if len(all) > MaxDigits {
		return 0, amountError("has more than " + strconv.Itoa(MaxDigits) + " significant digits")
	}
	if all == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(all, 10, 64)
	if err != nil || n >= maxMinor {
		return 0, amountError("is too large")
	}
	return n, nil
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// String is the amount's canonical decimal: the currency's minor-unit
// digits, always ("10.50", "1000" for JPY, "1.250" for BHD).
func (a Amount) String() string {
	digits, _ := MinorDigits(a.Currency)
	s := strconv.FormatInt(a.Minor, 10)
	if digits == 0 {
		return s
	}
	if len(s) <= digits {
		s = strings.Repeat("0", digits-len(s)+1) + s
	}
	return s[:len(s)-digits] + "." + s[len(s)-digits:]
}

// Read is an amount as another party wrote it (the upstream's list, a
// grant of the identity provider, a record stored by an earlier version):
// read exactly when it is a whole number of minor units, and otherwise
// kept only as "not exact". It never refuses: the caller decides what an
// inexact amount means.
type Read struct {
	Amount
	// Exact: the text was a whole number of Currency's minor units within
	// MaxDigits.
	Exact bool
	// Text is the number as written, for an inexact amount's comparison
	// with an exact one (Near).
	Text string
}

// ReadAmount reads text (a JSON number's text or a string's content) in
// currency the lenient way: an exponent, trailing zeros past the minor
// unit, and a currency in any case are read; anything that is not a whole
// number of minor units is inexact.
func ReadAmount(text, currency string) Read {
	currency = strings.ToUpper(strings.TrimSpace(currency))
	text = strings.TrimSpace(text)
	r := Read{Amount: Amount{Currency: currency}, Text: text}
	whole, frac, ok := splitDecimal(text)
	if !ok {
		return r
	}
	digits, known := MinorDigits(currency)
	if !known {
		return r
	}
	frac = strings.TrimRight(frac, "0")
	if len(frac) > digits {
		return r
	}
	if whole = strings.TrimLeft(whole, "0"); whole == "" {
		whole = "0"
	}
	minor, err := ParseMinor(whole+pointed(frac), currency)
	if err != nil {
		return r
	}
	r.Minor, r.Exact = minor, true
	return r
}

func pointed(frac string) string {
	if frac == "" {
		return ""
	}
	return "." + frac
}

// splitDecimal reads a JSON number's text (an optional minus is refused:
// no amount is negative) into its whole and fraction digits with the
// exponent applied, within bounds that keep it small.
func splitDecimal(text string) (whole, frac string, ok bool) {
	mant, exp := text, 0
	if i := strings.IndexAny(text, "eE"); i >= 0 {
		e, err := strconv.Atoi(text[i+1:])
		if err != nil || e > 30 || e < -30 {
			return "", "", false
		}
		mant, exp = text[:i], e
	}
	whole, frac, _ = strings.Cut(mant, ".")
	if !allDigits(whole) || (frac != "" && !allDigits(frac)) || strings.HasSuffix(mant, ".") || len(mant) > 64 {
		return "", "", false
	}
	for ; exp > 0; exp-- {
		if frac == "" {
			whole += "0"
		} else {
			whole, frac = whole+frac[:1], frac[1:]
		}
	}
	for ; exp < 0; exp++ {
		if whole == "" {
			frac = "0" + frac
		} else {
			whole, frac = whole[:len(whole)-1], whole[len(whole)-1:]+frac
		}
	}
	if whole == "" {
		whole = "0"
	}
	return whole, frac, true
}

// Near reports whether r could be the amount a, read by a party that
// rounds: exactly a when r was read exactly in a's currency, and otherwise
// within one minor unit of a (in a's minor units, compared on the decimal
// text without a floating-point step). The currencies are the caller's to
// compare.
func (r Read) Near(a Amount) bool {
	if r.Exact && r.Currency == a.Currency {
		return r.Minor == a.Minor
	}
	whole, frac, ok := splitDecimal(r.Text)
	if !ok {
		return true // unreadable: it cannot be ruled out
	}
	digits, _ := MinorDigits(a.Currency)
	for len(frac) < digits {
		frac += "0"
	}
	// r's minor units, truncated: r lies in [floor, floor+1) minor units.
	var floor int64
	if t := strings.TrimLeft(whole+frac[:digits], "0"); t != "" {
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil {
			return false // far beyond any amount this BFF sends
		}
		floor = n
	}
	if strings.Trim(frac[digits:], "0") == "" {
		return floor == a.Minor // r is a whole number of minor units
	}
	return floor == a.Minor || floor+1 == a.Minor
}
