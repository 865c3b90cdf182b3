package problem

import (
	"encoding/json"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

const (
	// maxFields bounds the entries kept from one validation message.
	maxFields = 50
	// maxFieldRunes bounds a field path or label.
	maxFieldRunes = 128
)

// reLeadingPath is the field path an entry starts with: an identifier, then
// any of .name, [0], ["name"] or ['name'].
var reLeadingPath = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$-]*(?:\.[A-Za-z0-9_$-]+|\[[0-9]+\]|\["[^"\]]{1,64}"\]|\['[^'\]]{1,64}'\])*`)

// validationVerbs are the words that, after a bare lower-case identifier,
// make a single sentence read as a field problem ("amount must be a number")
// rather than prose ("production access is not enabled").
var validationVerbs = map[string]bool{
	"must": true, "should": true, "is": true, "are": true, "has": true,
	"have": true, "cannot": true, "can't": true, "does": true, "do": true,
	"contains": true, "needs": true, "required": true, "expected": true,
	"exceeds": true, "length": true, "not": true, "may": true,
}

// ParseFields parses an upstream validation message into one Field per
// entry. The message is a stringified JSON list of strings
// (`["\"clientSecret\" is required"]`), a Python-style list
// (`['"amount" must be a number']`, either quote, backslash escapes), or a
// single string. An entry's Message is the whole entry, decoded from the
// list's quoting (inner double quotes kept) and passed through Clean. Its
// Field is taken only from a token that names a field (see fieldOf): a
// quoted name the entry starts with (`"items[0].amount" must be positive`);
// else a leading path or identifier that reads as a field problem
// (`paymentInformation.creditorAccount.iban must ...`, `items[0].amount:
// ...`, `amount is required`, `debtorName missing`); else, in a list entry
// that does not start with a capital letter, its first quoted name
// (`debtor's "iban" is invalid`). Otherwise Field is empty: a sentence such
// as "Unexpected token } in JSON at position 12", which the upstream sends
// for a malformed body, names no field.
//
// ParseFields returns nil when the message is not a list of field problems:
// not a list of strings, a list in which no entry names a field, or a single
// string that does not start with a field (a quoted name, or a leading path
// or identifier as above). At most 50 entries are kept.
func ParseFields(message string) []Field {
	s := strings.TrimSpace(message)
	if s == "" {
		return nil
	}
	if entries, ok := listEntries(s); ok {
		return fieldsOf(cleanEntries(entries))
	}
	if s[0] == '[' || s[0] == '"' && strings.HasPrefix(strings.TrimSpace(unquoteJSON(s)), "[") {
		return nil // a list, but not of strings
	}
	// A single sentence must start with its field: a quoted name later on
	// ("Provider \"x\" not allowed") names a value, not a field.
	f, ok := leadingField(Clean(s))
	if !ok {
		return nil
	}
	return []Field{f}
}

// listEntries decodes a message that is a JSON or Python-style list of
// strings, possibly stringified once more ("[\"a\"]"); ok is false when
// the message is not such a list.
func listEntries(message string) (entries []string, ok bool) {
	s := strings.TrimSpace(message)
	if strings.HasPrefix(s, `"`) {
		s = strings.TrimSpace(unquoteJSON(s))
	}
	if !strings.HasPrefix(s, "[") {
		return nil, false
	}
	if json.Unmarshal([]byte(s), &entries) == nil {
		return entries, true
	}
	return parsePyList(s)
}

// unquoteJSON is the value of a JSON string literal, or "".
func unquoteJSON(s string) string {
	var v string
	if json.Unmarshal([]byte(s), &v) != nil {
		return ""
	}
	return v
}

// cleanEntries passes each entry through Clean, dropping those left empty;
// at most maxFields are kept.
func cleanEntries(entries []string) []string {
	out := make([]string, 0, min(len(entries), maxFields))
	for _, e := range entries {
		if len(out) == maxFields {
			break
		}
		if c := Clean(e); c != "" {
			out = append(out, c)
		}
	}
	return out
}

// fieldsOf builds the Fields of cleaned entries, or nil when no entry names
// a field.
func fieldsOf(entries []string) []Field {
	out := make([]Field, 0, len(entries))
	named := false
	for _, e := range entries {
		f, ok := fieldOf(e)
		named = named || ok
		out = append(out, f)
	}
	if !named {
		return nil
	}
	return out
}

// fieldOf builds the Field of one cleaned list entry; ok reports whether
// it names a field. Besides what leadingField accepts, a list entry names
// the field of its first quoted token (`debtor's "iban" is invalid`) unless
// it starts with a capital letter: a capitalised entry is a sentence, in
// which a quoted token is a value or a snippet of the request
// (`Unexpected token 'a', "amount" is not valid JSON`), not a field.
func fieldOf(msg string) (f Field, ok bool) {
	if f, ok = leadingField(msg); ok || msg == "" || startsUpper(msg) {
		return f, ok
	}
	if name, found := firstQuoted(msg); found && safeFieldName(name) {
		f.Field = name
		return f, true
	}
	return f, false
}

