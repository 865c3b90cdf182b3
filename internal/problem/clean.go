package problem

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

const (
	// maxDetailRunes is the longest detail Clean returns.
	maxDetailRunes = 300
	// maxCleanInput bounds the work Clean does: only the first 8 KiB of a
	// message are looked at (the output is at most 300 runes anyway). The
	// cut is made at whitespace so no partial token, which might be the
	// prefix of a secret too short to be recognised, survives.
	maxCleanInput = 8 << 10

	redacted    = "[redacted]"
	redactedURL = "[url]"
	// redactedHost stands for the scheme, userinfo, host and port of a URL
	// whose path cleanKeepingURLs keeps.
	redactedHost = "[host]"
)

var (
	// Any scheme, not just http(s): redis://user:pass@host leaks as much.
	reURL = regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]{1,15}://[^\s"<>]*`)
	// Scheme-relative URLs: //host.tld/..., with userinfo, a bracketed
	// IPv6 literal or a dotless host with a port.
	reSchemeRelative = regexp.MustCompile(`(?i)(?:^|[\s(=:'"])//(?:[^\s/?#@"<>\[\]]*@)?(?:\[[0-9a-f:.]+(?:%[^\s\]"<>]*)?\]|[a-z0-9-]+(?:\.[a-z0-9-]+)+|[a-z0-9-]+:[0-9]{1,5})[^\s"<>]*`)
	// A bracketed IPv6 literal (two colons at least), with a port and a
	// path when present: [fd00::1]:8080/x.
	reIPv6 = regexp.MustCompile(`(?i)\[[0-9a-f]*:[0-9a-f.]*:[0-9a-f:.]*(?:%[0-9a-z._~-]+)?\](?::[0-9]{1,5})?(?:/[^\s"<>]*)?`)
	// Dot-separated tokens: JWTs (three base64url segments) and host names
	// are both told apart from field paths by isJWT and isHost.
	reDotted = regexp.MustCompile(`[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)+\.?(?::[0-9]{1,5})?(?:/[^\s"<>]*)?`)
	// A Bearer credential; "Bearer Bearer x" is treated as one.
	reBearer = regexp.MustCompile(`(?i)\bbearer(?:\s+bearer)*(?:\s*[:=]\s*|\s+)[^\s"',;]+`)
	// key=value or "key": "value" where the key names a credential.
	reSecretKV = regexp.MustCompile(`(?i)\b([\w.-]*(?:secret|passw(?:or)?d|pwd|token|api[_-]?key|authorization|credential|cookie|signature|private[_-]?key)[\w.-]*)(["']?\s*[:=]\s*)("[^"]*"|'[^']*'|[^\s,;&"']+)`)
	// Candidate blobs; isBlob decides.
	reBlob = regexp.MustCompile(`[A-Za-z0-9+/=_-]{32,}`)
	// localhost with a port, with or without a path.
	reLocalhost = regexp.MustCompile(`(?i)\blocalhost:[0-9]{1,5}[^\s"<>]*`)
)

// bareHostTLDs are the last labels that make a dotted name without a path or
// port read as a host name. A dotted name with a path or a port is a host
// whatever its last label; without one, "creditorAccount.iban" must stay a
// field path, so only these common suffixes count.
var bareHostTLDs = map[string]bool{
	"com": true, "net": true, "org": true, "io": true, "ai": true, "dev": true,
	"app": true, "cloud": true, "co": true, "internal": true, "local": true,
	"lan": true, "corp": true, "svc": true, "eu": true, "de": true, "fr": true,
	"uk": true, "us": true, "il": true, "nl": true,
}

// Clean makes an upstream message safe to show to a browser. It drops URLs
// (any scheme, scheme-relative, host/path and host:port forms, bare host
// names with a common suffix, IPv4 addresses), JWTs, Bearer values, values
// of credential-named keys (client_secret=..., "password": "..."), long
// hex/base64 blobs (32 characters or more) and control characters; it
// collapses whitespace and truncates to 300 runes. Invalid UTF-8 is dropped.
// Dropped URLs read "[url]", other dropped values "[redacted]".
//
// Clean is a filter, not a proof: it removes what looks like a secret, so a
// short password in free prose would pass. The BFF never puts secrets in
// messages; Clean guards against the upstream doing so.
func Clean(message string) string { return clean(message, false) }

// cleanKeepingURLs is Clean but for URLs, of which it keeps the path:
// scheme, userinfo, host and port read "[host]", a query or fragment
// (where a code or token would be) "?[redacted]". It is for a developer's
// eyes (WithUpstreamMessage), who needs the path the upstream refused, and
// still shows no upstream address and none of the credentials Clean takes
// out.
func cleanKeepingURLs(message string) string { return clean(message, true) }

