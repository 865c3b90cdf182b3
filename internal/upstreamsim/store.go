package upstreamsim

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// Payment statuses the simulator uses (a subset of the upstream's list).
const (
	statusInit    = "INIT"
	statusPending = "PENDING"
	statusACSC    = "ACSC"
	statusRJCT    = "RJCT"
	statusCANC    = "CANC"
	statusERROR   = "ERROR"
)

// settleAfter is how long (simulator clock) an initiated payment stays
// PENDING before it reads as ACSC.
const settleAfter = 60 * time.Second

type accountRef struct {
	IBAN string `json:"iban"`
}

type paymentInfo struct {
	Amount                float64     `json:"amount"`
	Currency              string      `json:"currency"`
	RemittanceInformation string      `json:"remittanceInformation,omitempty"`
	MerchantID            string      `json:"merchantId,omitempty"`
	CreditorName          string      `json:"creditorName,omitempty"`
	CreditorAccount       *accountRef `json:"creditorAccount,omitempty"`
	DebtorAccount         *accountRef `json:"debtorAccount,omitempty"`
}

type payment struct {
	ID                 string      `json:"id"`
	Status             string      `json:"status"`
	PaymentInformation paymentInfo `json:"paymentInformation"`
	ProviderIDs        []string    `json:"providerIds"`
	ProviderID         string      `json:"providerId,omitempty"`
	RedirectURL        string      `json:"redirectUrl,omitempty"`
	PayURL             string      `json:"payUrl"`
	CreatedAt          time.Time   `json:"createdAt"`
	UpdatedAt          time.Time   `json:"updatedAt"`
	initiatedAt        time.Time
	includeFake        bool
	origin             string    // the X-Request-Id of the API request that made it ("" for another channel)
	madeAt             time.Time // when it was made, exactly (CreatedAt is whole seconds); zero for seed data: listed at once
	steadyAt           time.Time // when it was made by the clock the list lag runs on (simClock.steady); zero: listed at once
	profile            string    // the reply profile of a copy made for a reply (viewPayment); "": full
	token              string    // the consent token of payUrl, signed under tokenKey
	tokenKey           *[32]byte // the consent key token was signed with; nil: not yet
}

// settle moves an initiated payment to ACSC once settleAfter has passed.
// Server.settle does it with the webhook; only callers that send the
// webhook themselves call this.
func (p *payment) settle(now time.Time) {
	if p.Status == statusPending && !p.initiatedAt.IsZero() && !now.Before(p.initiatedAt.Add(settleAfter)) {
		p.Status = statusACSC
		p.UpdatedAt = p.initiatedAt.Add(settleAfter)
	}
}

type connError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// connection is a user's link to a bank. Its dates are kept as times and
// rendered by viewConnection (calendar dates, whole-second timestamps, the
// per-type counts).
type connection struct {
	ID                  string
	UserID              string
	ProviderIDs         []string // friendly ids, as requests name them
	Mode                string   // REAL, or SANDBOX with a -sandbox provider
	Status              string
	StartDate           time.Time
	ExpiryDate          time.Time
	LastFetchedDataDate *time.Time // nil: never fetched
	LastFetchedAt       *time.Time
	CreatedAt           time.Time
	UpdatedAt           time.Time
	Error               *connError // nil renders as "error": null
	viaAPI              bool
	redirectURL         string // where the consent page sends the end-user back
}

// refreshable reports whether the connection can fetch data.
func (c *connection) refreshable(now time.Time) bool {
	return c.Status == "ACTIVE" && now.Before(c.ExpiryDate)
}

type money struct {
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
}

type balance struct {
	BalanceType   string `json:"balanceType"`
	BalanceAmount money  `json:"balanceAmount"`
}

type account struct {
	ID            string    `json:"id"`
	ConnectionID  string    `json:"connectionId"`
	ProviderID    string    `json:"providerId"`
	AccountType   string    `json:"accountType"`
	Product       string    `json:"product"`
	AccountNumber string    `json:"accountNumber"`
	Currency      string    `json:"currency"`
	Balances      []balance `json:"balances"`
	// txCount is how many transactions seeding gives the account, known
	// before they are seeded lazily.
	txCount int
}

