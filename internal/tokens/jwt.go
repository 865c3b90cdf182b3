package tokens

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"
)

// jwtExpiry reads the exp claim of a JWT-shaped token without verifying it.
func jwtExpiry(tok string) (time.Time, bool) {
	first := strings.IndexByte(tok, '.')
	if first < 0 {
		return time.Time{}, false
	}
	rest := tok[first+1:]
	second := strings.IndexByte(rest, '.')
	if second < 0 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(rest[:second], "="))
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp *json.Number `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Exp == nil {
		return time.Time{}, false
	}
	f, err := claims.Exp.Float64()
	if err != nil || f <= 0 || f > 1<<40 {
		return time.Time{}, false
	}
	sec := int64(f)
	return time.Unix(sec, int64((f-float64(sec))*1e9)), true
}
