package upstreamsim

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Personas: the kinds of seed data a user can get. A user id of the form
// "persona-<name>" or "persona-<name>-<anything>" picks one (persona-busy-7
// is a busy user); SetPersona (or POST /_sim/personas) gives one to any
// user id. Every other user is PersonaDefault. See
// docs/upstream-sim-fixtures.md.
const (
	// PersonaDefault has one ACTIVE and one EXPIRED connection, five
	// accounts (checking, card, loan, savings, securities), 1200
	// transactions, two merchants and seven payments.
	PersonaDefault = "default"
	// PersonaNew has just signed up: no connection, account, transaction,
	// merchant or payment.
	PersonaNew = "new"
	// PersonaBusy has four ACTIVE connections, nine accounts and 10,000
	// transactions.
	PersonaBusy = "busy"
	// PersonaTroubled has no working connection: one EXPIRED, one
	// FETCHING_ERROR (PROVIDER_TIMEOUT) and one PENDING (consent not given).
	PersonaTroubled = "troubled"
	// PersonaFree belongs to an organization on the Free plan: it gets
	// tokens, then 403 NOT_AVAILABLE_ON_PLAN on every data or payment call.
	// Its data, never reachable, is the default persona's.
	PersonaFree = "free"
)

// personaNames lists the personas; the first is the fallback.
var personaNames = []string{PersonaDefault, PersonaNew, PersonaBusy, PersonaTroubled, PersonaFree}

func validPersona(p string) bool { return slices.Contains(personaNames, p) }

// personaFromID is the persona a user id names, else PersonaDefault.
func personaFromID(id string) string {
	rest, ok := strings.CutPrefix(id, "persona-")
	if !ok {
		return PersonaDefault
	}
	for _, p := range personaNames[1:] {
		if rest == p || strings.HasPrefix(rest, p+"-") {
			return p
		}
	}
	return PersonaDefault
}

// personaLocked is id's persona: assigned, else named by the id. The
// caller holds s.mu.
func (s *userStore) personaLocked(id string) string {
	if p, ok := s.assigned[id]; ok {
		return p
	}
	return personaFromID(id)
}

func (s *userStore) persona(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.personaLocked(id)
}

// assign gives id a persona and drops its data, which is seeded anew on
// next use.
func (s *userStore) assign(id, persona string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.assigned == nil {
		s.assigned = map[string]string{}
	}
	s.assigned[id] = persona
	delete(s.users, id)
}

func (s *userStore) setSeed(seed string) {
	s.mu.Lock()
	s.seed = seed
	s.mu.Unlock()
}

// SetPersona gives userID a persona (default, new, busy, troubled or
// free). The user's data is dropped and seeded anew, for that persona, on
// its next use; tokens already minted for the user stay valid. Reset and
// LoadFixtures forget assignments.
func (s *Server) SetPersona(userID, persona string) error {
	if !validPersona(persona) {
		return fmt.Errorf("upstreamsim: persona %q: want one of %s", persona, strings.Join(personaNames, ", "))
	}
	s.users.assign(userID, persona)
	return nil
}

// Persona returns userID's persona.
func (s *Server) Persona(userID string) string { return s.users.persona(userID) }

// LoadFixtures resets the simulator as Reset does, then seeds every user
// from seed and, unless start is zero, freezes the clock at start (only
// Advance moves it from there). With the same seed, start and sequence of
// calls, every id and date in every reply is the same on every run.
func (s *Server) LoadFixtures(seed string, start time.Time) {
	s.users.setSeed(seed)
	s.consent.setSeed(seed)
	if !start.IsZero() {
		s.clock.freeze(start)
	}
	s.Reset()
}

// personaPlanGate refuses every data and payment call of a free-persona
// user: the plan gate is organization-wide, so such a user stands for a
// user of a second organization, one on the Free plan.
func (s *Server) personaPlanGate(userID string) *apiError {
	if s.users.persona(userID) != PersonaFree {
		return nil
	}
	return newError(http.StatusForbidden, typeNotAvailableOnPlan, "This feature is not available on the Free plan")
}
