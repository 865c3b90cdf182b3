package upstreamsim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

const day = 24 * time.Hour

// currency is the currency of all seeded data: the real service's data is
// mostly Israeli.
const currency = "ILS"

// accountSpec is one seeded account and how many transactions it gets.
type accountSpec struct {
	typ, product string
	txs          int
}

// connSpec is one seeded connection, its dates relative to the anchor day.
type connSpec struct {
	provider   string
	status     string
	startedAgo int           // days before the anchor
	expiresIn  int           // days after the anchor; negative: in the past
	fetchedAgo time.Duration // before the anchor; 0: never fetched
	err        *connError
	accounts   []accountSpec
}

var (
	errConsentExpired  = &connError{Code: "CONSENT_EXPIRED", Message: "The consent given to the bank has expired"}
	errProviderTimeout = &connError{Code: "PROVIDER_TIMEOUT", Message: "The bank did not answer in time"}
)

// defaultConnections: 1200 transactions in all, so paging at the maximum
// page size (500) still spans three pages.
var defaultConnections = []connSpec{
	{provider: "hapoalim", status: "ACTIVE", startedAgo: 30, expiresIn: 60, fetchedAgo: 2 * time.Hour, accounts: []accountSpec{
		{"CHECKING", "חשבון עו\"ש", 560}, {"CARD", "ישראכרט זהב", 400}, {"LOAN", "הלוואה לכל מטרה", 60}}},
	{provider: "leumi", status: "EXPIRED", startedAgo: 200, expiresIn: -10, fetchedAgo: 11 * day, err: errConsentExpired, accounts: []accountSpec{
		{"SAVINGS", "פיקדון חיסכון", 100}, {"SECURITIES", "תיק ניירות ערך", 80}}},
}

// personaConnections is each persona's connections; the new persona has none.
var personaConnections = map[string][]connSpec{
	PersonaDefault: defaultConnections,
	PersonaFree:    defaultConnections,
	PersonaBusy: { // 10,000 transactions
		{provider: "hapoalim", status: "ACTIVE", startedAgo: 400, expiresIn: 300, fetchedAgo: time.Hour, accounts: []accountSpec{
			{"CHECKING", "חשבון עו\"ש", 3000}, {"CARD", "ויזה פלטינום", 2000}, {"LOAN", "משכנתא", 200}}},
		{provider: "leumi", status: "ACTIVE", startedAgo: 300, expiresIn: 60, fetchedAgo: 3 * time.Hour, accounts: []accountSpec{
			{"CHECKING", "חשבון עו\"ש", 1500}, {"SAVINGS", "פיקדון חיסכון", 300}, {"SECURITIES", "תיק ניירות ערך", 500}}},
		{provider: "discount", status: "ACTIVE", startedAgo: 120, expiresIn: 240, fetchedAgo: 5 * time.Hour, accounts: []accountSpec{
			{"CHECKING", "Business Account", 1000}}},
		{provider: "isracard", status: "ACTIVE", startedAgo: 90, expiresIn: 270, fetchedAgo: 2 * time.Hour, accounts: []accountSpec{
			{"CARD", "אמריקן אקספרס", 1000}, {"CARD", "ישראכרט", 500}}},
	},
	PersonaTroubled: {
		{provider: "leumi", status: "EXPIRED", startedAgo: 200, expiresIn: -10, fetchedAgo: 11 * day, err: errConsentExpired, accounts: []accountSpec{
			{"CHECKING", "חשבון עו\"ש", 150}}},
		{provider: "discount", status: "FETCHING_ERROR", startedAgo: 60, expiresIn: 30, fetchedAgo: 3 * day, err: errProviderTimeout, accounts: []accountSpec{
			{"CHECKING", "חשבון עו\"ש", 100}, {"CARD", "Diners", 50}}},
		{provider: "mizrahi-tefahot", status: "PENDING", startedAgo: 1, expiresIn: 90},
	},
}

