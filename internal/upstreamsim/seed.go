package upstreamsim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"
)

const day = 24 * time.Hour

// Seeded transaction counts per account type; 1200 in all so paging at the
// maximum page size (500) still spans three pages.
var seedTxCounts = map[string]int{"CHECKING": 700, "CARD": 400, "SAVINGS": 100}

// seedUser builds a user's fixed data. Everything derives from the user id
// and the UTC day of now, so the same user gets the same data on the same
// simulator day.
func seedUser(id string, now time.Time) *userData {
	rng := seededRand(id, "base")
	anchor := now.UTC().Truncate(day)
	u := &userData{id: id, anchor: anchor}

	for i, name := range []string{"Acme Coffee Roasters", "Northwind Books"} {
		at := anchor.Add(-time.Duration(100-50*i) * day)
		u.merchants = append(u.merchants, &merchant{
			ID: seededULID(at, rng), Name: name, IBAN: fakeIBAN("ES", rng), Website: "https://merchant.example.com",
			CreatedAt: at, UpdatedAt: at,
		})
	}

	active := &connection{
		UserID: id, ProviderIDs: []string{"n26-de"}, Mode: "production", Status: "ACTIVE",
		StartDate: anchor.Add(-30 * day), ExpiryDate: anchor.Add(60 * day),
	}
	active.ID = seededULID(active.StartDate, rng)
	fetched := anchor.Add(-2 * time.Hour)
	active.LastFetchedAt, active.LastFetchedDataDate = &fetched, &fetched
	active.CreatedAt, active.UpdatedAt = active.StartDate, fetched

	expired := &connection{
		UserID: id, ProviderIDs: []string{"ing-nl"}, Mode: "production", Status: "EXPIRED",
		StartDate: anchor.Add(-200 * day), ExpiryDate: anchor.Add(-10 * day),
		Error: &connError{Code: "CONSENT_EXPIRED", Message: "The consent given to the bank has expired"},
	}
	expired.ID = seededULID(expired.StartDate, rng)
	old := anchor.Add(-11 * day)
	expired.LastFetchedAt, expired.LastFetchedDataDate = &old, &old
	expired.CreatedAt, expired.UpdatedAt = expired.StartDate, expired.ExpiryDate
	u.connections = []*connection{expired, active} // ascending ids: expired started first

	for _, spec := range []struct {
		conn    *connection
		typ     string
		product string
	}{
		{active, "CHECKING", "Everyday Account"},
		{active, "CARD", "Debit Card"},
		{expired, "SAVINGS", "Savings Plus"},
	} {
		acc := &account{
			ID: seededULID(spec.conn.StartDate, rng), ConnectionID: spec.conn.ID, ProviderID: spec.conn.ProviderIDs[0],
			AccountType: spec.typ, Product: spec.product, AccountNumber: fakeIBAN("DE", rng), Currency: "EUR",
			Balances: []balance{{BalanceType: "closingBooked", BalanceAmount: money{
				Amount: strconv.FormatFloat(float64(rng.IntN(900000))/100, 'f', 2, 64), Currency: "EUR"}}},
		}
		u.accounts = insert(u.accounts, acc, accountKey)
		spec.conn.AccountsCount++
		spec.conn.TransactionsCount += seedTxCounts[spec.typ]
	}

	// Payments: one of each status a client should handle.
	for i, st := range []string{statusACSC, statusACSC, statusPending, statusRJCT, statusCANC, statusERROR, statusInit} {
		at := anchor.Add(-time.Duration(14-2*i) * day).Add(time.Duration(rng.IntN(3600)) * time.Second)
		p := &payment{
			ID: seededULID(at, rng), Status: st, ProviderIDs: []string{ProviderSandbox},
			PaymentInformation: paymentInfo{
				Amount: float64(100+rng.IntN(20000)) / 100, Currency: "EUR",
				RemittanceInformation: fmt.Sprintf("Order %d", 1000+i),
			},
			CreatedAt: at, UpdatedAt: at,
		}
		if i%2 == 0 {
			p.PaymentInformation.MerchantID = u.merchants[i/2%2].ID
		} else {
			p.PaymentInformation.CreditorName = "Jane Creditor"
			p.PaymentInformation.CreditorAccount = &accountRef{IBAN: fakeIBAN("FR", rng)}
		}
		if st != statusInit {
			p.ProviderID = ProviderSandbox
		}
		u.payments = append(u.payments, p)
	}
	return u
}

