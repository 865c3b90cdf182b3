package upstreamsim

import (
	"net/http"
	"slices"
	"time"
)

// lockAge is how old a connection must be before DELETE succeeds while the
// BigQuery lock is on.
const lockAge = 90 * time.Minute

// connectionView is a connection as the real service sends it: one
// providerId (the provider's upper-case code) besides providerIds, dates as
// calendar dates, timestamps in whole seconds, per-type account counts as
// plain numbers (accounts counts current accounts) and error always
// present, null when there is none.
type connectionView struct {
	ID                  string     `json:"id"`
	UserID              string     `json:"userId"`
	ProviderID          string     `json:"providerId"`
	ProviderIDs         []string   `json:"providerIds"`
	Mode                string     `json:"mode"`
	Status              string     `json:"status"`
	StartDate           string     `json:"startDate"`
	ExpiryDate          string     `json:"expiryDate"`
	LastFetchedDataDate *string    `json:"lastFetchedDataDate"`
	LastFetchedAt       *time.Time `json:"lastFetchedAt"`
	CreatedAt           time.Time  `json:"createdAt"`
	UpdatedAt           time.Time  `json:"updatedAt"`
	Accounts            int        `json:"accounts"`
	Cards               int        `json:"cards"`
	Savings             int        `json:"savings"`
	Loans               int        `json:"loans"`
	Securities          int        `json:"securities"`
	Transactions        int        `json:"transactions"`
	Error               *connError `json:"error"`
}

// viewConnection renders c with the counts of u's accounts; an ACTIVE
// connection past its expiry date reads as EXPIRED. The caller holds u.mu.
func viewConnection(u *userData, now time.Time) func(*connection) connectionView {
	return func(c *connection) connectionView {
		v := connectionView{
			ID: c.ID, UserID: c.UserID, ProviderID: providerCode(c.ProviderIDs[0]), ProviderIDs: slices.Clone(c.ProviderIDs),
			Mode: c.Mode, Status: c.Status, StartDate: c.StartDate.Format(time.DateOnly), ExpiryDate: c.ExpiryDate.Format(time.DateOnly),
			LastFetchedAt: c.LastFetchedAt, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt, Error: c.Error,
		}
		if c.LastFetchedDataDate != nil {
			d := c.LastFetchedDataDate.Format(time.DateOnly)
			v.LastFetchedDataDate = &d
		}
		if v.Status == "ACTIVE" && !now.Before(c.ExpiryDate) {
			v.Status = "EXPIRED"
		}
		for _, a := range u.accounts {
			if a.ConnectionID == c.ID {
				v.count(a)
			}
		}
		return v
	}
}

// count adds account a to the per-type counts.
func (v *connectionView) count(a *account) {
	switch a.AccountType {
	case "CARD":
		v.Cards++
	case "SAVINGS":
		v.Savings++
	case "LOAN":
		v.Loans++
	case "SECURITIES":
		v.Securities++
	default:
		v.Accounts++
	}
	v.Transactions += a.txCount
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
	out := paginate(items, connectionKey, viewConnection(u, c.now), pq)
	u.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getConnection(w http.ResponseWriter, r *http.Request, c *call) *apiError {
	id := r.PathValue("connectionId")
	u := s.users.get(c.userID(), c.now)
	u.mu.Lock()
	conn, _, ok := find(u.connections, id, connectionKey)
	var v connectionView
	if ok {
		v = viewConnection(u, c.now)(conn)
	}
	u.mu.Unlock()
	if !ok {
		return notFound("Connection %s was not found", id)
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// createConnection is POST /v2/connections {providerIds, redirectUrl?}: 201
// {id, connectUrl}. The new connection is PENDING, with no data, until the
// end-user consents on the connectUrl page (see consent.go). Past the
// organization's cap: 403 ACCOUNT_LIMIT_REACHED.
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
	u := s.users.get(c.userID(), c.now)
	u.mu.Lock()
	// It waits for the end-user's consent at connectUrl; the consent page
	// (or the control API) makes it ACTIVE with data.
	conn := &connection{
		ID: u.newID(c.now), UserID: c.userID(), ProviderIDs: ids, Mode: connectionMode(ids), Status: connPending,
		StartDate: c.now, ExpiryDate: c.now.Add(consentDuration), CreatedAt: c.now, UpdatedAt: c.now,
		viaAPI: true, redirectURL: redirect,
	}
	u.connections = insert(u.connections, conn, connectionKey)
	u.mu.Unlock()
	writeJSON(w, http.StatusCreated, struct {
		ID         string `json:"id"`
		ConnectURL string `json:"connectUrl"`
	}{conn.ID, s.consentURL(r, consentConnections, c.userID(), conn.ID)})
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
