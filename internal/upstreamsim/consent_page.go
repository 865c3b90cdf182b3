package upstreamsim

import (
	"bytes"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// consentTemplate is every consent page: the form while the end-user has
// not decided, the outcome afterwards, and the error pages. html/template
// escapes every value shown. No script, no external asset: the CSP set by
// renderPage allows inline style and nothing else.
var consentTemplate = template.Must(template.New("consent").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}{{with .Bank}} · {{.}}{{end}}</title>
<style>
body{font-family:system-ui,sans-serif;background:#f3f4f6;color:#1f2328;margin:0}
main{max-width:30rem;margin:3rem auto;background:#fff;border-radius:8px;padding:1.5rem 2rem;box-shadow:0 1px 4px #0003}
.bank{font-size:.8rem;color:#57606a;text-transform:uppercase;letter-spacing:.06em;margin:0}
h1{font-size:1.4rem;margin:.3rem 0 1rem}
dl{display:grid;grid-template-columns:auto 1fr;gap:.4rem 1rem;margin:0}
dt{color:#57606a}dd{margin:0;font-weight:600;overflow-wrap:anywhere}
.actions{display:flex;gap:.5rem;margin-top:1.5rem}
button{flex:1;padding:.6rem;font-size:1rem;border-radius:6px;border:1px solid #8c959f;background:#fff;cursor:pointer}
#approve{background:#1a7f37;border-color:#1a7f37;color:#fff}
#outcome{font-size:1.1rem;font-weight:600}
.note{font-size:.8rem;color:#6e7781;margin-top:2rem}
</style>
</head>
<body>
<main>
{{with .Bank}}<p class="bank">{{.}}</p>{{end}}
<h1>{{.Title}}</h1>
{{with .Facts}}<dl>{{range .}}<dt>{{.Label}}</dt><dd>{{.Value}}</dd>{{end}}</dl>{{end}}
{{if .Open}}
<form method="post">
<input type="hidden" name="token" value="{{.Token}}">
<div class="actions">
<button id="approve" name="decision" value="approve">Approve</button>
<button id="reject" name="decision" value="reject">Reject</button>
<button id="cancel" name="decision" value="cancel">Cancel</button>
</div>
</form>
{{else}}
<p id="outcome">{{.Outcome}}</p>
{{with .Status}}<p>Status: <code id="status">{{.}}</code></p>{{end}}
{{with .ReturnURL}}<p><a id="return" href="{{.}}">Return to the app</a></p>{{else}}<p id="close">You can close this window.</p>{{end}}
{{end}}
<p class="note">Simulated bank: nothing here moves money or reads a real account.</p>
</main>
</body>
</html>
`))

// fact is one line of what the end-user approves.
type fact struct{ Label, Value string }

// page is what consentTemplate shows.
type page struct {
	Title, Bank string
	Facts       []fact
	Open        bool   // the form: Approve, Reject, Cancel
	Token       string // posted back with the form
	Outcome     string // a sentence, once decided
	Status      string // the status once decided
	ReturnURL   string // back to the app with the outcome; "" shows "you can close this window"
}

// renderPage writes pg with the consent pages' security headers. origin,
// if not "", is the redirect url's origin: the form's 303 goes there, and
// browsers check that against form-action.
func renderPage(w http.ResponseWriter, status int, pg page, origin string) {
	var buf bytes.Buffer
	if err := consentTemplate.Execute(&buf, pg); err != nil {
		http.Error(w, "could not render the page", http.StatusInternalServerError)
		return
	}
	formAction := "'self'"
	if origin != "" {
		formAction += " " + origin
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action "+formAction+"; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer") // the page's URL carries its token
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

// renderNotFound is the answer for an unknown id or a wrong token alike, so
// the page does not tell which ids exist.
func renderNotFound(w http.ResponseWriter) {
	renderError(w, http.StatusNotFound, "This link is not valid. Start again from the app.")
}

func renderError(w http.ResponseWriter, status int, msg string) {
	renderPage(w, status, page{Title: "Something went wrong", Outcome: msg}, "")
}

// paymentPage shows p to its owner u. The caller holds u.mu.
func paymentPage(u *userData, p *payment, token string) page {
	info := p.PaymentInformation
	pg := page{Title: "Confirm a payment", Bank: providerName(paymentBank(p)), Token: token, Open: paymentOpen(p)}
	pg.Facts = append(pg.Facts,
		fact{"Amount", strconv.FormatFloat(info.Amount, 'f', 2, 64) + " " + info.Currency},
		fact{"To", creditorName(u, info)})
	if info.CreditorAccount != nil {
		pg.Facts = append(pg.Facts, fact{"To account", info.CreditorAccount.IBAN})
	}
	if info.DebtorAccount != nil {
		pg.Facts = append(pg.Facts, fact{"From account", info.DebtorAccount.IBAN})
	}
	if info.RemittanceInformation != "" {
		pg.Facts = append(pg.Facts, fact{"Reference", info.RemittanceInformation})
	}
	if !pg.Open {
		pg.Status, pg.Outcome = p.Status, paymentOutcome(p.Status)
		pg.ReturnURL = returnURL(p.RedirectURL, "paymentId", p.ID, p.Status)
	}
	return pg
}

// creditorName is who the payment goes to: the merchant's name, else the
// creditor's name, else "the account below".
func creditorName(u *userData, info paymentInfo) string {
	if info.MerchantID != "" {
		if m, _, ok := find(u.merchants, info.MerchantID, merchantKey); ok {
			return m.Name
		}
	}
	if info.CreditorName != "" {
		return info.CreditorName
	}
	return "The account below"
}

func paymentOutcome(status string) string {
	switch status {
	case statusACSC, "ACCC", "ACSP", "ACWC", "ACFC":
		return "You approved this payment."
	case statusRJCT:
		return "This payment was rejected."
	case statusCANC:
		return "This payment was cancelled."
	case statusERROR:
		return "This payment failed at the bank."
	}
	return "This payment is being processed."
}

// connectionPage shows c to its owner. The caller holds the owner's mu.
func connectionPage(c *connection, token string, now time.Time) page {
	names := make([]string, len(c.ProviderIDs))
	for i, id := range c.ProviderIDs {
		names[i] = providerName(id)
	}
	until := c.ExpiryDate
	pg := page{Title: "Connect your bank account", Bank: strings.Join(names, ", "), Token: token, Open: connectionOpen(c)}
	if pg.Open {
		until = now.Add(consentDuration)
	}
	pg.Facts = []fact{
		{"Shares", "Your accounts, balances and transactions"},
		{"Until", until.UTC().Format(time.DateOnly)},
	}
	if !pg.Open {
		pg.Status, pg.Outcome = c.Status, connectionOutcome(c)
		pg.ReturnURL = returnURL(c.redirectURL, "connectionId", c.ID, c.Status)
	}
	return pg
}

func connectionOutcome(c *connection) string {
	switch {
	case c.Status == connActive:
		return "Your bank account is connected."
	case c.Status == connRevoked:
		return "You refused access to your bank account."
	case c.Error != nil && c.Error.Code == decisions["cancel"].connErr.Code:
		return "You cancelled connecting your bank account."
	}
	return "This bank connection is not active."
}
