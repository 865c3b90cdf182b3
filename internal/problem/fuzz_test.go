package problem

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

// plantedSecrets are values that must never reach a client. Each is
// planted whole, between spaces, into fuzzed bodies; what must not appear in
// the output is the part after "|" (or the whole value when there is none).
var plantedSecrets = []string{
	testJWT,
	"https://internal.upstream.example.com/v2/payments?token=abc",
	"api.open-finance.ai/v2/payments",
	"Bearer |s3cr3tT0k3nValue",
	"client_secret=|Zm9vYmFyYmF6cXV4",
	"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b",
	"sk_live_4eC39HqLyjWDarjtT1zdp7dc9f8e7a6b5",
}

// plantedURLs are upstream addresses planted like plantedSecrets: no
// body, development's upstreamMessage included, names their host.
var plantedURLs = []struct{ plant, host string }{
	{"http://10.1.2.3:8080/x", "10.1.2.3"},
	{"//internal.host/x", "internal.host"},
	{"http://[fd00::1]:8080/x", "fd00::1"},
	{"https://user:pw@internal.upstream.example.com/v2", "internal.upstream"},
}

func splitSecret(s string) (plant, forbidden string) {
	prefix, secret, ok := strings.Cut(s, "|")
	if !ok {
		return s, s
	}
	return prefix + secret, secret
}

func FuzzFromUpstream(f *testing.F) {
	for _, tc := range upstreamCases {
		body := []byte(tc.body)
		if len(body) > 4<<10 {
			body = body[:4<<10] // a huge seed only slows the engine; the table covers it
		}
		f.Add(tc.status, body)
	}
	f.Add(400, []byte(`{"type":"CLIENT_ERROR","message":["a",1,{"b":null}]}`))
	f.Add(401, []byte(`{"message":"{\"message\":{\"error_description\":\"deep\"}}"}`))
	f.Add(402, []byte(`{"status":"insufficient_credits","cost":"20","balance":"NaN"}`))
	f.Add(402, []byte(`{"cost":1e999}`))
	f.Add(0, []byte("\xef\xbb\xbf  "))
	f.Add(600, []byte(`[`))
	f.Add(400, []byte(`{"type":"CLIENT_ERROR","message":["Unexpected token } in JSON at position 12"]}`))
	f.Add(400, []byte(`{"statusCode":400,"message":"Unexpected token } in JSON at position 12","error":"Bad Request"}`))

	f.Fuzz(func(t *testing.T, status int, body []byte) {
		p := FromUpstream(status, nil, body)
		checkFuzzed(t, p, body)

		// Plant a secret in the message of a JSON body, in a list message
		// and in a plain-text body, around the fuzzed text. One secret per
		// input, chosen by its length, keeps the engine fast; mutations
		// that change the length rotate through them all.
		text := string(body)
		{
			plant, forbidden := splitSecret(plantedSecrets[len(body)%len(plantedSecrets)])
			msg := text + " " + plant + " " + text
			js, _ := json.Marshal(map[string]any{"type": "CLIENT_ERROR", "message": msg})
			listMsg, _ := json.Marshal([]string{msg, "\"" + plant + "\" is invalid"})
			jsList, _ := json.Marshal(map[string]any{"type": "VALIDATION_ERROR", "message": string(listMsg)})
			for _, b := range [][]byte{js, jsList, []byte(msg)} {
				p := FromUpstream(status, nil, b)
				out := checkFuzzed(t, p, b)
				if strings.Contains(out, forbidden) {
					t.Fatalf("status %d body %q: output %s contains the planted %q", status, b, out, forbidden)
				}
			}
		}
		{
			u := plantedURLs[len(body)%len(plantedURLs)]
			msg := text + " " + u.plant + " " + text
			js, _ := json.Marshal(map[string]any{"type": "CLIENT_ERROR", "message": msg})
			for _, b := range [][]byte{js, []byte(msg)} {
				dev, _ := json.Marshal(WithUpstreamMessage(FromUpstream(status, nil, b)))
				if strings.Contains(string(dev), u.host) {
					t.Fatalf("status %d body %q: development's output %s names the planted host %q", status, b, dev, u.host)
				}
			}
		}
	})
}

// checkFuzzed asserts the invariants of any FromUpstream result and returns
// the marshalled problem.
func checkFuzzed(t *testing.T, p *Problem, body []byte) string {
	t.Helper()
	if p == nil {
		t.Fatalf("body %q: got nil", body)
	}
	out, err := json.Marshal(p)
	if err != nil || !json.Valid(out) {
		t.Fatalf("body %q: marshal: %v", body, err)
	}
	if p.Code == "" || !reCode.MatchString(p.Code) {
		t.Fatalf("body %q: code %q", body, p.Code)
	}
	if p.Status < 400 || p.Status > 599 {
		t.Fatalf("body %q: status %d", body, p.Status)
	}
	if p.Action == "" || p.Title == "" || p.Type != TypeURI(p.Code) {
		t.Fatalf("body %q: action %q title %q type %q", body, p.Action, p.Title, p.Type)
	}
	if utf8.RuneCountInString(p.Detail) > maxDetailRunes || !utf8.ValidString(p.Detail) {
		t.Fatalf("body %q: detail %q", body, p.Detail)
	}
	if secs, err := strconv.Atoi(p.RetryAfter); p.RetryAfter != "" && (err != nil || secs < 0 || secs > int(MaxRetryAfter/time.Second)) {
		t.Fatalf("body %q: Retry-After %q", body, p.RetryAfter)
	}
	checkFields(t, string(body), p.Fields)
	for _, m := range p.Ext {
		if p.Code != CodeInsufficientCredits || (m.Name != memberCost && m.Name != memberBalance) {
			t.Fatalf("body %q: extension member %s on %s", body, m.Name, p.Code)
		}
	}
	rec := httptestRecorder()
	Write(rec, p, "rid")
	if rec.Code != p.Status {
		t.Fatalf("body %q: written status %d, want %d", body, rec.Code, p.Status)
	}
	return string(out)
}

