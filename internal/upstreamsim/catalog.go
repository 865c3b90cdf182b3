package upstreamsim

import "strings"

// Provider modes: Israeli banks connect over the local open-banking
// standard (OB), European ones over PSD2.
const (
	modeOB   = "OB"
	modePSD2 = "PSD2"
)

// provider is a bank or card issuer in the catalogue, shared by all users.
// FriendlyID is what requests name (providerIds, providerId); ID is the
// upper-case code connections carry in providerId.
type provider struct {
	ID                 string `json:"id"`
	FriendlyID         string `json:"providerFriendlyId"`
	Name               string `json:"name"`
	NameNativeLanguage string `json:"nameNativeLanguage"`
	Mode               string `json:"mode"`
	Country            string `json:"country"`
	BIC                string `json:"bic"`
	Sandbox            bool   `json:"sandbox"`
	Status             string `json:"status"` // AVAILABLE or TEMPORARILY_UNAVAILABLE
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
	bank("hapoalim", "Bank Hapoalim", "בנק הפועלים", modeOB, "IL", "POALILIT"),
	bank("leumi", "Bank Leumi", "בנק לאומי", modeOB, "IL", "LUMIILIT"),
	bank("discount", "Israel Discount Bank", "בנק דיסקונט", modeOB, "IL", "IDBLILIT"),
	bank("mizrahi-tefahot", "Mizrahi-Tefahot Bank", "בנק מזרחי טפחות", modeOB, "IL", "MIZBILIT"),
	bank("first-international", "First International Bank of Israel", "הבנק הבינלאומי", modeOB, "IL", "FIRBILIT"),
	bank("isracard", "Isracard", "ישראכרט", modeOB, "IL", ""),
	bank("max", "Max", "מקס", modeOB, "IL", ""),
	bank("cal", "Cal", "כאל", modeOB, "IL", ""),
	bank("n26-de", "N26", "N26", modePSD2, "DE", "NTSBDEB1"),
	bank("revolut-lt", "Revolut", "Revolut", modePSD2, "LT", "REVOLT21"),
	sandboxBank(ProviderSandbox, "Demo Bank (sandbox)", "בנק הדגמה", "AVAILABLE", false),
	sandboxBank("testbank-sandbox", "Test Bank (sandbox)", "בנק בדיקות", "AVAILABLE", false),
	sandboxBank(ProviderDown, "Unavailable Bank (sandbox)", "בנק לא זמין", "TEMPORARILY_UNAVAILABLE", false),
	sandboxBank(ProviderFailing, "Failing Bank (sandbox)", "בנק כושל", "AVAILABLE", true),
}

func bank(friendly, name, native, mode, country, bic string) provider {
	return provider{ID: providerCode(friendly), FriendlyID: friendly, Name: name, NameNativeLanguage: native,
		Mode: mode, Country: country, BIC: bic, Status: "AVAILABLE"}
}

func sandboxBank(friendly, name, native, status string, failing bool) provider {
	return provider{ID: providerCode(friendly), FriendlyID: friendly, Name: name, NameNativeLanguage: native,
		Mode: modeOB, Country: "XX", Sandbox: true, Status: status, failing: failing}
}

// providerCode is the upper-case code of a provider (hapoalim -> HAPOALIM,
// demobank-sandbox -> DEMOBANK_SANDBOX), the form connections carry in
// providerId.
func providerCode(friendlyID string) string {
	return strings.ToUpper(strings.ReplaceAll(friendlyID, "-", "_"))
}

func findProvider(id string) (provider, bool) {
	for _, p := range providers {
		if p.FriendlyID == id {
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

// bankBranches uses the Israeli bank codes (12 Hapoalim, 10 Leumi, 11
// Discount, 20 Mizrahi-Tefahot); names are in Hebrew as the banks publish them.
var bankBranches = []bankBranch{
	{"br-12-600", "12", "בנק הפועלים", "600", "סניף רוטשילד", "תל אביב", "שדרות רוטשילד 50"},
	{"br-12-782", "12", "בנק הפועלים", "782", "סניף הדר", "חיפה", "רחוב הרצל 12"},
	{"br-10-800", "10", "בנק לאומי", "800", "סניף ראשי", "תל אביב", "יהודה הלוי 35"},
	{"br-10-902", "10", "בנק לאומי", "902", "סניף ירושלים", "ירושלים", "רחוב יפו 21"},
	{"br-11-077", "11", "בנק דיסקונט", "077", "סניף באר שבע", "באר שבע", "שדרות רגר 40"},
	{"br-20-461", "20", "בנק מזרחי טפחות", "461", "סניף רמת גן", "רמת גן", "דרך ז'בוטינסקי 7"},
	{"br-99-001", "99", "Demo Bank (sandbox)", "001", "Sandbox Main", "Sandbox City", "1 Test Street"},
}

// category is an entry of /v2/data/transaction-categories: an upper-case
// code, its Hebrew name and the codes of its subcategories.
type category struct {
	Main string   `json:"main"`
	He   string   `json:"he"`
	Subs []string `json:"subs"`
}

var categories = []category{
	{"INCOME", "הכנסות", []string{"INCOME_SALARY", "INCOME_REFUNDS", "INCOME_OTHER"}},
	{"HOUSING", "דיור", []string{"HOUSING_RENT", "HOUSING_UTILITIES", "HOUSING_MUNICIPAL_TAX", "HOUSING_MAINTENANCE"}},
	{"GROCERIES", "מזון וצריכה", []string{"GROCERIES_SUPERMARKET", "GROCERIES_BAKERY"}},
	{"TRANSPORT", "תחבורה", []string{"TRANSPORT_FUEL", "TRANSPORT_PUBLIC", "TRANSPORT_TAXI"}},
	{"LEISURE", "פנאי", []string{"LEISURE_RESTAURANTS", "LEISURE_STREAMING", "LEISURE_TRAVEL"}},
	{"SHOPPING", "קניות", []string{"SHOPPING_CLOTHING", "SHOPPING_ELECTRONICS", "SHOPPING_ONLINE", "SHOPPING_OTHER"}},
	{"HEALTH", "בריאות", []string{"HEALTH_PHARMACY", "HEALTH_DOCTOR"}},
	{"FINANCE", "פיננסים", []string{"FINANCE_LOAN_REPAYMENT", "FINANCE_SAVINGS", "FINANCE_INVESTMENTS", "FINANCE_FEES"}},
	{"TRANSFERS", "העברות", []string{"TRANSFERS_INTERNAL", "TRANSFERS_OTHERS"}},
	{"UNCATEGORIZED", "ללא קטגוריה", []string{"UNCATEGORIZED_OTHER"}},
}

func findCategory(main string) (category, bool) {
	for _, c := range categories {
		if c.Main == main {
			return c, true
		}
	}
	return category{}, false
}