// leadingField builds the Field of one cleaned entry from the token it
// starts with; ok reports whether that token names a field: a quoted name
// (`"amount" must be a number`), or a leading path or identifier that
// reads as a field problem (singleFieldProblem). A plain sentence
// ("Unexpected token } in JSON at position 12", "e.g. use a sandbox")
// names none.
func leadingField(msg string) (f Field, ok bool) {
	f.Message = msg
	if strings.HasPrefix(msg, `"`) {
		if name, found := firstQuoted(msg); found && safeFieldName(name) {
			f.Field = name
			return f, true
		}
		return f, false
	}
	if name := reLeadingPath.FindString(msg); name != "" && safeFieldName(name) && singleFieldProblem(msg, name) {
		f.Field = name
		return f, true
	}
	return f, false
}

// startsUpper reports whether s starts with an upper-case letter.
func startsUpper(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.IsUpper(r)
}

// firstQuoted is the content of the first double-quoted token in s, with
// backslash-escaped quotes inside it (\") unescaped.
func firstQuoted(s string) (string, bool) {
	i := strings.IndexByte(s, '"')
	if i < 0 {
		return "", false
	}
	if j := strings.IndexByte(s[i+1:], '"'); j >= 0 && !strings.Contains(s[i+1:i+1+j+1], `\`) {
		return s[i+1 : i+1+j], true // no escapes: the common case, no copy
	}
	var b strings.Builder
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == '\\' && j+1 < len(s) && s[j+1] == '"':
			b.WriteByte('"')
			j++
		case c == '"':
			return b.String(), true
		default:
			b.WriteByte(c)
		}
	}
	return "", false
}

// safeFieldName rejects names that are too long or that Clean would alter
// (a quoted URL or token is not a field).
func safeFieldName(name string) bool {
	if name == "" || len([]rune(name)) > maxFieldRunes || strings.TrimSpace(name) != name {
		return false
	}
	return Clean(name) == name && !strings.Contains(name, redacted) && !strings.Contains(name, redactedURL)
}

// singleFieldProblem reports whether an entry (a list's or a lone
// sentence) reads as a problem with the named field rather than as prose
// that happens to start with a word.
func singleFieldProblem(s, field string) bool {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, `"`+field+`"`) {
		return true
	}
	if !strings.HasPrefix(s, field) {
		return false
	}
	rest := s[len(field):]
	if rest != "" && rest[0] != ' ' && rest[0] != ':' {
		return false // "e.g." and the like
	}
	if strings.ContainsAny(field, ".[") {
		return true
	}
	if field[0] < 'a' || field[0] > 'z' {
		return false // sentences start with a capital; field names rarely do
	}
	if strings.HasPrefix(rest, ":") {
		return true
	}
	for i := 1; i < len(field); i++ {
		if field[i] >= 'A' && field[i] <= 'Z' {
			return true // camelCase
		}
	}
	next, _, _ := strings.Cut(strings.TrimSpace(rest), " ")
	return validationVerbs[strings.ToLower(strings.TrimRight(next, ",;:"))]
}

// parsePyList parses a Python repr of a list of strings: ['a', "b's"],
// with optional u/r/b prefixes ignored and backslash escapes decoded.
func parsePyList(s string) ([]string, bool) {
	p := pyParser{s: s}
	p.skipSpace()
	if !p.eat('[') {
		return nil, false
	}
	var out []string
	for {
		p.skipSpace()
		if p.eat(']') {
			break
		}
		str, ok := p.str()
		if !ok {
			return nil, false
		}
		out = append(out, str)
		p.skipSpace()
		if p.eat(',') {
			continue
		}
		p.skipSpace()
		if p.eat(']') {
			break
		}
		return nil, false
	}
	p.skipSpace()
	return out, p.i == len(p.s)
}

type pyParser struct {
	s string
	i int
}

func (p *pyParser) skipSpace() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n' || p.s[p.i] == '\r') {
		p.i++
	}
}

func (p *pyParser) eat(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *pyParser) str() (string, bool) {
	if p.i < len(p.s) && strings.IndexByte("uUrRbB", p.s[p.i]) >= 0 {
		p.i++
	}
	if p.i >= len(p.s) || (p.s[p.i] != '\'' && p.s[p.i] != '"') {
		return "", false
	}
	q := p.s[p.i]
	p.i++
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		p.i++
		switch c {
		case q:
			return b.String(), true
		case '\\':
			if p.i >= len(p.s) {
				return "", false
			}
			e := p.s[p.i]
			p.i++
			switch e {
			case 'n', 't', 'r':
				b.WriteByte(' ')
			default: // \\ \' \" and anything else: the character itself
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", false
}
