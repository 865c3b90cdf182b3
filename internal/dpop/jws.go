package dpop

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// The compact JWS of a proof, read without a general JOSE parse (the
// package doc says why): its three base64url parts, and the JSON objects
// of its header and claims read member by member, after encoding/json has
// checked that each is valid JSON. Strings are slices of the decoded part
// unless they hold escapes (then encoding/json unquotes them), so a usual
// proof is read without allocating.

// maxMembers bounds the members of a header, a jwk or the claims: a proof
// has a handful; more is not a proof (ReasonMalformed).
const maxMembers = 32

// header is what the JOSE header says that Verify reads. A member absent
// or null is nil.
type header struct {
	alg, typ []byte
	jwk      []byte // the raw JSON object
	// other is true when the header has a member a proof has no use for
	// and that would change how it is read, or that go-jose would refuse
	// to read: crit and b64 (RFC 7515 4.1.11, RFC 7797), a certificate
	// chain or a key URL (x5c, x5u, jku: a proof's key is its jwk).
	other bool
}

// readHeader reads a decoded JOSE header: false when it is not a JSON
// object, a member repeats, or alg, typ, jwk, kid or nonce is of the
// wrong type (other members are not read).
func readHeader(b []byte) (h header, ok bool) {
	o := object{b: b}
	for {
		name, value, more := o.next()
		if !more {
			return h, o.valid()
		}
		switch string(name) {
		case "alg":
			h.alg, ok = stringOrNull(value)
		case "typ":
			h.typ, ok = stringOrNull(value)
		case "jwk":
			switch value[0] {
			case '{':
				h.jwk, ok = value, true
			case 'n':
				ok = true
			default:
				ok = false
			}
		case "kid", "nonce": // unused, but strings as go-jose requires
			_, ok = stringOrNull(value)
		case "crit", "b64", "x5c", "x5u", "jku":
			h.other, ok = true, true
		default:
			ok = true
		}
		if !ok {
			return header{}, false
		}
	}
}

// claims are the claims Verify reads; a claim absent or null is nil
// (iat: hasIAT false).
type claims struct {
	jti, htm, htu, ath []byte
	iat                float64
	hasIAT             bool
}

// readClaims reads a decoded claims set: false when it is not a JSON
// object, a claim repeats, a string claim is not a string, or iat is not
// a number (or one beyond float64).
func readClaims(b []byte) (c claims, ok bool) {
	o := object{b: b}
	for {
		name, value, more := o.next()
		if !more {
			return c, o.valid()
		}
		switch string(name) {
		case "jti":
			c.jti, ok = stringOrNull(value)
		case "htm":
			c.htm, ok = stringOrNull(value)
		case "htu":
			c.htu, ok = stringOrNull(value)
		case "ath":
			c.ath, ok = stringOrNull(value)
		case "iat":
			switch value[0] {
			case 'n':
				ok = true
			case '"', '{', '[', 't', 'f':
				ok = false
			default:
				f, err := strconv.ParseFloat(string(value), 64)
				c.iat, c.hasIAT, ok = f, true, err == nil
			}
		default:
			ok = true
		}
		if !ok {
			return claims{}, false
		}
	}
}

// jwkPrivate reports whether a jwk object has a member that only a private
// or symmetric key has, or a member that repeats, or is not a JSON object
// (either way it is not a public key).
func jwkPrivate(jwk []byte) bool {
	o := object{b: jwk}
	for {
		name, _, more := o.next()
		if !more {
			return !o.valid()
		}
		for _, p := range privateParams {
			if string(name) == p {
				return true
			}
		}
	}
}

// object reads the members of the JSON object b one by one: each next is
// the next member's name (unquoted) and value (raw JSON), and false at the
// end or at the first fault; valid then reports whether b was a valid
// JSON object with no name twice and at most maxMembers. (It keeps
// offsets, not slices of b, so that reading a proof's parts from a buffer
// on Verify's stack leaves them there.)
type object struct {
	b     []byte
	i     int                // where the next member starts; 0 before the first
	seen  [maxMembers][2]int // the quoted names read, as b[seen[k][0]:seen[k][1]]
	n     int
	state int8 // 0 reading, 1 done, -1 not valid
}

