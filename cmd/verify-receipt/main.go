// Command verify-receipt checks a payment receipt of the BFF offline and
// prints what it states:
//
//	verify-receipt -jwks jwks.json receipt.jws
//	verify-receipt -jwks https://app.example.com/bff/receipts/jwks.json receipt.jws
//
// jwks is the BFF's published key set (GET /bff/receipts/jwks.json, saved
// or fetched); the receipt a file ("-" for standard input) holding the
// compact JWS GET /bff/payments/{key}/receipt answered. It exits 0 when the
// receipt verifies, 1 when it does not (saying why), 2 on a usage error.
// A receipt proves what that BFF recorded and signed, not the bank's own
// statement (docs/payments.md, "Receipts").
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/fintech-bff/bff/internal/receipts"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("verify-receipt", flag.ContinueOnError)
	fs.SetOutput(stderr)
	jwksFrom := fs.String("jwks", "", "the BFF's receipt keys: a file, or an https:// (or http://localhost) URL of GET /bff/receipts/jwks.json")
	asJSON := fs.Bool("json", false, "print the receipt's document as JSON instead of its facts")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *jwksFrom == "" || fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: verify-receipt -jwks <file or URL> <receipt file, or - for standard input>")
		return 2
	}
	jwks, err := readJWKS(*jwksFrom)
	if err != nil {
		fmt.Fprintf(stderr, "verify-receipt: the key set: %v\n", err)
		return 2
	}
	raw, err := readReceipt(fs.Arg(0), stdin)
	if err != nil {
		fmt.Fprintf(stderr, "verify-receipt: the receipt: %v\n", err)
		return 2
	}
	d, kid, err := receipts.Verify(strings.TrimSpace(string(raw)), jwks)
	if err != nil {
		fmt.Fprintf(stderr, "verify-receipt: NOT VERIFIED: %v\n", err)
		return 1
	}
	if *asJSON {
		b, _ := json.MarshalIndent(d, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	printFacts(stdout, d, kid)
	return 0
}

// maxInput bounds what is read of a key set or a receipt.
const maxInput = 1 << 20

// errPlainHTTP refuses a key set over plain http from another machine:
// anyone on the way could swap the keys.
var errPlainHTTP = errors.New("fetch the key set over https (plain http only from this machine)")

func readJWKS(from string) ([]byte, error) {
	if strings.HasPrefix(from, "https://") || strings.HasPrefix(from, "http://") {
		u, err := url.Parse(from)
		if err != nil || !fetchable(u) {
			return nil, errPlainHTTP
		}
		c := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			if !fetchable(req.URL) {
				return errPlainHTTP
			}
			return nil
		}}
		resp, err := c.Get(u.String())
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%s answered %s", from, resp.Status)
		}
		return readAll(resp.Body)
	}
	return readFile(from)
}

// fetchable is whether a key set may be fetched from u: over https, or
// over plain http from this machine (localhost, a loopback address), the
// host as a URL parser reads it, not a prefix of the text
// ("http://localhost.example.com" is another machine).
func fetchable(u *url.URL) bool {
	switch u.Scheme {
	case "https":
		return u.Host != ""
	case "http":
		host := u.Hostname()
		ip := net.ParseIP(host)
		return host == "localhost" || (ip != nil && ip.IsLoopback())
	}
	return false
}

func readReceipt(from string, stdin io.Reader) ([]byte, error) {
	if from == "-" {
		return readAll(stdin)
	}
	return readFile(from)
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(f)
}

// readAll reads r to its end, refusing more than maxInput bytes rather
// than cutting them off.
func readAll(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxInput+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxInput {
		return nil, fmt.Errorf("larger than %d bytes", maxInput)
	}
	return b, nil
}

// printFacts prints what the receipt states, one fact a line.
func printFacts(w io.Writer, d receipts.Document, kid string) {
	line := func(name, value string) {
		if value != "" {
			fmt.Fprintf(w, "%-18s %s\n", name+":", printable(value))
		}
	}
	line("verified", "signed by "+d.Issuer+" with key "+kid)
	line("issued", d.IssuedAt)
	line("user", d.UserID)
	line("idempotency key", d.Key)
	line("route", d.Route)
	outcome := fmt.Sprintf("%s, answered %d", d.State, d.Status)
	if d.State == "done" && d.Status >= 400 {
		// The upstream's refusal, kept as answered: the amount and payee
		// below are what was asked, not what was paid.
		outcome += ": an error, not a success"
	}
	line("outcome", outcome)
	line("declined", d.Declined)
	line("payment id", d.PaymentID)
	if a := d.Amount; a != nil {
		line("amount", a.Text+" "+a.Currency+fmt.Sprintf(" (%d minor units)", a.Minor))
	}
	if p := d.Payee; p != nil {
		line("payee", p.Name)
		line("payee account", p.Account)
		line("merchant", p.MerchantID)
	}
	line("requested", d.RequestedAt)
	line("answered", d.AnsweredAt)
	if d.PaymentStatus != "" {
		line("bank status", d.PaymentStatus+" (seen "+d.PaymentStatusAt+")")
	}
	line("body sha-256", d.BodySHA256)
	if a := d.Approval; a != nil {
		line("approved", "at "+a.AuthTime+", "+a.ACR)
		line("details sha-256", a.DetailsSHA256)
	}
}

// printable is v as it is when every character of it prints as itself,
// else quoted with Go's escapes: a value (a payee's name is the user's
// own text) must not break into lines that read as other facts, nor
// move the terminal's cursor or the text's direction.
func printable(v string) string {
	if strings.IndexFunc(v, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return strconv.Quote(v)
	}
	return v
}