// seedUser builds a user's fixed data for its persona. Everything derives
// from the seed, the user id and the UTC day of now, so the same user gets
// the same data on the same simulator day, and with a frozen clock on
// every day.
func seedUser(id, persona, seed string, now time.Time) *userData {
	rng := seededRand(seed, id, "base")
	u := &userData{id: id, persona: persona, seed: seed, anchor: now.UTC().Truncate(day)}
	if seed != "" {
		u.ids = seededRand(seed, id, "ids")
	}
	if persona == PersonaNew {
		return u
	}
	u.seedMerchants(rng)
	for _, spec := range personaConnections[persona] {
		u.seedConnection(spec, rng)
	}
	u.seedPayments(rng)
	return u
}

func (u *userData) seedMerchants(rng *rand.Rand) {
	for i, name := range []string{"קפה לנדוור", "Steimatzky Books"} {
		at := u.anchor.Add(-time.Duration(100-50*i) * day)
		u.merchants = append(u.merchants, &merchant{
			ID: seededULID(at, rng), Name: name, IBAN: fakeIBAN(rng), Website: "https://merchant.example.co.il",
			CreatedAt: at, UpdatedAt: at,
		})
	}
}

func (u *userData) seedConnection(spec connSpec, rng *rand.Rand) {
	c := &connection{
		UserID: u.id, ProviderIDs: []string{spec.provider}, Mode: connectionMode([]string{spec.provider}), Status: spec.status,
		StartDate: u.anchor.Add(-time.Duration(spec.startedAgo) * day), ExpiryDate: u.anchor.Add(time.Duration(spec.expiresIn) * day),
		Error: spec.err,
	}
	c.ID = seededULID(c.StartDate, rng)
	c.CreatedAt, c.UpdatedAt = c.StartDate, c.StartDate
	if spec.fetchedAgo > 0 {
		fetched := u.anchor.Add(-spec.fetchedAgo)
		c.LastFetchedAt, c.LastFetchedDataDate = &fetched, &fetched
		c.UpdatedAt = fetched
	}
	u.connections = insert(u.connections, c, connectionKey)
	for _, as := range spec.accounts {
		u.accounts = insert(u.accounts, seedAccount(c, as, rng), accountKey)
	}
}

// seedAccount is one account of c. Cards and loans are debts: their
// balances are negative.
func seedAccount(c *connection, as accountSpec, rng *rand.Rand) *account {
	var cents int
	number := fakeIBAN(rng)
	switch as.typ {
	case "CARD":
		cents = -(10000 + rng.IntN(800000))
		number = fmt.Sprintf("4580-****-****-%04d", rng.IntN(10000))
	case "LOAN":
		cents = -(2000000 + rng.IntN(50000000))
	case "CHECKING":
		cents = rng.IntN(4000000) - 500000
	default:
		cents = rng.IntN(20000000)
	}
	return &account{
		ID: seededULID(c.StartDate, rng), ConnectionID: c.ID, ProviderID: c.ProviderIDs[0],
		AccountType: as.typ, Product: as.product, AccountNumber: number, Currency: currency,
		Balances: []balance{{BalanceType: "closingBooked", BalanceAmount: money{
			Amount: strconv.FormatFloat(float64(cents)/100, 'f', 2, 64), Currency: currency}}},
		txCount: as.txs,
	}
}

// connectionMode is REAL for live banks, SANDBOX when a -sandbox provider
// is among them.
func connectionMode(providerIDs []string) string {
	if slices.ContainsFunc(providerIDs, isSandboxProvider) {
		return "SANDBOX"
	}
	return "REAL"
}

// seedPayments adds one payment of each status a client should handle.
func (u *userData) seedPayments(rng *rand.Rand) {
	for i, st := range []string{statusACSC, statusACSC, statusPending, statusRJCT, statusCANC, statusERROR, statusInit} {
		at := u.anchor.Add(-time.Duration(14-2*i) * day).Add(time.Duration(rng.IntN(3600)) * time.Second)
		p := &payment{
			ID: seededULID(at, rng), Status: st, ProviderIDs: []string{ProviderSandbox},
			PaymentInformation: paymentInfo{
				Amount: float64(100+rng.IntN(20000)) / 100, Currency: currency,
				RemittanceInformation: fmt.Sprintf("הזמנה %d", 1000+i),
			},
			CreatedAt: at, UpdatedAt: at,
		}
		if i%2 == 0 {
			p.PaymentInformation.MerchantID = u.merchants[i/2%2].ID
		} else {
			p.PaymentInformation.CreditorName = "Noa Cohen"
			p.PaymentInformation.CreditorAccount = &accountRef{IBAN: fakeIBAN(rng)}
		}
		if st != statusInit {
			p.ProviderID = ProviderSandbox
		}
		u.payments = append(u.payments, p)
	}
}