func clean(message string, keepURLs bool) string {
	if message == "" {
		return ""
	}
	s := capInput(message)
	s = stripControl(s)
	if s == "" {
		return ""
	}
	if strings.Contains(s, "://") {
		if keepURLs {
			s = reURL.ReplaceAllStringFunc(s, hostlessURL)
		} else {
			s = reURL.ReplaceAllString(s, redactedURL)
		}
	}
	if strings.Contains(s, "//") {
		s = reSchemeRelative.ReplaceAllStringFunc(s, func(m string) string {
			// Keep the leading delimiter the pattern consumed.
			i := strings.Index(m, "//")
			if keepURLs {
				return m[:i] + hostless(m[i+2:])
			}
			return m[:i] + redactedURL
		})
	}
	if strings.Contains(s, "[") && strings.Contains(s, ":") {
		s = reIPv6.ReplaceAllStringFunc(s, func(m string) string {
			if keepURLs {
				return hostless(m)
			}
			return redactedURL
		})
	}
	if strings.Contains(s, ".") {
		s = reDotted.ReplaceAllStringFunc(s, func(m string) string {
			switch {
			case isJWT(m):
				return redacted
			case isHost(m) && keepURLs:
				return hostless(m)
			case isHost(m):
				if strings.HasSuffix(m, ".") {
					return redactedURL + "." // the end of a sentence
				}
				return redactedURL
			}
			return m
		})
	}
	if containsFold(s, "localhost:") {
		s = reLocalhost.ReplaceAllStringFunc(s, func(m string) string {
			if keepURLs {
				return hostless(m)
			}
			return redactedURL
		})
	}
	if containsFold(s, "bearer") {
		s = reBearer.ReplaceAllStringFunc(s, func(m string) string {
			return m[:len("bearer")] + " " + redacted
		})
	}
	if strings.ContainsAny(s, ":=") {
		s = reSecretKV.ReplaceAllStringFunc(s, redactSecretValue)
	}
	if hasLongRun(s) {
		s = reBlob.ReplaceAllStringFunc(s, func(m string) string {
			if isBlob(m) {
				return redacted
			}
			return m
		})
	}
	return truncateRunes(collapseSpace(s), maxDetailRunes)
}

// hostlessURL is a URL reURL matched, for cleanKeepingURLs: see hostless.
func hostlessURL(u string) string {
	_, rest, _ := strings.Cut(u, "://")
	return hostless(rest)
}

// hostless is a URL's text after its scheme and "//" (or a host with its
// port and path) with the authority (userinfo, host, port) read as "[host]"
// and a query or fragment as "?[redacted]"; the path stays, and a URL
// inside it (a redirect target) loses its host too. A sentence's closing
// dot after a bare host stays.
func hostless(rest string) string {
	tail := ""
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		rest, tail = rest[:i], "?"+redacted
	}
	// Userinfo ends at the last "@": a password may hold a "/", and a path
	// cut short is better than a password or a host shown.
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest = rest[i+1:]
	}
	path := ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		path = rest[i:]
	} else if strings.HasSuffix(rest, ".") && tail == "" {
		path = "."
	}
	if strings.Contains(path, "://") {
		path = reURL.ReplaceAllStringFunc(path, hostlessURL)
	}
	return redactedHost + path + tail
}

// collapseSpace trims s and turns each run of white space into one space.
func collapseSpace(s string) string {
	prevSpace := true // trims the start
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c == ' ' && prevSpace) {
			return strings.Join(strings.Fields(s), " ")
		}
		prevSpace = c == ' '
	}
	if prevSpace {
		return strings.TrimRight(s, " ")
	}
	return s
}

// redactSecretValue replaces the value of a credential-named key. After
// "key=" or before a quoted value it always does; after "key:" an unquoted
// value of lower-case letters only is prose ("token: expired") and is kept.
func redactSecretValue(m string) string {
	sub := reSecretKV.FindStringSubmatch(m)
	if sub == nil {
		return m
	}
	key, sep, val := sub[1], sub[2], sub[3]
	if !strings.Contains(sep, "=") && val[0] != '"' && val[0] != '\'' && isLowerWord(val) {
		return m
	}
	if q := val[0]; q == '"' || q == '\'' {
		return key + sep + string(q) + redacted + string(q)
	}
	return key + sep + redacted
}

func isLowerWord(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 'a' || s[i] > 'z' {
			return false
		}
	}
	return true
}

// capInput returns at most maxCleanInput bytes of s, cut at whitespace.
func capInput(s string) string {
	if len(s) <= maxCleanInput {
		return s
	}
	s = s[:maxCleanInput]
	if i := strings.LastIndexAny(s, " \t\r\n"); i >= 0 {
		return s[:i]
	}
	return ""
}

