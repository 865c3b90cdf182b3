package upstreamsim

import (
	"net/http"
	"strings"
	"time"
)

// tokenPath is the token endpoint's path.
const tokenPath = "/oauth/token"

// bearer returns the token of r's "Authorization: Bearer <token>" header,
// and false when there is no such header.
func bearer(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	tok = strings.TrimSpace(tok)
	return tok, ok && strings.EqualFold(scheme, "Bearer") && tok != ""
}

// handleToken is POST /oauth/token: {clientId, clientSecret, userId} for
// {accessToken, tokenType, expiresIn}.
func (s *Server) handleToken(w http.ResponseWriter, r *http.Request, c *call) *apiError {
	m, e := jsonObject(r, c.body)
	if e != nil {
		return e
	}
	var ck checker
	id := ck.str(m, "clientId", "clientId", true)
	secret := ck.str(m, "clientSecret", "clientSecret", true)
	user := ck.str(m, "userId", "userId", true)
	if len(ck.problems) > 0 {
		return problemList(typeClientError, ck.problems...)
	}
	k := s.knobs.Load()
	tok, ok := s.tokens.mintClient(id, secret, user, c.now, k.tokenTTL)
	if !ok {
		if k.unauthorizedShape == Shape401Typed {
			return &apiError{Status: http.StatusUnauthorized, Type: typeClientError,
				Message: `{"error":"access_denied","error_description":"Unauthorized"}`}
		}
		return unauthorized("Unauthorized: invalid client credentials")
	}
	s.mints.add(user)
	expiresIn := int64(k.tokenTTL / time.Second)
	if k.expiresInUnit == UnitMilliseconds {
		expiresIn = k.tokenTTL.Milliseconds()
	}
	writeJSON(w, http.StatusOK, struct {
		AccessToken string `json:"accessToken"`
		TokenType   string `json:"tokenType"`
		ExpiresIn   int64  `json:"expiresIn"`
	}{tok, "Bearer", expiresIn})
	return nil
}

// authorize checks the Bearer token of a data or payment call, then the
// connector rules, then the plan gate:
//
//   - missing, malformed, badly signed, expired, revoked, or minted under a
//     rotated secret: 401 {message};
//   - connector token on a non-GET route or without mcp:read: 403 MCP_FORBIDDEN;
//   - connector verification down: 503 MCP_TEMPORARILY_UNAVAILABLE;
//   - connector user with no linked account: 403 MCP_NO_SERVICE_ORG;
//   - Free plan (key or connector): 403 NOT_AVAILABLE_ON_PLAN.
func (s *Server) authorize(r *http.Request, now time.Time) (*claims, *apiError) {
	if r.Header.Get("Authorization") == "" {
		return nil, unauthorized("Missing Authorization header")
	}
	tok, ok := bearer(r)
	if !ok {
		return nil, unauthorized("Authorization header must be: Bearer <token>")
	}
	cl, err := s.tokens.verify(tok, now)
	if err != nil {
		return nil, unauthorized(err.Error())
	}
	if cl.Kind == kindConnector {
		if cl.Aud != s.opts.MCPResource {
			return nil, unauthorized("token audience is not this resource")
		}
		if r.Method != http.MethodGet {
			return nil, newError(http.StatusForbidden, typeMCPForbidden, "Connector tokens are accepted only on read routes")
		}
		if !cl.hasScope(scopeMCPRead) {
			return nil, newError(http.StatusForbidden, typeMCPForbidden, "Connector token lacks the %s scope", scopeMCPRead)
		}
		if s.org.isConnectorDown() {
			return nil, newError(http.StatusServiceUnavailable, typeMCPUnavailable, "Connector access cannot be verified right now")
		}
		if !cl.Linked {
			return nil, newError(http.StatusForbidden, typeMCPNoServiceOrg, "The connector user has no linked account of the service")
		}
	}
	if s.org.isFree() {
		return nil, newError(http.StatusForbidden, typeNotAvailableOnPlan, "This feature is not available on the Free plan")
	}
	return cl, nil
}