func (o *object) next() (name, value []byte, more bool) {
	if o.state != 0 {
		return nil, nil, false
	}
	b := o.b
	if o.i == 0 {
		if !json.Valid(b) {
			return o.fail()
		}
		// From here b is valid JSON: the scan below only finds where
		// each member starts and ends. It still checks each index, so
		// that it cannot fail unsafely on input it was not meant for.
		i := skipSpace(b, 0)
		if i >= len(b) || b[i] != '{' {
			return o.fail()
		}
		o.i = skipSpace(b, i+1)
		if o.i < len(b) && b[o.i] == '}' {
			o.state = 1
			return nil, nil, false
		}
	}
	i := o.i
	if i >= len(b) || b[i] != '"' || o.n == maxMembers {
		return o.fail()
	}
	end := stringEnd(b, i)
	name, ok := unquote(b[i:end])
	if !ok {
		return o.fail()
	}
	for _, s := range o.seen[:o.n] {
		if sameName(b[s[0]:s[1]], b[i:end]) {
			return o.fail()
		}
	}
	o.seen[o.n] = [2]int{i, end}
	o.n++
	i = skipSpace(b, end)
	if i >= len(b) || b[i] != ':' {
		return o.fail()
	}
	i = skipSpace(b, i+1)
	if i >= len(b) {
		return o.fail()
	}
	end = valueEnd(b, i)
	value = b[i:end]
	i = skipSpace(b, end)
	if i >= len(b) {
		return o.fail()
	}
	switch b[i] {
	case ',':
		o.i = skipSpace(b, i+1)
	case '}':
		o.state = 1
	default:
		return o.fail()
	}
	return name, value, true
}

func (o *object) fail() ([]byte, []byte, bool) {
	o.state = -1
	return nil, nil, false
}

// valid reports, once next is false, whether the object was read whole.
func (o *object) valid() bool { return o.state == 1 }

// sameName reports whether the quoted JSON strings a and b are the same
// string once unescaped.
func sameName(a, b []byte) bool {
	if plain(a) && plain(b) {
		return bytes.Equal(a, b)
	}
	x, okA := unquote(a)
	y, okB := unquote(b)
	return okA && okB && bytes.Equal(x, y)
}

// stringOrNull is a JSON value's string, nil for null; false for any
// other type.
func stringOrNull(value []byte) ([]byte, bool) {
	switch value[0] {
	case '"':
		return unquote(value)
	case 'n':
		return nil, true
	}
	return nil, false
}

// unquote is the JSON string s (with its quotes) unescaped: the bytes
// between the quotes when it has no escape and is UTF-8, else
// encoding/json's reading (which also replaces bytes that are not UTF-8).
// An empty string is non-nil.
func unquote(s []byte) ([]byte, bool) {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return nil, false
	}
	in := s[1 : len(s)-1 : len(s)-1]
	if plain(in) {
		return in, true
	}
	var out string
	if json.Unmarshal(append([]byte{}, s...), &out) != nil { // a copy: s may be on Verify's stack

		return nil, false
	}
	return append([]byte{}, out...), true
}

// plain reports whether the JSON string bytes s read as themselves: no
// escape, and UTF-8.
func plain(s []byte) bool { return bytes.IndexByte(s, '\\') < 0 && utf8.Valid(s) }

// skipSpace is the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd is the index just past the JSON string that starts (with its
// quote) at b[i].
func stringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// valueEnd is the index just past the JSON value that starts at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = stringEnd(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	for i < len(b) && !isDelim(b[i]) { // a number, true, false or null
		i++
	}
	return i
}

func isDelim(c byte) bool {
	return c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

// appendDecoded appends the base64url (unpadded) part to dst, and returns
// the decoded bytes apart; false when part is not base64url. It decodes
// as go-jose does (base64.RawURLEncoding).
func appendDecoded(dst []byte, part string) (all, decoded []byte, ok bool) {
	n := len(dst)
	out, err := base64.RawURLEncoding.AppendDecode(dst, []byte(part))
	if err != nil {
		return dst, nil, false
	}
	return out, out[n:len(out):len(out)], true
}