// stripControl drops invalid UTF-8 and format characters (zero-width and
// bidi controls, which can hide text) and turns other control characters
// into spaces. Dropping rather than spacing keeps a token whole, so a secret
// split by an invisible character is still recognised.
func stripControl(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || r < 0x20 || r == 0x7f || (r >= 0x80 && (unicode.IsControl(r) || unicode.Is(unicode.Cf, r))) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == utf8.RuneError && size <= 1:
			// invalid byte: drop
		case r == '\t' || r == '\n' || r == '\r' || r == '\v' || r == '\f' || r == 0x85:
			b.WriteByte(' ')
		case unicode.IsControl(r):
			// other C0/C1 controls: drop
		case unicode.Is(unicode.Cf, r) && r != 0x200d: // keep ZWJ (emoji sequences)
			// drop
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// isJWT reports whether a dotted token is a JWT (or JWS/JWE): its first
// segment is base64url of a JSON object ("eyJ…" or "ew…"), or its
// segments are long and mixed like random base64url.
func isJWT(m string) bool {
	m, _, _ = strings.Cut(m, "/")
	parts := strings.Split(m, ".")
	if len(parts) < 3 {
		return false
	}
	if len(parts[0]) >= 10 && (strings.HasPrefix(parts[0], "ey") || strings.HasPrefix(parts[0], "ew")) {
		return true
	}
	long := 0
	for _, p := range parts {
		if len(p) >= 10 && hasDigit(p) {
			long++
		}
	}
	return long >= 2
}

// isHost reports whether a dotted token reads as a host name, possibly with
// a port and a path: an IPv4 address, or labels ending in an alphabetic
// top-level label followed by a port or a path, or ending in a common
// top-level domain.
func isHost(m string) bool {
	host, path, hasPath := strings.Cut(m, "/")
	name, _, hasPort := strings.Cut(host, ":")
	name = strings.TrimSuffix(name, ".")
	labels := strings.Split(name, ".")
	if isIPv4(labels) {
		return true
	}
	tld := labels[len(labels)-1]
	if len(tld) < 2 || !isAlpha(tld) {
		return false
	}
	for _, l := range labels {
		if l == "" || strings.Contains(l, "_") {
			return false // field paths may hold underscores; host names do not
		}
	}
	if hasPort || (hasPath && path != "") {
		return true
	}
	return bareHostTLDs[strings.ToLower(tld)] || strings.EqualFold(labels[0], "www")
}

func isIPv4(labels []string) bool {
	if len(labels) != 4 {
		return false
	}
	for _, l := range labels {
		if l == "" || len(l) > 3 || !isDigits(l) {
			return false
		}
	}
	return true
}

// isBlob reports whether a run of base64 alphabet characters of 32 or more
// is a key, token or hash rather than a word: digits, and all hex or mixed with
// digits (a real hash without a digit is vanishingly rare). Hex groups joined by dashes (a UUID) are an identifier worth
// keeping: a payment id helps the user more than it could help an attacker.
func isBlob(m string) bool {
	core := strings.TrimRight(m, "=")
	if len(core) < 32 {
		return false
	}
	hexOnly, dash, letter, digit := true, false, false, false
	for i := 0; i < len(core); i++ {
		c := core[i]
		switch {
		case c >= '0' && c <= '9':
			digit = true
		case c >= 'a' && c <= 'f', c >= 'A' && c <= 'F':
			letter = true
		case c >= 'g' && c <= 'z', c >= 'G' && c <= 'Z':
			letter, hexOnly = true, false
		case c == '-':
			dash = true
		default:
			hexOnly = false
		}
	}
	if !digit {
		return false // a long word, or a run of letters a–f, not a key
	}
	if hexOnly {
		return !dash || !isUUIDish(core)
	}
	return letter
}

// isUUIDish reports whether s is hex groups of at most 12 separated by dashes.
func isUUIDish(s string) bool {
	for _, g := range strings.Split(s, "-") {
		if g == "" || len(g) > 12 {
			return false
		}
	}
	return true
}

// hasLongRun reports whether s has 32 consecutive base64-alphabet bytes,
// the cheap test before running reBlob.
func hasLongRun(s string) bool {
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=' || c == '_' || c == '-' {
			n++
			if n >= 32 {
				return true
			}
		} else {
			n = 0
		}
	}
	return false
}

// truncateRunes cuts s to at most n runes, the last one an ellipsis.
func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for k := 0; k < n-1; k++ {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return strings.TrimRight(s[:i], " ") + "…"
}

func containsFold(s, sub string) bool {
	n := len(sub)
	for i := 0; i+n <= len(s); i++ {
		if strings.EqualFold(s[i:i+n], sub) {
			return true
		}
	}
	return false
}

func hasDigit(s string) bool { return strings.ContainsAny(s, "0123456789") }

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func isAlpha(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return s != ""
}
