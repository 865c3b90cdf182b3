package upstreamsim

import (
	"net/http"
	"slices"
)

func viewMerchant(m *merchant) merchant { return *m }

func (s *Server) listMerchants(w http.ResponseWriter, r *http.Request, c *call) *apiError {
	pq, e := parsePage(r.URL.Query(), -1)
	if e != nil {
		return e
	}
	u := s.users.get(c.userID(), c.now)
	u.mu.Lock()
	out := paginate(u.merchants, merchantKey, viewMerchant, pq)
	u.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getMerchant(w http.ResponseWriter, r *http.Request, c *call) *apiError {
	id := r.PathValue("merchantId")
	u := s.users.get(c.userID(), c.now)
	u.mu.Lock()
	m, _, ok := find(u.merchants, id, merchantKey)
	var v merchant
	if ok {
		v = *m
	}
	u.mu.Unlock()
	if !ok {
		return notFound("Merchant %s was not found", id)
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// merchantFields validates a merchant body: name required, iban and
// website optional strings.
func merchantFields(r *http.Request, body []byte) (name, iban, website string, e *apiError) {
	m, e := jsonObject(r, body)
	if e != nil {
		return "", "", "", e
	}
	var ck checker
	name = ck.str(m, "name", "name", true)
	iban = ck.str(m, "iban", "iban", false)
	website = ck.str(m, "website", "website", false)
	if len(ck.problems) > 0 {
		return "", "", "", problemList(typeValidationError, ck.problems...)
	}
	return name, iban, website, nil
}

func (s *Server) createMerchant(w http.ResponseWriter, r *http.Request, c *call) *apiError {
	name, iban, website, e := merchantFields(r, c.body)
	if e != nil {
		return e
	}
	u := s.users.get(c.userID(), c.now)
	u.mu.Lock()
	m := &merchant{ID: u.newID(c.now), Name: name, IBAN: iban, Website: website, CreatedAt: c.now, UpdatedAt: c.now}
	u.merchants = insert(u.merchants, m, merchantKey)
	v := *m
	u.mu.Unlock()
	writeJSON(w, http.StatusCreated, v)
	return nil
}

func (s *Server) updateMerchant(w http.ResponseWriter, r *http.Request, c *call) *apiError {
	name, iban, website, e := merchantFields(r, c.body)
	if e != nil {
		return e
	}
	id := r.PathValue("merchantId")
	u := s.users.get(c.userID(), c.now)
	u.mu.Lock()
	defer u.mu.Unlock()
	m, _, ok := find(u.merchants, id, merchantKey)
	if !ok {
		return notFound("Merchant %s was not found", id)
	}
	m.Name, m.IBAN, m.Website, m.UpdatedAt = name, iban, website, c.now
	writeJSON(w, http.StatusOK, *m)
	return nil
}

func (s *Server) deleteMerchant(w http.ResponseWriter, r *http.Request, c *call) *apiError {
	id := r.PathValue("merchantId")
	u := s.users.get(c.userID(), c.now)
	u.mu.Lock()
	_, i, ok := find(u.merchants, id, merchantKey)
	if ok {
		u.merchants = slices.Delete(u.merchants, i, i+1)
	}
	u.mu.Unlock()
	if !ok {
		return notFound("Merchant %s was not found", id)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
