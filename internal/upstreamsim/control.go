package upstreamsim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"
)

// controlRoutes is the /_sim/ control API, served only with
// Options.Control. It mirrors the exported methods; it is never faulted and
// its requests are not recorded. Mutations answer 204 unless they return
// state. Every call reads its body with decodeControl, calls that take no
// body included, so a key a call does not know is a 400, never ignored.
func (s *Server) controlRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /_sim/reset", func(w http.ResponseWriter, r *http.Request) {
		if !noBody(w, r) {
			return
		}
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
		if in.ID != "" {
			controlError(w, `"id" is assigned by the simulator; leave it out`)
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
		if f.Status == 0 && f.Delay == 0 && !f.HangUp && !f.ActLate {
			controlError(w, "a fault needs a status, a delay, hangUp or actLate")
			return
		}
		if err := f.validate(); err != nil {
			controlError(w, err.Error())
			return
		}
		f.ID = s.InjectFault(f)
		writeJSON(w, http.StatusCreated, faultView(f))
	})
	mux.HandleFunc("GET /_sim/faults", func(w http.ResponseWriter, r *http.Request) {
		if !noBody(w, r) {
			return
		}
		faults := s.Faults()
		out := make([]faultJSON, len(faults))
		for i, f := range faults {
			out[i] = faultView(f)
		}
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("DELETE /_sim/faults/{id}", func(w http.ResponseWriter, r *http.Request) {
		if !noBody(w, r) {
			return
		}
		if !s.RemoveFault(r.PathValue("id")) {
			writeAPIError(w, notFound("No fault %q", r.PathValue("id")))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("DELETE /_sim/faults", func(w http.ResponseWriter, r *http.Request) {
		if !noBody(w, r) {
			return
		}
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
		if !noBody(w, r) {
			return
		}
		byUser, total := s.mints.snapshot()
		writeJSON(w, http.StatusOK, struct {
			Mints      map[string]int `json:"mints"`
			TotalMints int            `json:"totalMints"`
		}{byUser, total})
	})
	mux.HandleFunc("GET /_sim/requests", func(w http.ResponseWriter, r *http.Request) {
		if !noBody(w, r) {
			return
		}
		writeJSON(w, http.StatusOK, s.Requests())
	})
	mux.HandleFunc("DELETE /_sim/requests", func(w http.ResponseWriter, r *http.Request) {
		if !noBody(w, r) {
			return
		}
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
		if !noBody(w, r) {
			return
		}
		writeJSON(w, http.StatusOK, struct {
			Now time.Time `json:"now"`
		}{s.Now()})
	})
	mux.HandleFunc("GET /_sim/org", func(w http.ResponseWriter, r *http.Request) {
		if !noBody(w, r) {
			return
		}
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
		p := SettingsPatch{Plan: in.Plan, ProductionAccess: in.ProductionAccess, Credits: in.Credits}
		if _, err := s.UpdateSettings(p); err != nil {
			controlError(w, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, s.Org())
	})
	mux.HandleFunc("GET /_sim/settings", func(w http.ResponseWriter, r *http.Request) {
		if !noBody(w, r) {
			return
		}
		writeJSON(w, http.StatusOK, settingsView(s.Settings()))
	})
	mux.HandleFunc("PATCH /_sim/settings", s.patchSettings)
	mux.HandleFunc("POST /_sim/settings", s.patchSettings)
	mux.HandleFunc("POST /_sim/credits", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Credits *int   `json:"credits"`
			UserID  string `json:"userId"`
		}
		if !decodeControl(w, r, &in) {
			return
		}
		if in.Credits == nil || *in.Credits < 0 {
			controlError(w, `"credits" is required and must be 0 or more`)
			return
		}
		if in.UserID == "" {
			s.SetCredits(*in.Credits)
		} else {
			s.SetUserCredits(in.UserID, *in.Credits)
		}
		writeJSON(w, http.StatusOK, s.Org())
	})
	mux.HandleFunc("DELETE /_sim/credits/{userId}", func(w http.ResponseWriter, r *http.Request) {
		if !noBody(w, r) {
			return
		}
		if !s.ClearUserCredits(r.PathValue("userId")) {
			writeAPIError(w, notFound("User %q has no credit balance of its own", r.PathValue("userId")))
			return
		}
		w.WriteHeader(http.StatusNoContent)
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
		if !slices.Contains(connectionStatuses, in.Status) {
			controlError(w, `"status" must be one of [`+strings.Join(connectionStatuses, ", ")+`]`)
			return
		}
		if err := s.SetConnectionStatus(in.UserID, in.ConnectionID, in.Status); err != nil {
			writeAPIError(w, notFound("%s", err.Error()))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	s.consentControl(mux)
	s.directPaymentControl(mux)
	s.seedPaymentsControl(mux)
	s.fixtureControl(mux)
	s.webhookControl(mux)
	mux.HandleFunc("/_sim/", func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, notFound("Cannot %s %s", r.Method, r.URL.Path))
	})
	return mux
}

// patchSettings is PATCH (or POST) /_sim/settings: it applies the keys
// given and answers the resulting settings, or 400 naming the bad key.
func (s *Server) patchSettings(w http.ResponseWriter, r *http.Request) {
	var in struct {
		SettingsPatch
		TokenTTL *string `json:"tokenTTL"`
		ListLag  *string `json:"listLag"`
	}
	if !decodeControl(w, r, &in) {
		return
	}
	p := in.SettingsPatch
	if in.TokenTTL != nil {
		d, err := time.ParseDuration(*in.TokenTTL)
		if err != nil {
			controlError(w, `"tokenTTL" must be a duration such as "15m"`)
			return
		}
		p.TokenTTL = &d
	}
	if in.ListLag != nil {
		d, err := time.ParseDuration(*in.ListLag)
		if err != nil {
			controlError(w, `"listLag" must be a duration of 0 or more, such as "300ms"`)
			return
		}
		p.ListLag = &d
	}
	st, err := s.UpdateSettings(p)
	if err != nil {
		controlError(w, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, settingsView(st))
}

// settingsJSON is Settings on the wire: the token TTL and the list lag as
// duration strings.
type settingsJSON struct {
	Settings
	TokenTTL string `json:"tokenTTL"`
	ListLag  string `json:"listLag"`
}

func settingsView(s Settings) settingsJSON {
	return settingsJSON{s, s.TokenTTL.String(), s.ListLag.String()}
}

// faultJSON is a Fault on the wire: its delay as a duration string.
type faultJSON struct {
	Fault
	Delay string `json:"delay,omitempty"`
}

func faultView(f Fault) faultJSON {
	v := faultJSON{Fault: f}
	if f.Delay > 0 {
		v.Delay = f.Delay.String()
	}
	return v
}

// decodeControl reads a control request's JSON body into v, a pointer to a
// struct; an empty body leaves v as it is. A body that is not a JSON
// object, a key v does not have (it names the key and lists those v
// accepts) and a value of the wrong type answer 400 and return false.
func decodeControl(w http.ResponseWriter, r *http.Request, v any) bool {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		controlError(w, "could not read the request body")
		return false
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return true
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		controlError(w, "the body must be a JSON object")
		return false
	}
	known := jsonKeys(reflect.TypeOf(v).Elem())
	for _, k := range slices.Sorted(maps.Keys(keys)) { // sorted: the same body names the same key
		if !slices.Contains(known, k) {
			controlError(w, unknownKey(r, k, known))
			return false
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		controlError(w, typeProblem(err))
		return false
	}
	return true
}

// noBody is decodeControl for a call that takes no keys: it refuses any.
func noBody(w http.ResponseWriter, r *http.Request) bool {
	return decodeControl(w, r, &struct{}{})
}

// unknownKey is the message refusing key on r.
func unknownKey(r *http.Request, key string, known []string) string {
	call := r.Method + " " + r.URL.Path
	if len(known) == 0 {
		return fmt.Sprintf("unknown key %q: %s takes no keys", key, call)
	}
	return fmt.Sprintf("unknown key %q: %s takes %s", key, call, strings.Join(known, ", "))
}

// typeProblem says which key had a value of the wrong type. Control
// bodies are flat, so the key is the last element of the field path (which
// names embedded structs too).
func typeProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		key := te.Field[strings.LastIndex(te.Field, ".")+1:]
		return fmt.Sprintf("%q must be a JSON %s, not %s", key, jsonKind(te.Type), te.Value)
	}
	return "invalid JSON body: " + err.Error()
}

// jsonKind names a Go type the way a JSON author thinks of it.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "boolean"
	case reflect.String:
		return "string"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	default:
		return "number"
	}
}

// jsonKeys lists, sorted, the JSON keys a struct type decodes: its tagged
// fields and those of its embedded structs, less any tagged "-".
func jsonKeys(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-":
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			out = append(out, jsonKeys(f.Type)...)
		case !f.IsExported():
		case name == "":
			out = append(out, f.Name)
		default:
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func controlError(w http.ResponseWriter, msg string) {
	writeAPIError(w, newError(http.StatusBadRequest, typeClientError, "%s", msg))
}