// txAmount is a transaction's amount: what the merchant asked
// (originalAmount) and what the account was charged (chargedAmount).
type txAmount struct {
	OriginalAmount txMoney   `json:"originalAmount"`
	ChargedAmount  txCharged `json:"chargedAmount"`
}

type txMoney struct {
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
}

// txCharged is the charged amount. As in the real service, its amount is
// a number (float64), or the empty string when the original amount applies.
type txCharged struct {
	Amount   any    `json:"amount"`
	Currency string `json:"currency"`
}

type txDate struct {
	TransactionDate string `json:"transactionDate"`
	BookingDate     string `json:"bookingDate"`
}

type txDescription struct {
	Description string `json:"description"`
}

type txCategory struct {
	Main string `json:"main"`
	Sub  string `json:"sub,omitempty"`
}

type transaction struct {
	ID           string        `json:"id"`
	SK           string        `json:"SK"`
	AccountID    string        `json:"accountId"`
	ConnectionID string        `json:"connectionId"`
	Type         string        `json:"type"`
	Amount       txAmount      `json:"amount"`
	Date         txDate        `json:"date"`
	Description  txDescription `json:"description"`
	MerchantName string        `json:"merchantName"`
	Category     txCategory    `json:"category"`
	Note         string        `json:"note,omitempty"`
}

type merchant struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	IBAN      string    `json:"iban,omitempty"`
	Website   string    `json:"website,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// userData is everything one user (token sub) owns. Every slice is sorted by
// ascending id, which for ULIDs is creation order. mu guards all fields.
type userData struct {
	mu          sync.Mutex
	id          string
	persona     string
	seed        string     // Options.Seed or the fixtures' seed; "" for none
	ids         *rand.Rand // ids of created resources when seeded; nil: crypto/rand
	lastID      string     // the last id newID made
	anchor      time.Time  // the day seeding was anchored to
	payments    []*payment
	connections []*connection
	accounts    []*account
	merchants   []*merchant
	txSeeded    bool
	txs         []*transaction
	txBySK      map[string]*transaction
}

// userStore holds users, seeding each on first use from the seed and the
// user's persona. It is safe for concurrent use; a user's data is guarded
// by its own mutex.
type userStore struct {
	mu       sync.Mutex
	users    map[string]*userData
	seed     string
	assigned map[string]string // userID -> persona set through SetPersona
}

// get returns the user's data, seeding it (except transactions, seeded on
// first transaction read) on first use.
func (s *userStore) get(id string, now time.Time) *userData {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u, ok := s.users[id]; ok {
		return u
	}
	if s.users == nil {
		s.users = map[string]*userData{}
	}
	u := seedUser(id, s.personaLocked(id), s.seed, now)
	s.users[id] = u
	return u
}

// reset forgets every user and every persona assignment; the seed stays.
func (s *userStore) reset() {
	s.mu.Lock()
	s.users = nil
	s.assigned = nil
	s.mu.Unlock()
}

// find returns the element of sorted with the given id.
func find[T any](sorted []*T, id string, key func(*T) string) (*T, int, bool) {
	i, ok := slices.BinarySearchFunc(sorted, id, func(e *T, id string) int { return cmp.Compare(key(e), id) })
	if !ok {
		return nil, i, false
	}
	return sorted[i], i, true
}

// insert adds v to sorted, keeping the order.
func insert[T any](sorted []*T, v *T, key func(*T) string) []*T {
	_, i, _ := find(sorted, key(v), key)
	return slices.Insert(sorted, i, v)
}

func paymentKey(p *payment) string         { return p.ID }
func connectionKey(c *connection) string   { return c.ID }
func accountKey(a *account) string         { return a.ID }
func merchantKey(m *merchant) string       { return m.ID }
func transactionKey(t *transaction) string { return t.ID }
