package dpop

import (
	"net/url"
	"strings"
)

// SameURL reports whether the proof's htu names the URL want, comparing
// both as RFC 9449 section 4.3 asks: without their query and fragment,
// after RFC 3986's syntax-based normalization (case of the scheme, the
// host and percent-encodings; percent-encoded unreserved characters
// decoded; dot segments removed) and scheme-based normalization (the
// default port dropped, an empty path read as "/"). Only absolute http and
// https URLs match anything.
func SameURL(htu, want string) bool {
	a, ok := normalURL(htu)
	if !ok {
		return false
	}
	b, ok := normalURL(want)
	return ok && a == b
}

// sameURL is SameURL(string(htu), want), with one normalization instead
// of two when htu is want exactly (an app signs the public URL as the edge
// names it).
func sameURL(htu []byte, want string) bool {
	if string(htu) == want {
		_, ok := normalURL(want)
		return ok
	}
	return SameURL(string(htu), want)
}

// normalURL is u normalized as SameURL compares it, without query and
// fragment; false when u is not an absolute http(s) URL with a host.
func normalURL(u string) (string, bool) {
	p, err := url.Parse(u)
	if err != nil || p.Opaque != "" || p.User != nil || p.Host == "" {
		return "", false
	}
	scheme := strings.ToLower(p.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", false
	}
	host := strings.ToLower(p.Host)
	port := p.Port()
	switch {
	case port == "" && strings.HasSuffix(host, ":"):
		host = strings.TrimSuffix(host, ":")
	case scheme == "http" && port == "80", scheme == "https" && port == "443":
		host = strings.TrimSuffix(host, ":"+port)
	}
	path, ok := normalPath(p.EscapedPath())
	if !ok {
		return "", false
	}
	return scheme + "://" + host + path, true
}

// normalPath normalizes a path's percent-encodings (upper-case hex,
// unreserved characters decoded) and removes its dot segments (RFC 3986
// section 5.2.4); "" is "/".
func normalPath(p string) (string, bool) {
	if strings.IndexByte(p, '%') < 0 { // no percent-encoding to normalize
		return nonEmpty(removeDotSegments(p)), true
	}
	var b strings.Builder
	b.Grow(len(p))
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
	return nonEmpty(removeDotSegments(b.String())), true
}

func nonEmpty(path string) string {
	if path == "" {
		return "/"
	}
	return path
}

// removeDotSegments is RFC 3986 section 5.2.4's algorithm.
func removeDotSegments(in string) string {
	if !strings.HasPrefix(in, ".") && !strings.Contains(in, "/.") {
		return in // no segment is . or ..: the algorithm would copy it
	}
	var out []string // output segments, each with its leading "/"
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
	return strings.Join(out, "")
}

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// unreserved is RFC 3986's unreserved set: ALPHA DIGIT - . _ ~
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}
