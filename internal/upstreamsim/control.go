package upstreamsim

import (
	"encoding/json"
	"io"
	"net/http"
	"time"
)

// controlRoutes is the /_sim/ control API, served only with
// Options.Control. It mirrors the exported methods; it is never faulted and
// its requests are not recorded. Mutations answer 204 unless they return
// state.
func (s *Server) controlRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /_sim/reset", func(w http.ResponseWriter, r *http.Request) {
		s.Reset()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /_sim/faults", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Fault
			Delay string `json:"delay"`
		}
		if !decodeControl(w, r, &in) {
			return
		}
		f := in.Fault
		if in.Delay != "" {
			d, err := time.ParseDuration(in.Delay)
			if err != nil || d < 0 {
				controlError(w, `"delay" must be a duration such as "2s"`)
				return
			}
			f.Delay = d
		}
		if f.Status == 0 && f.Delay == 0 && !f.HangUp {
			controlError(w, "a fault needs a status, a delay or hangUp")
			return
		}
		s.InjectFault(f)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("DELETE /_sim/faults", func(w http.ResponseWriter, r *http.Request) {
		s.ClearFaults()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /_sim/rotate-secret", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			ClientSecret string `json:"clientSecret"`
			PurgeFailed  bool   `json:"purgeFailed"`
		}
		if !decodeControl(w, r, &in) {
			return
		}
		if in.ClientSecret == "" {
			controlError(w, `"clientSecret" is required`)
			return
		}
		if in.PurgeFailed {
			s.RotateSecretPurgeFailed(in.ClientSecret)
		} else {
			s.RotateSecret(in.ClientSecret)
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /_sim/revoke", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			UserID string `json:"userId"`
		}
		if !decodeControl(w, r, &in) {
			return
		}
		if in.UserID == "" {
			controlError(w, `"userId" is required`)
			return
		}
		s.RevokeUser(in.UserID)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /_sim/counters", func(w http.ResponseWriter, r *http.Request) {
		byUser, total := s.mints.snapshot()
		writeJSON(w, http.StatusOK, struct {
			Mints      map[string]int `json:"mints"`
			TotalMints int            `json:"totalMints"`
		}{byUser, total})
	})
	mux.HandleFunc("GET /_sim/requests", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Requests())
	})
	mux.HandleFunc("DELETE /_sim/requests", func(w http.ResponseWriter, r *http.Request) {
		s.ClearRequests()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /_sim/clock/advance", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Duration string `json:"duration"`
		}
		if !decodeControl(w, r, &in) {
			return
		}
		d, err := time.ParseDuration(in.Duration)
		if err != nil || d < 0 {
			controlError(w, `"duration" must be a non-negative duration such as "90m"`)
			return
		}
		writeJSON(w, http.StatusOK, struct {
			Now time.Time `json:"now"`
		}{s.Advance(d)})
	})
	mux.HandleFunc("GET /_sim/clock", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, struct {
			Now time.Time `json:"now"`
		}{s.Now()})
	})
	mux.HandleFunc("GET /_sim/org", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Org())
	})
	mux.HandleFunc("POST /_sim/org", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Plan             *string `json:"plan"`
			ProductionAccess *bool   `json:"productionAccess"`
			Credits          *int    `json:"credits"`
		}
		if !decodeControl(w, r, &in) {
			return
		}
		if in.Plan != nil && !validPlan(*in.Plan) {
			controlError(w, `"plan" must be one of [free, starter, pro]`)
			return
		}
		if in.Plan != nil {
			s.SetPlan(*in.Plan)
		}
		if in.ProductionAccess != nil {
			s.SetProductionAccess(*in.ProductionAccess)
		}
		if in.Credits != nil {
			s.SetCredits(*in.Credits)
		}
		writeJSON(w, http.StatusOK, s.Org())
	})
	mux.HandleFunc("POST /_sim/connector-token", func(w http.ResponseWriter, r *http.Request) {
		in := struct {
			UserID string   `json:"userId"`
			Scopes []string `json:"scopes"`
			Linked *bool    `json:"linked"`
		}{}
		if !decodeControl(w, r, &in) {
			return
		}
		if in.UserID == "" {
			controlError(w, `"userId" is required`)
			return
		}
		if in.Scopes == nil {
			in.Scopes = []string{scopeMCPRead}
		}
		linked := in.Linked == nil || *in.Linked
		writeJSON(w, http.StatusOK, struct {
			AccessToken string `json:"accessToken"`
			TokenType   string `json:"tokenType"`
		}{s.IssueConnectorToken(in.UserID, in.Scopes, linked), "Bearer"})
	})
	mux.HandleFunc("POST /_sim/connector-verification", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Down bool `json:"down"`
		}
		if !decodeControl(w, r, &in) {
			return
		}
		s.SetConnectorVerificationDown(in.Down)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /_sim/connection-status", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			UserID       string `json:"userId"`
			ConnectionID string `json:"connectionId"`
			Status       string `json:"status"`
		}
		if !decodeControl(w, r, &in) {
			return
		}
		if in.UserID == "" || in.ConnectionID == "" || in.Status == "" {
			controlError(w, `"userId", "connectionId" and "status" are required`)
			return
		}
		if err := s.SetConnectionStatus(in.UserID, in.ConnectionID, in.Status); err != nil {
			writeAPIError(w, notFound("%s", err.Error()))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("/_sim/", func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, notFound("Cannot %s %s", r.Method, r.URL.Path))
	})
	return mux
}

// decodeControl reads a control request's JSON body into v; an empty body
// leaves v as it is. On failure it answers 400 and returns false.
func decodeControl(w http.ResponseWriter, r *http.Request, v any) bool {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err == nil && len(b) > 0 {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		controlError(w, "invalid JSON body: "+err.Error())
		return false
	}
	return true
}

func controlError(w http.ResponseWriter, msg string) {
	writeAPIError(w, newError(http.StatusBadRequest, typeClientError, "%s", msg))
}