// seedTransactions fills u.txs on first use, txCount for each account that
// existed at seeding time. The caller holds u.mu.
func (u *userData) seedTransactions() {
	if u.txSeeded {
		return
	}
	u.txSeeded = true
	rng := seededRand(u.seed, u.id, "transactions")
	u.txBySK = map[string]*transaction{}
	for _, acc := range u.accounts {
		for range acc.txCount {
			t := seedTransaction(acc, u.anchor, rng)
			u.txs = append(u.txs, t)
			u.txBySK[t.SK] = t
		}
	}
	slices.SortFunc(u.txs, func(a, b *transaction) int { return strings.Compare(a.ID, b.ID) })
}

// seedTransaction is one transaction of acc in the year before anchor.
func seedTransaction(acc *account, anchor time.Time, rng *rand.Rand) *transaction {
	at := anchor.Add(-time.Duration(1+rng.IntN(365)) * day).Add(time.Duration(rng.IntN(86400)) * time.Second)
	tt := pickTemplate(acc.AccountType, rng)
	txType := "BANK"
	if acc.AccountType == "CARD" {
		txType = "CARD"
	}
	cents := tt.min + rng.IntN(tt.max-tt.min+1)
	original := txMoney{Amount: float64(cents) / 100, Currency: currency}
	charged := txCharged{Amount: original.Amount, Currency: currency}
	switch {
	case tt.foreign && txType == "CARD":
		// Bought abroad: the original is in dollars, the card charged shekels.
		original.Currency = "USD"
		charged.Amount = math.Round(float64(cents)*3.7) / 100
	case txType == "CARD" && rng.IntN(3) == 0:
		charged.Amount = ""
	}
	id := seededULID(at, rng)
	d := at.Format(time.DateOnly)
	return &transaction{
		ID: id, SK: "TRANSACTION#" + txType + "#" + acc.ID + "#" + d + "#" + id,
		AccountID: acc.ID, ConnectionID: acc.ConnectionID, Type: txType,
		Amount:       txAmount{OriginalAmount: original, ChargedAmount: charged},
		Date:         txDate{TransactionDate: d, BookingDate: at.Add(day).Format(time.DateOnly)},
		Description:  txDescription{Description: tt.description},
		MerchantName: tt.merchant,
		Category:     txCategory{Main: tt.main, Sub: tt.sub},
	}
}

// txTemplate is a kind of transaction: who, what, and the range of its
// amount in agorot (negative: money out).
type txTemplate struct {
	merchant, description, main, sub string
	min, max                         int
	foreign                          bool // a card purchase abroad, in USD
}

// spending happens on checking and card accounts; Hebrew and Latin merchant
// names side by side, as in the real data.
var spending = []txTemplate{
	{"שופרסל", "שופרסל דיל רמת אביב", "GROCERIES", "GROCERIES_SUPERMARKET", -60000, -2000, false},
	{"רמי לוי", "רמי לוי שיווק השקמה", "GROCERIES", "GROCERIES_SUPERMARKET", -80000, -3000, false},
	{"Paz", "PAZ YELLOW TEL AVIV", "TRANSPORT", "TRANSPORT_FUEL", -40000, -5000, false},
	{"רב-קו", "טעינת רב-קו", "TRANSPORT", "TRANSPORT_PUBLIC", -20000, -550, false},
	{"Gett", "GETT TAXI", "TRANSPORT", "TRANSPORT_TAXI", -15000, -2500, false},
	{"Wolt", "WOLT TEL AVIV", "LEISURE", "LEISURE_RESTAURANTS", -30000, -4000, false},
	{"ארומה", "ארומה אספרסו בר", "LEISURE", "LEISURE_RESTAURANTS", -9000, -1500, false},
	{"Netflix", "NETFLIX.COM", "LEISURE", "LEISURE_STREAMING", -6990, -3990, true},
	{"אל על", "אל על נתיבי אויר", "LEISURE", "LEISURE_TRAVEL", -900000, -90000, false},
	{"Amazon", "AMAZON MKTPLACE PMTS", "SHOPPING", "SHOPPING_ONLINE", -50000, -1500, true},
	{"AliExpress", "ALIEXPRESS.COM", "SHOPPING", "SHOPPING_OTHER", -20000, -500, true},
	{"קסטרו", "קסטרו דיזנגוף סנטר", "SHOPPING", "SHOPPING_CLOTHING", -60000, -5000, false},
	{"KSP", "KSP מחשבים", "SHOPPING", "SHOPPING_ELECTRONICS", -500000, -3000, false},
	{"סופר-פארם", "סופר-פארם אבן גבירול", "HEALTH", "HEALTH_PHARMACY", -30000, -1500, false},
	{"מכבי שירותי בריאות", "מכבי שירותי בריאות", "HEALTH", "HEALTH_DOCTOR", -20000, -2500, false},
}