// seedTransactions fills u.txs on first use. The caller holds u.mu.
func (u *userData) seedTransactions() {
	if u.txSeeded {
		return
	}
	u.txSeeded = true
	rng := seededRand(u.id, "transactions")
	merchants := []struct{ name, main, sub string }{
		{"Mercadona", "Groceries", "Supermarket"},
		{"Lidl", "Groceries", "Supermarket"},
		{"Shell", "Transport", "Fuel"},
		{"Uber", "Transport", "Taxi"},
		{"Netflix", "Leisure", "Streaming"},
		{"Bella Napoli", "Leisure", "Restaurants"},
		{"Amazon", "Shopping", "Online"},
		{"Zara", "Shopping", "Clothing"},
		{"Farmacia Central", "Health", "Pharmacy"},
		{"City Utilities", "Housing", "Utilities"},
	}
	u.txBySK = map[string]*transaction{}
	// Seed only the accounts that existed at seeding time, in a fixed order.
	for _, acc := range u.accounts {
		n := seedTxCounts[acc.AccountType]
		txType := "BANK"
		if acc.AccountType == "CARD" {
			txType = "CARD"
		}
		for range n {
			at := u.anchor.Add(-time.Duration(1+rng.IntN(365)) * day).Add(time.Duration(rng.IntN(86400)) * time.Second)
			t := &transaction{ID: seededULID(at, rng), AccountID: acc.ID, ConnectionID: acc.ConnectionID, Type: txType}
			switch r := rng.IntN(20); {
			case r == 0:
				t.MerchantName = "ACME Payroll"
				t.Category = txCategory{Main: "Income", Sub: "Salary"}
				t.Amount.ChargedAmount = float64(150000+rng.IntN(200000)) / 100
			case r == 1:
				t.MerchantName = "Landlord Ltd"
				t.Category = txCategory{Main: "Housing", Sub: "Rent"}
				t.Amount.ChargedAmount = -float64(60000+rng.IntN(60000)) / 100
			default:
				m := merchants[rng.IntN(len(merchants))]
				t.MerchantName = m.name
				t.Category = txCategory{Main: m.main, Sub: m.sub}
				t.Amount.ChargedAmount = -float64(100+rng.IntN(15000)) / 100
			}
			t.Amount.ChargedAmount = math.Round(t.Amount.ChargedAmount*100) / 100
			t.Amount.OriginalAmount = t.Amount.ChargedAmount
			t.Amount.Currency = acc.Currency
			d := at.Format(time.DateOnly)
			t.Date = txDate{TransactionDate: d, BookingDate: at.Add(day).Format(time.DateOnly)}
			t.Description = txDescription{Description: fmt.Sprintf("%s %s", t.MerchantName, d)}
			t.SK = "TX_" + d + "_" + t.ID
			u.txs = append(u.txs, t)
			u.txBySK[t.SK] = t
		}
	}
	slices.SortFunc(u.txs, func(a, b *transaction) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
}

// fakeIBAN is an IBAN-shaped account number with a valid check digit pair.
func fakeIBAN(country string, rng *rand.Rand) string {
	bban := fmt.Sprintf("%018d", rng.Uint64()%1e18)
	return country + ibanCheck(country, bban) + bban
}

func ibanCheck(country, bban string) string {
	s := bban + strconv.Itoa(int(country[0]-'A'+10)) + strconv.Itoa(int(country[1]-'A'+10)) + "00"
	rem := 0
	for _, c := range s {
		rem = (rem*10 + int(c-'0')) % 97
	}
	return fmt.Sprintf("%02d", 98-rem)
}
