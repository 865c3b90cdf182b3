package upstreamsim

import (
	"net/http"
	"slices"
	"time"
)

// lockAge is how old a connection must be before DELETE succeeds while the
// BigQuery lock is on.
const lockAge = 90 * time.Minute

// viewConnection copies c for encoding; an ACTIVE connection past its
// expiry date reads as EXPIRED.
func viewConnection(now time.Time) func(*connection) connection {
	return func(c *connection) connection {
		v := *c
		v.ProviderIDs = slices.Clone(c.ProviderIDs)
		if v.Status == "ACTIVE" && !now.Before(v.ExpiryDate) {
			v.Status = "EXPIRED"
		}
		return v
	}
}

// listConnections is GET /v2/connections; filter status.
func (s *Server) listConnections(w http.ResponseWriter, r *http.Request, c *call) *apiError {
	q := r.URL.Query()
	pq, e := parsePage(q, -1)
	if e != nil {
		return e
	}
	u := s.users.get(c.userID(), c.now)
	u.mu.Lock()
	items := u.connections
	if st := q.Get("status"); st != "" {
		items = slices.DeleteFunc(slices.Clone(items), func(x *connection) bool { return x.Status != st })
	}
	out := paginate(items, connectionKey, viewConnection(c.now), pq)
	u.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getConnection(w http.ResponseWriter, r *http.Request, c *call) *apiError {
	id := r.PathValue("connectionId")
	u := s.users.get(c.userID(), c.now)
	u.mu.Lock()
	conn, _, ok := find(u.connections, id, connectionKey)
	var v connection
	if ok {
		v = viewConnection(c.now)(conn)
	}
	u.mu.Unlock()
	if !ok {
		return notFound("Connection %s was not found", id)
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// createConnection is POST /v2/connections {providerIds, redirectUrl?}: 201
// {id, connectUrl}. The new connection is ACTIVE with one empty CHECKING
// account. Past the organization's cap: 403 ACCOUNT_LIMIT_REACHED.
func (s *Server) createConnection(w http.ResponseWriter, r *http.Request, c *call) *apiError {
	m, e := jsonObject(r, c.body)
	if e != nil {
		return e
	}
	var ck checker
	ids := ck.strList(m, "providerIds", "providerIds", false)
	if id := ck.str(m, "providerId", "providerId", false); id != "" && !slices.Contains(ids, id) {
		ids = append(ids, id)
	}
	redirect := ck.str(m, "redirectUrl", "redirectUrl", false)
	if len(ck.problems) == 0 && len(ids) == 0 {
		ck.add(isRequired("providerIds"))
	}
	if len(ck.problems) > 0 {
		return problemList(typeValidationError, ck.problems...)
	}
	if redirect != "" && !redirectAllowed(redirect, s.knobs.Load().allowedRedirectURLs) {
		return newError(http.StatusBadRequest, typeClientError, "Redirect url %s is not allowed for this organization", redirect)
	}
	if e := checkProvidersKnown(ids); e != nil {
		return e
	}
	if e := checkProvidersUp(ids); e != nil {
		return e
	}
	if e := s.org.reserveConnection(s.knobs.Load().accountCap); e != nil {
		return e
	}
	mode := "production"
	if slices.ContainsFunc(ids, isSandboxProvider) {
		mode = "sandbox"
	}
	conn := &connection{
		ID: newULID(c.now), UserID: c.userID(), ProviderIDs: ids, Mode: mode, Status: "ACTIVE",
		StartDate: c.now, ExpiryDate: c.now.Add(90 * day), CreatedAt: c.now, UpdatedAt: c.now,
		AccountsCount: 1, viaAPI: true,
	}
	acc := &account{
		ID: newULID(c.now), ConnectionID: conn.ID, ProviderID: ids[0], AccountType: "CHECKING",
		Product: "Current Account", AccountNumber: "XX00" + conn.ID[10:], Currency: "EUR",
		Balances: []balance{{BalanceType: "closingBooked", BalanceAmount: money{Amount: "0.00", Currency: "EUR"}}},
	}
	u := s.users.get(c.userID(), c.now)
	u.mu.Lock()
	u.connections = insert(u.connections, conn, connectionKey)
	u.accounts = insert(u.accounts, acc, accountKey)
	u.mu.Unlock()
	writeJSON(w, http.StatusCreated, struct {
		ID         string `json:"id"`
		ConnectURL string `json:"connectUrl"`
	}{conn.ID, connectURL(conn.ID)})
	return nil
}

// deleteConnection is DELETE /v2/connections/{id}: 204, or 423 text/plain
// while the BigQuery lock holds a connection younger than 90 minutes. The
// connection's accounts and transactions go with it.
func (s *Server) deleteConnection(w http.ResponseWriter, r *http.Request, c *call) *apiError {
	id := r.PathValue("connectionId")
	u := s.users.get(c.userID(), c.now)
	u.mu.Lock()
	conn, i, ok := find(u.connections, id, connectionKey)
	if !ok {
		u.mu.Unlock()
		return notFound("Connection %s was not found", id)
	}
	if s.knobs.Load().bigQueryLock && c.now.Sub(conn.CreatedAt) < lockAge {
		u.mu.Unlock()
		writePlain(w, http.StatusLocked, msgLocked)
		return nil
	}
	u.connections = slices.Delete(u.connections, i, i+1)
	u.accounts = slices.DeleteFunc(u.accounts, func(a *account) bool { return a.ConnectionID == id })
	if u.txSeeded {
		u.txs = slices.DeleteFunc(u.txs, func(t *transaction) bool {
			if t.ConnectionID == id {
				delete(u.txBySK, t.SK)
				return true
			}
			return false
		})
	}
	u.mu.Unlock()
	if conn.viaAPI {
		s.org.releaseConnection()
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// refresh is POST /chat/chat/connections/refresh, the on-demand refresh
// that costs the organization 20 credits; see org.startRefresh.
func (s *Server) refresh(w http.ResponseWriter, r *http.Request, c *call) *apiError {
	u := s.users.get(c.userID(), c.now)
	u.mu.Lock()
	refreshable := slices.ContainsFunc(u.connections, func(x *connection) bool { return x.refreshable(c.now) })
	u.mu.Unlock()
	out := s.org.startRefresh(c.now, c.userID(), refreshable)
	if out.Status == "accepted" {
		done := c.now.Add(refreshDuration)
		u.mu.Lock()
		for _, x := range u.connections {
			if x.refreshable(c.now) {
				x.LastFetchedAt, x.LastFetchedDataDate, x.UpdatedAt = &done, &done, c.now
			}
		}
		u.mu.Unlock()
	}
	writeJSON(w, out.httpStatus, out)
	return nil
}