// bankOnly happens on checking accounts only.
var bankOnly = []txTemplate{
	{"ACME Tech Ltd", "משכורת", "INCOME", "INCOME_SALARY", 1200000, 2500000, false},
	{"יוסי לוי", "העברה - שכר דירה", "HOUSING", "HOUSING_RENT", -750000, -450000, false},
	{"חברת החשמל", "חברת החשמל לישראל", "HOUSING", "HOUSING_UTILITIES", -90000, -20000, false},
	{"עיריית תל אביב-יפו", "ארנונה", "HOUSING", "HOUSING_MUNICIPAL_TAX", -120000, -60000, false},
	{"ישראכרט", "חיוב כרטיס אשראי", "TRANSFERS", "TRANSFERS_INTERNAL", -900000, -100000, false},
	{"בנק", "עמלת ניהול חשבון", "FINANCE", "FINANCE_FEES", -2500, -900, false},
}

// byAccountType is what lands on loan, savings and securities accounts.
var byAccountType = map[string][]txTemplate{
	"LOAN": {
		{"בנק", "החזר הלוואה", "FINANCE", "FINANCE_LOAN_REPAYMENT", 150000, 250000, false},
	},
	"SAVINGS": {
		{"בנק", "הפקדה לפיקדון", "FINANCE", "FINANCE_SAVINGS", 50000, 300000, false},
		{"בנק", "זיכוי ריבית", "INCOME", "INCOME_OTHER", 100, 5000, false},
	},
	"SECURITIES": {
		{"TEVA PHARMA", "קניית ני\"ע - TEVA", "FINANCE", "FINANCE_INVESTMENTS", -2000000, -50000, false},
		{"Tel Aviv 35 ETF", "קניית ני\"ע - ת\"א 35", "FINANCE", "FINANCE_INVESTMENTS", -1000000, -50000, false},
		{"TEVA PHARMA", "דיבידנד", "INCOME", "INCOME_OTHER", 1000, 50000, false},
	},
}

// pickTemplate chooses a transaction kind for an account type. On a
// checking account one in four is a bank-only kind (salary, rent, bills).
func pickTemplate(accountType string, rng *rand.Rand) txTemplate {
	if list, ok := byAccountType[accountType]; ok {
		return list[rng.IntN(len(list))]
	}
	if accountType == "CHECKING" && rng.IntN(4) == 0 {
		return bankOnly[rng.IntN(len(bankOnly))]
	}
	return spending[rng.IntN(len(spending))]
}

// fakeIBAN is an Israeli IBAN-shaped account number (IL, check digits, 19
// digits) with a valid check digit pair.
func fakeIBAN(rng *rand.Rand) string {
	bban := fmt.Sprintf("%019d", rng.Uint64()%1e19)
	return "IL" + ibanCheck("IL", bban) + bban
}

func ibanCheck(country, bban string) string {
	s := bban + strconv.Itoa(int(country[0]-'A'+10)) + strconv.Itoa(int(country[1]-'A'+10)) + "00"
	rem := 0
	for _, c := range s {
		rem = (rem*10 + int(c-'0')) % 97
	}
	return fmt.Sprintf("%02d", 98-rem)
}
