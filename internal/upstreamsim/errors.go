package upstreamsim

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// The upstream's error types (docs/upstream-sim.md).
const (
	typeClientError         = "CLIENT_ERROR"
	typeValidationError     = "VALIDATION_ERROR"
	typeProviderUnavailable = "PROVIDER_UNAVAILABLE"
	typeNotAvailableOnPlan  = "NOT_AVAILABLE_ON_PLAN"
	typeAccountLimit        = "ACCOUNT_LIMIT_REACHED"
	typeMCPForbidden        = "MCP_FORBIDDEN"
	typeMCPNoServiceOrg     = "MCP_NO_SERVICE_ORG"
	typeMCPUnavailable      = "MCP_TEMPORARILY_UNAVAILABLE"
	typeInternalError       = "INTERNAL_ERROR"
)

// Messages the upstream sends word for word.
const (
	msgSandboxGate   = "production access is not enabled for this organization, you must include fake providers or contact us"
	msgProviderError = "PROVIDER_ERROR"
	msgLocked        = "Connection is locked and cannot be deleted currently"
)

// apiError is a failed request as the upstream renders it: a status and a
// {type, message} body. An empty Type renders the 401 shape, {message} only.
// Every handler returns one; writeAPIError is the one place that renders it.
type apiError struct {
	Status  int
	Type    string
	Message string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Type, e.Message) }

func newError(status int, typ, format string, args ...any) *apiError {
	return &apiError{Status: status, Type: typ, Message: fmt.Sprintf(format, args...)}
}

// unauthorized is the 401 of every authenticated route: {message} only.
func unauthorized(msg string) *apiError {
	return &apiError{Status: http.StatusUnauthorized, Message: msg}
}

// notFound is the 404 CLIENT_ERROR of unknown routes and missing entities.
func notFound(format string, args ...any) *apiError {
	return newError(http.StatusNotFound, typeClientError, format, args...)
}

// problemList is a 400 whose message is a stringified JSON list of Joi-style
// problems, each naming its field: ["\"userId\" is required"].
func problemList(typ string, problems ...string) *apiError {
	b, _ := json.Marshal(problems)
	return &apiError{Status: http.StatusBadRequest, Type: typ, Message: string(b)}
}

// Joi-style problem texts.
func isRequired(field string) string   { return fmt.Sprintf("%q is required", field) }
func mustBeString(field string) string { return fmt.Sprintf("%q must be a string", field) }
func notEmpty(field string) string     { return fmt.Sprintf("%q is not allowed to be empty", field) }

func writeAPIError(w http.ResponseWriter, e *apiError) {
	if e.Type == "" {
		writeJSON(w, e.Status, struct {
			Message string `json:"message"`
		}{e.Message})
		return
	}
	writeJSON(w, e.Status, struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}{e.Type, e.Message})
}

// writeJSON writes v as an application/json reply.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"type":"INTERNAL_ERROR","message":"SERVER_ERROR"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writePlain writes a text/plain reply (the 423 lock message).
func writePlain(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(msg))
}
