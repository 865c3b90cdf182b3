package upstreamsim

import (
	"net/http"
	"slices"
	"time"
)

func viewAccount(a *account) account {
	v := *a
	v.Balances = slices.Clone(a.Balances)
	return v
}

// listAccounts is GET /v2/data/accounts; filters accountType, connectionId.
func (s *Server) listAccounts(w http.ResponseWriter, r *http.Request, c *call) *apiError {
	q := r.URL.Query()
	pq, e := parsePage(q, 1)
	if e != nil {
		return e
	}
	typ, conn := q.Get("accountType"), q.Get("connectionId")
	u := s.users.get(c.userID(), c.now)
	u.mu.Lock()
	items := u.accounts
	if typ != "" || conn != "" {
		items = slices.DeleteFunc(slices.Clone(items), func(a *account) bool {
			return (typ != "" && a.AccountType != typ) || (conn != "" && a.ConnectionID != conn)
		})
	}
	out := paginate(items, accountKey, viewAccount, pq)
	u.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getAccount answers 200 {} for an unknown id, as the real service does.
func (s *Server) getAccount(w http.ResponseWriter, r *http.Request, c *call) *apiError {
	u := s.users.get(c.userID(), c.now)
	u.mu.Lock()
	a, _, ok := find(u.accounts, r.PathValue("accountId"), accountKey)
	var v any = struct{}{}
	if ok {
		v = viewAccount(a)
	}
	u.mu.Unlock()
	writeJSON(w, http.StatusOK, v)
	return nil
}

func viewTransaction(t *transaction) transaction { return *t }

// parseDate reads an optional YYYY-MM-DD query parameter.
func parseDate(ck *checker, name, v string) string {
	if v == "" {
		return ""
	}
	if _, err := time.Parse(time.DateOnly, v); err != nil {
		ck.add(quote(name) + " must be a valid date in YYYY-MM-DD format")
		return ""
	}
	return v
}

// listTransactions is GET /v2/data/transactions, newest first by default;
// filters accountId, connectionId, type, dateFrom and dateTo (inclusive).
func (s *Server) listTransactions(w http.ResponseWriter, r *http.Request, c *call) *apiError {
	q := r.URL.Query()
	pq, e := parsePage(q, -1)
	if e != nil {
		return e
	}
	var ck checker
	from := parseDate(&ck, "dateFrom", q.Get("dateFrom"))
	to := parseDate(&ck, "dateTo", q.Get("dateTo"))
	if len(ck.problems) > 0 {
		return problemList(typeClientError, ck.problems...)
	}
	acc, conn, typ := q.Get("accountId"), q.Get("connectionId"), q.Get("type")
	u := s.users.get(c.userID(), c.now)
	u.mu.Lock()
	u.seedTransactions()
	items := u.txs
	if from != "" || to != "" || acc != "" || conn != "" || typ != "" {
		items = make([]*transaction, 0, len(u.txs))
		for _, t := range u.txs {
			d := t.Date.TransactionDate
			if (from != "" && d < from) || (to != "" && d > to) || (acc != "" && t.AccountID != acc) ||
				(conn != "" && t.ConnectionID != conn) || (typ != "" && t.Type != typ) {
				continue
			}
			items = append(items, t)
		}
	}
	out := paginate(items, transactionKey, viewTransaction, pq)
	u.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getTransaction reads one transaction by its SK; an unknown SK is 200 {}.
func (s *Server) getTransaction(w http.ResponseWriter, r *http.Request, c *call) *apiError {
	u := s.users.get(c.userID(), c.now)
	u.mu.Lock()
	u.seedTransactions()
	t, ok := u.txBySK[r.PathValue("sk")]
	var v any = struct{}{}
	if ok {
		v = *t
	}
	u.mu.Unlock()
	writeJSON(w, http.StatusOK, v)
	return nil
}

// patchTransaction is PATCH /v2/data/transactions/{sk} with {category:
// {main, sub}} and/or {note}. The category must be one of
// /v2/data/transaction-categories.
func (s *Server) patchTransaction(w http.ResponseWriter, r *http.Request, c *call) *apiError {
	m, e := jsonObject(r, c.body)
	if e != nil {
		return e
	}
	var ck checker
	var cat *txCategory
	if o := ck.obj(m, "category", "category", false); o != nil {
		main := ck.str(o, "main", "category.main", true)
		sub := ck.str(o, "sub", "category.sub", false)
		if main != "" {
			known, ok := findCategory(main)
			switch {
			case !ok:
				ck.add(`"category.main" must be one of the transaction categories`)
			case sub != "" && !slices.Contains(known.Subs, sub):
				ck.add(`"category.sub" must be a subcategory of "category.main"`)
			}
		}
		cat = &txCategory{Main: main, Sub: sub}
	}
	_, hasNote := m["note"]
	note := ck.str(m, "note", "note", false)
	if len(ck.problems) == 0 && cat == nil && !hasNote {
		ck.add(`"value" must contain at least one of [category, note]`)
	}
	if len(ck.problems) > 0 {
		return problemList(typeValidationError, ck.problems...)
	}
	sk := r.PathValue("sk")
	u := s.users.get(c.userID(), c.now)
	u.mu.Lock()
	defer u.mu.Unlock()
	u.seedTransactions()
	t, ok := u.txBySK[sk]
	if !ok {
		return notFound("Transaction %s was not found", sk)
	}
	if cat != nil {
		t.Category = *cat
	}
	if hasNote {
		t.Note = note
	}
	writeJSON(w, http.StatusOK, *t)
	return nil
}

// listCategories is GET /v2/data/transaction-categories: a bare array of
// {main, he, subs}, not a paged list.
func (s *Server) listCategories(w http.ResponseWriter, r *http.Request, c *call) *apiError {
	writeJSON(w, http.StatusOK, categories)
	return nil
}

// listProviders is GET /v2/providers: a bare array, sandbox providers only
// with includeFakeProviders=true.
func (s *Server) listProviders(w http.ResponseWriter, r *http.Request, c *call) *apiError {
	fake := r.URL.Query().Get("includeFakeProviders") == "true"
	out := make([]provider, 0, len(providers))
	for _, p := range providers {
		if !p.Sandbox || fake {
			out = append(out, p)
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// listBankBranches is GET /v2/bank-branches: a bare array; it refuses a
// limit parameter with 400. Optional filter bankCode.
func (s *Server) listBankBranches(w http.ResponseWriter, r *http.Request, c *call) *apiError {
	q := r.URL.Query()
	if q.Has("limit") {
		return problemList(typeClientError, `"limit" is not allowed`)
	}
	out := make([]bankBranch, 0, len(bankBranches))
	for _, b := range bankBranches {
		if bc := q.Get("bankCode"); bc == "" || b.BankCode == bc {
			out = append(out, b)
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
