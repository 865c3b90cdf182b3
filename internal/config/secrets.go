package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Key sizes.
const (
	// MinSessionKeyBytes is the shortest session key accepted: 32 bytes.
	MinSessionKeyBytes = 32
	// EncryptionKeyBytes is the size of redis.encryption_key: an AES-256 key.
	EncryptionKeyBytes = 32
	// MinAdminTokenChars is the shortest admin token accepted, in characters.
	MinAdminTokenChars = 16
	// maxAdminTokenFileBytes bounds the admin token file, so that a path
	// such as /dev/zero cannot make LoadAdminToken read forever.
	maxAdminTokenFileBytes = 4096
)

// LoadAdminToken returns the admin listener's bearer token: the content of
// admin_token_file with surrounding whitespace trimmed. It returns "", nil
// when admin_token_file is unset (the mutating admin endpoints are then
// off). It reads the file on every call, so calling it again picks up a
// rotated token. A token shorter than MinAdminTokenChars characters, or one
// holding anything but printable ASCII without spaces, is refused. Errors
// name admin_token_file and the path, never the content.
func (c *Config) LoadAdminToken() (Secret, error) {
	path := c.AdminTokenFile
	if path == "" {
		return "", nil
	}
	const key = "admin_token_file"
	f, err := os.Open(path)
	if err != nil {
		// *PathError names the path and the cause; it holds no content.
		return "", &Error{Key: key, Msg: err.Error()}
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxAdminTokenFileBytes+1))
	if err != nil {
		return "", &Error{Key: key, Msg: err.Error()} // a *PathError too
	}
	if len(b) > maxAdminTokenFileBytes {
		return "", &Error{Key: key, Msg: fmt.Sprintf("%s is larger than %d bytes", path, maxAdminTokenFileBytes)}
	}
	s := strings.TrimSpace(string(b))
	switch {
	case s == "":
		return "", &Error{Key: key, Msg: fmt.Sprintf("%s is empty", path)}
	case strings.IndexFunc(s, func(r rune) bool { return r <= ' ' || r >= 0x7f }) >= 0:
		return "", &Error{Key: key, Msg: fmt.Sprintf("the token in %s must be printable ASCII with no spaces or line breaks (it is sent as Authorization: Bearer)", path)}
	case len(s) < MinAdminTokenChars:
		return "", &Error{Key: key, Msg: fmt.Sprintf("the token in %s is shorter than %d characters", path, MinAdminTokenChars)}
	}
	return Secret(s), nil
}

// LoadClientSecret returns the upstream client secret: the content of
// client_secret_file, trimmed of its trailing newline, when that is set, else
// client_secret. It reads the file on every call, so calling it again on
// SIGHUP picks up a rotated secret. Errors name the file, never its content.
func (u Upstream) LoadClientSecret() (Secret, error) {
	if u.ClientSecretFile == "" {
		if u.ClientSecret == "" {
			return "", &Error{Key: "upstream.client_secret", Msg: "required: set client_secret or client_secret_file"}
		}
		return u.ClientSecret, nil
	}
	b, err := os.ReadFile(u.ClientSecretFile)
	if err != nil {
		// *PathError names the path and the cause; it holds no content.
		return "", &Error{Key: "upstream.client_secret_file", Msg: err.Error()}
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", &Error{Key: "upstream.client_secret_file", Msg: fmt.Sprintf("%s is empty", u.ClientSecretFile)}
	}
	return Secret(s), nil
}

// DecodedKeys decodes session.keys, newest first. Each key is base64 (the
// standard or the URL alphabet, padded or not) of at least
// MinSessionKeyBytes bytes. It returns an empty slice when there are none.
func (s Session) DecodedKeys() ([][]byte, error) {
	out := make([][]byte, 0, len(s.Keys))
	for i, k := range s.Keys {
		b, err := decodeSessionKey(i, k)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

func decodeSessionKey(i int, k Secret) ([]byte, error) {
	key := fmt.Sprintf("session.keys[%d]", i)
	b, err := decodeBase64(k)
	if err != nil {
		return nil, &Error{Key: key, Msg: "not valid base64"}
	}
	if len(b) < MinSessionKeyBytes {
		return nil, &Error{Key: key, Msg: fmt.Sprintf("decodes to %d bytes, want at least %d", len(b), MinSessionKeyBytes)}
	}
	return b, nil
}

// DecodedEncryptionKey decodes redis.encryption_key: base64 (either
// alphabet, padded or not) of exactly EncryptionKeyBytes bytes. It returns
// nil, nil when the key is empty.
func (r Redis) DecodedEncryptionKey() ([]byte, error) {
	if r.EncryptionKey == "" {
		return nil, nil
	}
	return decodeEncryptionKey("redis.encryption_key", r.EncryptionKey)
}

// DecodedDecryptionKeys decodes redis.decryption_keys, each like
// redis.encryption_key. It returns an empty slice when there are none.
func (r Redis) DecodedDecryptionKeys() ([][]byte, error) {
	out := make([][]byte, 0, len(r.DecryptionKeys))
	for i, k := range r.DecryptionKeys {
		b, err := decodeEncryptionKey(fmt.Sprintf("redis.decryption_keys[%d]", i), k)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

func decodeEncryptionKey(key string, s Secret) ([]byte, error) {
	b, err := decodeBase64(s)
	if err != nil {
		return nil, &Error{Key: key, Msg: "not valid base64"}
	}
	if len(b) != EncryptionKeyBytes {
		return nil, &Error{Key: key, Msg: fmt.Sprintf("decodes to %d bytes, want exactly %d", len(b), EncryptionKeyBytes)}
	}
	return b, nil
}

// InProcessStore reports whether no Redis is configured: an empty url, no
// Sentinel and no Cluster. The in-process store serves one instance only.
func (r Redis) InProcessStore() bool {
	return r.URL == "" && r.Sentinel.Master == "" && len(r.Sentinel.Addrs) == 0 && len(r.ClusterAddrs) == 0
}

// decodeBase64 accepts the standard and the URL alphabet, with or without
// padding. Its error never holds the input.
func decodeBase64(s Secret) ([]byte, error) {
	v := strings.TrimRight(s.Reveal(), "=")
	if b, err := base64.RawStdEncoding.DecodeString(v); err == nil {
		return b, nil
	}
	if b, err := base64.RawURLEncoding.DecodeString(v); err == nil {
		return b, nil
	}
	return nil, errors.New("not valid base64")
}
