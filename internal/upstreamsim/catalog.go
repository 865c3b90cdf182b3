package upstreamsim

import "strings"

// provider is a bank in the catalogue, shared by all users.
type provider struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Country string `json:"country"`
	BIC     string `json:"bic"`
	Sandbox bool   `json:"sandbox"`
	Status  string `json:"status"` // AVAILABLE or TEMPORARILY_UNAVAILABLE
	// failing providers answer every call with 500 PROVIDER_ERROR.
	failing bool
}

// Provider ids with deterministic behaviour (see docs/upstream-sim.md).
const (
	// ProviderDown is temporarily down: using it gives 400 PROVIDER_UNAVAILABLE.
	ProviderDown = "unavailable-bank-sandbox"
	// ProviderFailing fails: using it gives 500 INTERNAL_ERROR PROVIDER_ERROR.
	ProviderFailing = "failing-bank-sandbox"
	// ProviderSandbox is the default sandbox bank.
	ProviderSandbox = "demobank-sandbox"
)

// providers is the catalogue. The down and failing providers are sandbox
// ones so they can be reached with the sandbox gate on.
var providers = []provider{
	{ID: "bbva-es", Name: "BBVA", Country: "ES", BIC: "BBVAESMM", Status: "AVAILABLE"},
	{ID: "deutsche-bank-de", Name: "Deutsche Bank", Country: "DE", BIC: "DEUTDEFF", Status: "AVAILABLE"},
	{ID: "ing-nl", Name: "ING", Country: "NL", BIC: "INGBNL2A", Status: "AVAILABLE"},
	{ID: "n26-de", Name: "N26", Country: "DE", BIC: "NTSBDEB1", Status: "AVAILABLE"},
	{ID: "revolut-lt", Name: "Revolut", Country: "LT", BIC: "REVOLT21", Status: "AVAILABLE"},
	{ID: "santander-es", Name: "Banco Santander", Country: "ES", BIC: "BSCHESMM", Status: "AVAILABLE"},
	{ID: ProviderSandbox, Name: "Demo Bank (sandbox)", Country: "XX", BIC: "DEMOXX00", Sandbox: true, Status: "AVAILABLE"},
	{ID: "testbank-sandbox", Name: "Test Bank (sandbox)", Country: "XX", BIC: "TESTXX00", Sandbox: true, Status: "AVAILABLE"},
	{ID: ProviderDown, Name: "Unavailable Bank (sandbox)", Country: "XX", BIC: "DOWNXX00", Sandbox: true, Status: "TEMPORARILY_UNAVAILABLE"},
	{ID: ProviderFailing, Name: "Failing Bank (sandbox)", Country: "XX", BIC: "FAILXX00", Sandbox: true, Status: "AVAILABLE", failing: true},
}

func findProvider(id string) (provider, bool) {
	for _, p := range providers {
		if p.ID == id {
			return p, true
		}
	}
	return provider{}, false
}

func isSandboxProvider(id string) bool { return strings.HasSuffix(id, "-sandbox") }

// checkProvidersKnown answers 400 CLIENT_ERROR for an unknown provider id.
func checkProvidersKnown(ids []string) *apiError {
	for _, id := range ids {
		if _, ok := findProvider(id); !ok {
			return newError(400, typeClientError, "Invalid provider: %s", id)
		}
	}
	return nil
}

// checkProvidersUp answers 400 PROVIDER_UNAVAILABLE if a provider is
// temporarily down, else 500 INTERNAL_ERROR PROVIDER_ERROR if one fails.
func checkProvidersUp(ids []string) *apiError {
	for _, id := range ids {
		p, _ := findProvider(id)
		if p.Status != "AVAILABLE" {
			return newError(400, typeProviderUnavailable, "Provider %s is temporarily unavailable", id)
		}
	}
	for _, id := range ids {
		if p, _ := findProvider(id); p.failing {
			return newError(500, typeInternalError, msgProviderError)
		}
	}
	return nil
}

// bankBranch is an entry of /v2/bank-branches.
type bankBranch struct {
	ID         string `json:"id"`
	BankCode   string `json:"bankCode"`
	BankName   string `json:"bankName"`
	BranchCode string `json:"branchCode"`
	BranchName string `json:"branchName"`
	City       string `json:"city"`
	Address    string `json:"address"`
}

var bankBranches = []bankBranch{
	{"br-0049-0001", "0049", "Banco Santander", "0001", "Madrid Castellana", "Madrid", "Paseo de la Castellana 24"},
	{"br-0049-0075", "0049", "Banco Santander", "0075", "Barcelona Diagonal", "Barcelona", "Avinguda Diagonal 407"},
	{"br-0182-0100", "0182", "BBVA", "0100", "Bilbao Gran Via", "Bilbao", "Gran Via 1"},
	{"br-0182-2370", "0182", "BBVA", "2370", "Valencia Centro", "Valencia", "Calle Colon 32"},
	{"br-1004-0010", "10040000", "Deutsche Bank", "0010", "Berlin Unter den Linden", "Berlin", "Unter den Linden 13"},
	{"br-1004-0200", "10040000", "Deutsche Bank", "0200", "Frankfurt Taunusanlage", "Frankfurt", "Taunusanlage 12"},
	{"br-ingb-0001", "INGB", "ING", "0001", "Amsterdam Zuid", "Amsterdam", "Bijlmerdreef 106"},
	{"br-demo-0001", "DEMO", "Demo Bank (sandbox)", "0001", "Sandbox Main", "Sandbox City", "1 Test Street"},
}

// category is an entry of /v2/data/transaction-categories.
type category struct {
	ID   string   `json:"id"`
	Main string   `json:"main"`
	Subs []string `json:"subs"`
}

var categories = []category{
	{"01-income", "Income", []string{"Salary", "Refunds", "Other income"}},
	{"02-housing", "Housing", []string{"Rent", "Utilities", "Maintenance"}},
	{"03-groceries", "Groceries", []string{"Supermarket", "Bakery"}},
	{"04-transport", "Transport", []string{"Fuel", "Public transport", "Taxi"}},
	{"05-leisure", "Leisure", []string{"Restaurants", "Streaming", "Travel"}},
	{"06-shopping", "Shopping", []string{"Clothing", "Electronics", "Online"}},
	{"07-health", "Health", []string{"Pharmacy", "Doctor"}},
	{"08-transfers", "Transfers", []string{"Internal", "To others"}},
	{"99-uncategorized", "Uncategorized", []string{"Other"}},
}

func findCategory(main string) (category, bool) {
	for _, c := range categories {
		if c.Main == main {
			return c, true
		}
	}
	return category{}, false
}
