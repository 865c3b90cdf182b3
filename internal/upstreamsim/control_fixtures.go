package upstreamsim

import (
	"maps"
	"net/http"
	"slices"
	"time"
)

// fixtureControl adds the fixture and persona control calls to mux:
//
//   - POST /_sim/fixtures {"seed": "demo", "now": "2026-07-23T04:12:09Z",
//     "personas": {"alice": "busy"}}: LoadFixtures(seed, now), then the
//     persona assignments; 200 {"seed", "now"}. Every key is optional.
//   - POST /_sim/personas {"userId": "alice", "persona": "troubled"}:
//     SetPersona; 204.
//   - GET /_sim/personas/{userId}: 200 {"userId", "persona"}.
//
// Unknown keys, a bad time or an unknown persona answer 400 and change
// nothing.
func (s *Server) fixtureControl(mux *http.ServeMux) {
	mux.HandleFunc("POST /_sim/fixtures", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Seed     string            `json:"seed"`
			Now      string            `json:"now"`
			Personas map[string]string `json:"personas"`
		}
		if !decodeControl(w, r, &in) {
			return
		}
		var start time.Time
		if in.Now != "" {
			t, err := time.Parse(time.RFC3339, in.Now)
			if err != nil {
				controlError(w, `"now" must be an RFC 3339 time such as "2026-07-23T04:12:09Z"`)
				return
			}
			start = t
		}
		for _, user := range slices.Sorted(maps.Keys(in.Personas)) { // sorted: the same body names the same user
			if !validPersona(in.Personas[user]) {
				controlError(w, `"personas" of "`+user+`": `+personaHint)
				return
			}
		}
		s.LoadFixtures(in.Seed, start)
		for user, p := range in.Personas {
			_ = s.SetPersona(user, p) // checked above
		}
		writeJSON(w, http.StatusOK, struct {
			Seed string    `json:"seed"`
			Now  time.Time `json:"now"`
		}{in.Seed, s.Now()})
	})
	mux.HandleFunc("POST /_sim/personas", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			UserID  string `json:"userId"`
			Persona string `json:"persona"`
		}
		if !decodeControl(w, r, &in) {
			return
		}
		if in.UserID == "" || in.Persona == "" {
			controlError(w, `"userId" and "persona" are required`)
			return
		}
		if !validPersona(in.Persona) {
			controlError(w, `"persona": `+personaHint)
			return
		}
		_ = s.SetPersona(in.UserID, in.Persona) // checked above
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /_sim/personas/{userId}", func(w http.ResponseWriter, r *http.Request) {
		if !noBody(w, r) {
			return
		}
		id := r.PathValue("userId")
		writeJSON(w, http.StatusOK, struct {
			UserID  string `json:"userId"`
			Persona string `json:"persona"`
		}{id, s.Persona(id)})
	})
}

// personaHint is the 400 message for an unknown persona.
const personaHint = "must be one of [default, new, busy, troubled, free]"
