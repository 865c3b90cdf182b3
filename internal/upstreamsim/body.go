package upstreamsim

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"strings"
)

// maxBody bounds every request body the simulator reads.
const maxBody = 1 << 20

// jsonObject parses a request body the way the upstream's Express JSON
// parser does: a body that is not declared application/json, or is empty,
// reads as {} (so every required field is then reported missing); a
// declared JSON body that does not parse, or is not an object, is a 400
// CLIENT_ERROR.
func jsonObject(r *http.Request, body []byte) (map[string]any, *apiError) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "application/json" && !strings.HasSuffix(mt, "+json") {
		return map[string]any{}, nil
	}
	return parseJSONObject(body)
}

// parseJSONObject parses a body declared JSON: empty reads as {}; one that
// does not parse, or is not an object, is a 400 CLIENT_ERROR.
func parseJSONObject(body []byte) (map[string]any, *apiError) {
	if len(bytes.TrimSpace(body)) == 0 {
		return map[string]any{}, nil
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, problemList(typeClientError, "Unexpected token in JSON body: the body is not valid JSON")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, problemList(typeClientError, `"value" must be of type object`)
	}
	return m, nil
}

// checker collects Joi-style problems while reading fields of a JSON object.
type checker struct {
	problems []string
}

func (c *checker) add(p string) { c.problems = append(c.problems, p) }

// str reads a string field at path; required fields must be present and non-empty.
func (c *checker) str(m map[string]any, key, path string, required bool) string {
	v, ok := m[key]
	if !ok || v == nil {
		if required {
			c.add(isRequired(path))
		}
		return ""
	}
	s, ok := v.(string)
	if !ok {
		c.add(mustBeString(path))
		return ""
	}
	if s == "" && required {
		c.add(notEmpty(path))
	}
	return s
}

// obj reads an object field at path.
func (c *checker) obj(m map[string]any, key, path string, required bool) map[string]any {
	v, ok := m[key]
	if !ok || v == nil {
		if required {
			c.add(isRequired(path))
		}
		return nil
	}
	o, ok := v.(map[string]any)
	if !ok {
		c.add(quote(path) + " must be of type object")
		return nil
	}
	return o
}

// strList reads an array of non-empty strings at path.
func (c *checker) strList(m map[string]any, key, path string, required bool) []string {
	v, ok := m[key]
	if !ok || v == nil {
		if required {
			c.add(isRequired(path))
		}
		return nil
	}
	arr, ok := v.([]any)
	if !ok {
		c.add(quote(path) + " must be an array")
		return nil
	}
	if required && len(arr) == 0 {
		c.add(quote(path) + " must contain at least 1 items")
		return nil
	}
	out := make([]string, 0, len(arr))
	for _, e := range arr {
		s, ok := e.(string)
		if !ok || s == "" {
			c.add(quote(path+"[]") + " must be a non-empty string")
			return nil
		}
		out = append(out, s)
	}
	return out
}

// boolean reads an optional boolean field.
func (c *checker) boolean(m map[string]any, key, path string) bool {
	v, ok := m[key]
	if !ok || v == nil {
		return false
	}
	b, ok := v.(bool)
	if !ok {
		c.add(quote(path) + " must be a boolean")
	}
	return b
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
