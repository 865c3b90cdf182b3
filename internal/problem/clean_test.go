package problem

import (
	"strings"
	"testing"
	"unicode/utf8"
)

const testJWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ1c2VyLTEyMyIsImV4cCI6MTcwMDAwMDAwMH0.c2lnbmF0dXJlLXNpZ25hdHVyZS1zaWc"

func TestClean(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"plain", "Payment ID not valid", "Payment ID not valid"},
		{"https URL", "Redirect url https://shop.example.com/cb?x=1 is not allowed", "Redirect url [url] is not allowed"},
		{"http URL in quotes", `url "http://10.0.0.1:8080/x" rejected`, `url "[url]" rejected`},
		{"other scheme", "cannot reach redis://user:pw@cache:6379/0", "cannot reach [url]"},
		{"scheme-relative", "see //cdn.example.com/a.js", "see [url]"},
		{"host with path", "POST api.open-finance.ai/v2/payments failed", "POST [url] failed"},
		{"host with port", "dial tcp upstream.internal:443: timeout", "dial tcp [url]: timeout"},
		{"bare host with common TLD", "contact docs.open-finance.ai", "contact [url]"},
		{"bare host ending a sentence", "See www.example.org. Thanks", "See [url]. Thanks"},
		{"field path ending a sentence", "Missing debtor.iban.", "Missing debtor.iban."},
		{"IPv4", "from 192.168.1.20 denied", "from [url] denied"},
		{"localhost", "connect localhost:5432 refused", "connect [url] refused"},
		{"field path kept", "paymentInformation.creditorAccount.iban must be set", "paymentInformation.creditorAccount.iban must be set"},
		{"decimal kept", "amount 12.50 exceeds 10.00", "amount 12.50 exceeds 10.00"},
		{"JWT", "token " + testJWT + " expired", "token [redacted] expired"},
		{"JWT with no signature", "t=eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0.", "t=[redacted]"},
		{"Bearer", "header was Bearer abc123.def-456", "header was Bearer [redacted]"},
		{"Bearer doubled", "Bearer Bearer sEcReT", "Bearer [redacted]"},
		{"credential key=value", "bad client_secret=Zm9vYmFy&x", "bad client_secret=[redacted]&x"},
		{"credential JSON", `{"password": "hunter2"}`, `{"password": "[redacted]"}`},
		{"credential prose kept", "token: expired", "token: expired"},
		{"Joi label kept", `"clientSecret" is required`, `"clientSecret" is required`},
		{"hex blob", "hash 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 mismatch", "hash [redacted] mismatch"},
		{"base64 blob", "key sk_live_4eC39HqLyjWDarjtT1zdp7dc9f8e7a6b5 invalid", "key [redacted] invalid"},
		{"UUID kept", "payment 550e8400-e29b-41d4-a716-446655440000 not found", "payment 550e8400-e29b-41d4-a716-446655440000 not found"},
		{"all-digit blob", "card 12345678901234567890123456789012 refused", "card [redacted] refused"},
		{"hex letters without digits kept", strings.Repeat("abcdef", 6), strings.Repeat("abcdef", 6)},
		{"long word kept", "Supercalifragilisticexpialidocious-ish-words", "Supercalifragilisticexpialidocious-ish-words"},
		{"control characters", "line1\nline2\r\n\tend\x00\x07!\u200b", "line1 line2 end!"},
		{"bidi override dropped", "abc\u202edef", "abcdef"},
		{"invalid UTF-8 dropped", "caf\xe9 ok", "caf ok"},
		{"whitespace collapsed", "  a   b \u00a0 c  ", "a b c"},
		{"unicode kept", "Zahlung für Müller abgelehnt — 支払い ✓", "Zahlung für Müller abgelehnt — 支払い ✓"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Clean(tc.in); got != tc.want {
				t.Errorf("Clean(%q): got %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestCleanTruncates(t *testing.T) {
	for _, unit := range []string{"a", "ü", "支", "👍"} {
		in := strings.Repeat(unit, 1000)
		got := Clean(in)
		if n := utf8.RuneCountInString(got); n != maxDetailRunes {
			t.Errorf("%q×1000: got %d runes, want %d", unit, n, maxDetailRunes)
		}
		if !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
			t.Errorf("%q×1000: got %q, want valid UTF-8 ending in an ellipsis", unit, got)
		}
	}
	exact := strings.Repeat("é", maxDetailRunes)
	if got := Clean(exact); got != exact {
		t.Errorf("300 runes: got %d runes, want the input unchanged", utf8.RuneCountInString(got))
	}
}

func TestCleanHugeInputCutsAtWhitespace(t *testing.T) {
	// A secret straddling the 8 KiB cut must not survive in part.
	in := strings.Repeat("x ", maxCleanInput/2-4) + "abcdefgh" + strings.Repeat("s", 64)
	if got := Clean(in); strings.Contains(got, "abcdefgh") {
		t.Errorf("got %q, want the straddling token dropped", got[len(got)-20:])
	}
	if got := Clean(strings.Repeat("y", 3*maxCleanInput)); got != "" {
		t.Errorf("one 24 KiB token: got %d bytes, want none", len(got))
	}
}