func FuzzParseFields(f *testing.F) {
	seeds := []string{
		`["\"clientSecret\" is required", "paymentInformation should not be empty"]`,
		`['"amount" must be a number', "it's bad"]`,
		`["items[0].amount must be positive", "a.b['c'] is required"]`,
		`"[\"\\\"x\\\" is required\"]"`,
		"paymentInformation should not be empty",
		"No providers were found",
		`[1, {"a": 2}]`,
		`['unterminated`,
		`[u'x\'y', r"z"]`,
		`["Unexpected token } in JSON at position 12"]`,
		`["\"amount\" must be a number", "Unexpected token 'a', \"amount\" is not valid JSON"]`,
		"Unexpected end of JSON input",
		`["e.g. use a sandbox", "amount must not contain \"x\""]`,
	}
	for _, s := range seeds {
		f.Add(s)
	}
	for _, tc := range upstreamCases {
		var b struct{ Message string }
		if json.Unmarshal([]byte(tc.body), &b) == nil && b.Message != "" {
			f.Add(b.Message)
		}
	}
	f.Fuzz(func(t *testing.T, message string) {
		checkFields(t, message, ParseFields(message))
		// A capitalised sentence, such as the upstream's answer to a
		// malformed JSON body, names no field, whatever it holds.
		{
			sentence := "Unexpected token " + message + " in JSON at position 12"
			list, _ := json.Marshal([]string{sentence})
			for _, m := range []string{sentence, string(list)} {
				if fields := ParseFields(m); fields != nil {
					t.Fatalf("message %q: a sentence names fields %+v", m, fields)
				}
			}
		}
		{
			plant, forbidden := splitSecret(plantedSecrets[len(message)%len(plantedSecrets)])
			list, _ := json.Marshal([]string{message + " " + plant, `"` + plant + `" is invalid`, plant + " is required"})
			py := "['" + strings.ReplaceAll(strings.ReplaceAll(message, `\`, `\\`), `'`, `\'`) + " " + plant + "']"
			for _, m := range []string{string(list), py, plant + " must be set"} {
				fields := ParseFields(m)
				checkFields(t, m, fields)
				out, _ := json.Marshal(fields)
				if strings.Contains(string(out), forbidden) {
					t.Fatalf("message %q: fields %s contain the planted %q", m, out, forbidden)
				}
			}
		}
	})
}

func checkFields(t *testing.T, message string, fields []Field) {
	t.Helper()
	if fields != nil && len(fields) == 0 {
		t.Fatalf("message %q: got an empty non-nil list", message)
	}
	if len(fields) > maxFields {
		t.Fatalf("message %q: %d fields", message, len(fields))
	}
	named := false
	for _, fl := range fields {
		if fl.Message == "" || !utf8.ValidString(fl.Message) || utf8.RuneCountInString(fl.Message) > maxDetailRunes {
			t.Fatalf("message %q: field %+v", message, fl)
		}
		if fl.Field != "" {
			named = true
			if utf8.RuneCountInString(fl.Field) > maxFieldRunes || Clean(fl.Field) != fl.Field {
				t.Fatalf("message %q: field name %q", message, fl.Field)
			}
			if !fieldFromToken(fl) {
				t.Fatalf("message %q: field name %q is not a token that names a field in %q", message, fl.Field, fl.Message)
			}
		}
	}
	if fields != nil && !named {
		t.Fatalf("message %q: no entry names a field", message)
	}
	if _, err := json.Marshal(fields); err != nil {
		t.Fatalf("message %q: marshal: %v", message, err)
	}
}

// fieldFromToken reports whether a Field's name comes from a token of its
// message that names a field: a quoted name the message starts with; a
// leading path or identifier followed by the end, a space or a colon, which
// is not a capitalised word (the first word of a sentence: "Unexpected
// token } in JSON"); or a quoted name inside a message that does not start
// with a capital letter.
func fieldFromToken(fl Field) bool {
	quoted := `"` + strings.ReplaceAll(fl.Field, `"`, `\"`) + `"`
	if strings.HasPrefix(fl.Message, quoted) {
		return true
	}
	first, _ := utf8.DecodeRuneInString(fl.Message)
	if rest, ok := strings.CutPrefix(fl.Message, fl.Field); ok && (rest == "" || rest[0] == ' ' || rest[0] == ':') {
		return strings.ContainsAny(fl.Field, ".[") || !unicode.IsUpper(first)
	}
	return strings.Contains(fl.Message, quoted) && !unicode.IsUpper(first)
}

// httptestRecorder is a minimal ResponseWriter for the fuzz loop, cheaper
// than httptest.ResponseRecorder.
type recorder struct {
	h    http.Header
	Code int
}

func httptestRecorder() *recorder { return &recorder{h: http.Header{}} }

func (r *recorder) Header() http.Header         { return r.h }
func (r *recorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *recorder) WriteHeader(code int)        { r.Code = code }
