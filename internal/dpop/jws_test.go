package dpop

import (
	"bytes"
	"encoding/asn1"
	"encoding/json"
	"io"
	"math/big"
	"slices"
	"strings"
	"testing"
)

// members is every member object reads from b, and whether b was valid.
func readMembers(b []byte) (names, values []string, valid bool) {
	o := object{b: b}
	for {
		name, value, more := o.next()
		if !more {
			return names, values, o.valid()
		}
		names = append(names, string(name))
		values = append(values, string(value))
	}
}

// jsonMembers is the same read with encoding/json: the members of a JSON
// object, names unquoted and values raw, and false when b is not one.
func jsonMembers(b []byte) (names, values []string, ok bool) {
	if !json.Valid(b) {
		return nil, nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, false
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, false
		}
		names = append(names, tok.(string))
		values = append(values, string(raw))
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, false
	}
	return names, values, true
}

func unique(names []string) bool {
	s := slices.Clone(names)
	slices.Sort(s)
	return len(slices.Compact(s)) == len(names)
}

func TestObjectReadsMembers(t *testing.T) {
	for _, tc := range []struct {
		in    string
		names []string
		valid bool
	}{
		{`{}`, nil, true},
		{" \t\r\n{ } \n", nil, true},
		{`{"a":1}`, []string{"a"}, true},
		{`{ "a" : "x\"}" , "b":{"c":[1,{"d":"}"}]}, "e":[], "f":null, "g":true, "h":-1.5e3 }`, []string{"a", "b", "e", "f", "g", "h"}, true},
		{`{"\u0061lg":"ES256"}`, []string{"alg"}, true},
		{`{"a\/b":1}`, []string{"a/b"}, true},
		{`{"a":1,"a":2}`, []string{"a"}, false},
		{`{"a":1,"\u0061":2}`, []string{"a"}, false},
		{`{"a":1,}`, nil, false},
		{`{"a":1} x`, nil, false},
		{`{"a":1}{}`, nil, false},
		{`[{"a":1}]`, nil, false},
		{`"a"`, nil, false},
		{`null`, nil, false},
		{`{"a":1`, nil, false},
		{`{'a':1}`, nil, false},
		{"{\"a\":\"\x01\"}", nil, false},
		{``, nil, false},
	} {
		names, _, valid := readMembers([]byte(tc.in))
		if valid != tc.valid || valid && !slices.Equal(names, tc.names) {
			t.Errorf("%q: got %q, %v; want %q, %v", tc.in, names, valid, tc.names, tc.valid)
		}
	}
	var many strings.Builder
	many.WriteString("{")
	for i := range maxMembers + 1 {
		if i > 0 {
			many.WriteString(",")
		}
		many.WriteString(`"m` + big.NewInt(int64(i)).String() + `":0`)
	}
	many.WriteString("}")
	if _, _, valid := readMembers([]byte(many.String())); valid {
		t.Errorf("%d members: got valid, want refused", maxMembers+1)
	}
}

// FuzzObject: object reads a JSON object as encoding/json does (the same
// names, unquoted, and raw values), refuses anything encoding/json does
// not read as one object, and refuses a name twice or more than
// maxMembers.
func FuzzObject(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"b":[1,{"c":"}"}],"d":"\u00e9\"","e":null}`, `{"a":1,"a":1}`, `{"a":1}x`,
		`{"alg":"ES256","typ":"dpop+jwt","jwk":{"kty":"EC","crv":"P-256","x":"AA","y":"AA"}}`, `{"\u0061":{"b":"\\"}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		names, values, valid := readMembers(b)
		wantNames, wantValues, ok := jsonMembers(b)
		want := ok && unique(wantNames) && len(wantNames) <= maxMembers
		if valid != want {
			t.Fatalf("%q: got valid %v, want %v (encoding/json: %q, %v)", b, valid, want, wantNames, ok)
		}
		if valid && (!slices.Equal(names, wantNames) || !slices.Equal(values, wantValues)) {
			t.Fatalf("%q: got %q %q, want %q %q", b, names, values, wantNames, wantValues)
		}
		if valid {
			for i, v := range values {
				s, isString := stringOrNull([]byte(v))
				var ref *string
				if err := json.Unmarshal([]byte(v), &ref); (err == nil) != isString || isString && (ref == nil) != (s == nil) || ref != nil && *ref != string(s) {
					t.Fatalf("member %q's value %q: got %q, %v; encoding/json %v, %v", names[i], v, s, isString, ref, err)
				}
			}
		}
	})
}

