package login

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// Bounds on what an unauthenticated login start makes the BFF store (the
// pending login, for StateTTL): a returnTo path and a native app's state.
const (
	// maxReturnTo bounds a returnTo path, in bytes.
	maxReturnTo = 512
	// maxAppState bounds a native app's state, in bytes: ample for the
	// random value RFC 6749 (10.12) asks for.
	maxAppState = 128
)

// CheckReturnTo accepts only a same-origin relative path ("/", "/a/b?c=d#e")
// and returns it; anything that a browser could resolve to another origin
// (a scheme, "//host", "/\host", backslashes, control characters, or their
// percent-encoded forms) is ErrBadRequest: no open redirect. Empty is "/".
// It is at most maxReturnTo (512) bytes long.
//
// The path (before any "?" or "#") must also resolve to itself: it may not
// hold, raw or after percent-decoding, a "." or ".." segment, an empty
// segment ("//" anywhere), a backslash, or an encoded "/", "\" or "."
// (%2F, %5C, %2E, any case, or encoded twice). A browser removes dot
// segments, so "/.//evil.example" and "/%2e//evil.example" would become
// "//evil.example". The query and fragment are not resolved and keep only
// the checks above.
func CheckReturnTo(s string) (string, error) {
	if s == "" {
		return "/", nil
	}
	bad := func(why string) (string, error) { return "", badRequest("returnTo %s", why) }
	if len(s) > maxReturnTo {
		return bad(fmt.Sprintf("is longer than %d bytes", maxReturnTo))
	}
	if s[0] != '/' {
		return bad("must be a relative path starting with /")
	}
	// Check the raw form and the decoded form: browsers decode some escapes
	// before resolving ("/%2F%2Fevil.example" would become "//evil.example").
	dec, err := url.PathUnescape(s)
	if err != nil {
		return bad("is not validly percent-encoded")
	}
	for _, v := range []string{s, dec} {
		if len(v) > 1 && (v[1] == '/' || v[1] == '\\') {
			return bad("must not start with // or /\\")
		}
		for _, r := range v {
			if r < 0x20 || r == 0x7f || r == '\\' {
				return bad("holds a control character or a backslash")
			}
		}
	}
	path := s
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	decPath, err := url.PathUnescape(path)
	if err != nil {
		return bad("is not validly percent-encoded")
	}
	for _, v := range []string{path, decPath} {
		if strings.Contains(v, "//") {
			return bad("must not hold // in its path")
		}
		if hasEncodedSeparator(v) {
			return bad("must not hold an encoded /, \\ or . in its path")
		}
		for _, seg := range strings.Split(v, "/") {
			if seg == "." || seg == ".." {
				return bad("must not hold a . or .. segment in its path")
			}
		}
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return bad("must be a path on this origin")
	}
	return s, nil
}

// hasEncodedSeparator reports whether s holds %2F, %5C or %2E, any case.
func hasEncodedSeparator(s string) bool {
	l := strings.ToLower(s)
	return strings.Contains(l, "%2f") || strings.Contains(l, "%5c") || strings.Contains(l, "%2e")
}

// CheckAppState accepts a native app's state, echoed back to it with its
// code: empty (none), or at most maxAppState (128) characters of RFC 6749's
// VSCHAR set (appendix A.5: printable ASCII, %x20-7E). Anything else is
// ErrBadRequest.
func CheckAppState(s string) error {
	if len(s) > maxAppState {
		return badRequest("state is longer than %d characters", maxAppState)
	}
	for i := range len(s) {
		if s[i] < 0x20 || s[i] > 0x7e {
			return badRequest("state holds a character outside printable ASCII (RFC 6749 VSCHAR, %%x20-7E)")
		}
	}
	return nil
}

// CheckRedirectURI accepts a native app's redirect_uri only when it is
// exactly one of the allowed URIs (RFC 8252: exact match, no patterns).
func CheckRedirectURI(s string, allowed []string) error {
	if s == "" || !slices.Contains(allowed, s) {
		return badRequest("redirect_uri is not registered")
	}
	return nil
}

// CheckCodeChallenge accepts an S256 PKCE challenge: 43 characters of
// base64url (RFC 7636, 4.2). Only S256 is accepted; "plain" is refused.
func CheckCodeChallenge(challenge, method string) error {
	if method != "" && method != "S256" {
		return badRequest("code_challenge_method must be S256")
	}
	if len(challenge) != 43 || strings.IndexFunc(challenge, notB64URL) >= 0 {
		return badRequest("code_challenge must be an S256 challenge (43 base64url characters)")
	}
	return nil
}

func notB64URL(r rune) bool {
	return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
}

// validVerifier: 43 to 128 unreserved characters (RFC 7636, 4.1).
func validVerifier(v string) bool {
	if len(v) < 43 || len(v) > 128 {
		return false
	}
	return strings.IndexFunc(v, func(r rune) bool {
		return notB64URL(r) && r != '.' && r != '~'
	}) < 0
}