// derSignature writes what encoding/asn1 writes for the two integers.
func TestDERSignature(t *testing.T) {
	n := func(s string) []byte { b, _ := new(big.Int).SetString(s, 16); return b.FillBytes(make([]byte, 32)) }
	for _, rs := range [][2][]byte{
		{n("1"), n("2")},
		{n("0"), n("0")},
		{n("80"), n("7f")},
		{n("ff00000000000000000000000000000000000000000000000000000000000000"), n("00ff")},
		{n("7fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"), n("8000000000000000000000000000000000000000000000000000000000000001")},
		{bytes.Repeat([]byte{0xff}, 66), bytes.Repeat([]byte{0x01}, 66)}, // P-521's size: a long-form length
		{append([]byte{0x01}, bytes.Repeat([]byte{0xff}, 65)...), append(make([]byte, 65), 0x80)},
	} {
		want, err := asn1.Marshal(struct{ R, S *big.Int }{new(big.Int).SetBytes(rs[0]), new(big.Int).SetBytes(rs[1])})
		if err != nil {
			t.Fatal(err)
		}
		if got := derSignature(nil, rs[0], rs[1]); !bytes.Equal(got, want) {
			t.Errorf("r %x s %x: got %x, want %x", rs[0], rs[1], got, want)
		}
	}
}

// normalPathBefore is normalPath as it was before its fast paths (no
// percent sign; no dot segment).
func normalPathBefore(p string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(p) || !ishex(p[i+1]) || !ishex(p[i+2]) {
			return "", false
		}
		d := unhex(p[i+1])<<4 | unhex(p[i+2])
		if unreserved(d) {
			b.WriteByte(d)
		} else {
			b.WriteByte('%')
			b.WriteString(strings.ToUpper(p[i+1 : i+3]))
		}
		i += 2
	}
	var out []string
	in := b.String()
	for in != "" {
		switch {
		case strings.HasPrefix(in, "../"):
			in = in[3:]
		case strings.HasPrefix(in, "./"):
			in = in[2:]
		case strings.HasPrefix(in, "/./"):
			in = in[2:]
		case in == "/.":
			in = "/"
		case strings.HasPrefix(in, "/../"):
			in = in[3:]
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		case in == "/..":
			in = "/"
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		case in == "." || in == "..":
			in = ""
		default:
			start := 0
			if in[0] == '/' {
				start = 1
			}
			end := strings.IndexByte(in[start:], '/')
			if end < 0 {
				end = len(in)
			} else {
				end += start
			}
			out = append(out, in[:end])
			in = in[end:]
		}
	}
	if s := strings.Join(out, ""); s != "" {
		return s, true
	}
	return "/", true
}

// FuzzNormalPath: normalPath's fast paths change nothing, and sameURL is
// SameURL.
func FuzzNormalPath(f *testing.F) {
	for _, s := range []string{"/api/v2/payments", "/a/./b/../c", "/a%2fb/%7e", ".", "..", "/.", "/..", "a/..b/.c", "//x", "", "/a/.%2e/b"} {
		f.Add(s, "https://app.example.com"+s)
	}
	f.Fuzz(func(t *testing.T, p, htu string) {
		got, ok := normalPath(p)
		want, wantOK := normalPathBefore(p)
		if got != want || ok != wantOK {
			t.Fatalf("normalPath(%q) = %q, %v; want %q, %v", p, got, ok, want, wantOK)
		}
		for _, u := range []string{htu, "https://app.example.com" + p} {
			if sameURL([]byte(htu), u) != SameURL(htu, u) {
				t.Fatalf("sameURL(%q, %q) is not SameURL", htu, u)
			}
		}
	})
}
