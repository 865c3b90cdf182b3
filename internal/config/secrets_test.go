package config

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestLoadClientSecret(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "client_secret")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(upstreamSecret + "\n")
	c := mustLoad(t, "", with(prodEnv(), map[string]string{"BFF_UPSTREAM_CLIENT_SECRET": "", "BFF_UPSTREAM_CLIENT_SECRET_FILE": file}))

	steps := []struct {
		name    string
		content string // written before the call; "-" removes the file
		want    string
		wantErr string
	}{
		{name: "initial", content: upstreamSecret + "\n", want: upstreamSecret},
		{name: "rotated", content: "rotated-" + upstreamSecret + "\r\n", want: "rotated-" + upstreamSecret},
		{name: "no newline", content: "third-" + upstreamSecret, want: "third-" + upstreamSecret},
		{name: "inner spaces kept", content: " a b \n\n", want: " a b "},
		{name: "emptied", content: "\n", wantErr: "upstream.client_secret_file: " + file + " is empty"},
		{name: "removed", content: "-", wantErr: "upstream.client_secret_file: open " + file + ": no such file or directory"},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if st.content == "-" {
				if err := os.Remove(file); err != nil {
					t.Fatal(err)
				}
			} else {
				write(st.content)
			}
			got, err := c.Upstream.LoadClientSecret()
			if st.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), st.wantErr) {
					t.Fatalf("got error %v, want %q", err, st.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want nil", err)
			}
			if got.Reveal() != st.want {
				t.Errorf("got %q, want %q", got.Reveal(), st.want)
			}
		})
	}

	t.Run("inline secret", func(t *testing.T) {
		got, err := Upstream{ClientSecret: upstreamSecret}.LoadClientSecret()
		if err != nil || got.Reveal() != upstreamSecret {
			t.Errorf("got %q, %v; want the inline secret, nil", got.Reveal(), err)
		}
	})
	t.Run("none", func(t *testing.T) {
		if _, err := (Upstream{}).LoadClientSecret(); err == nil {
			t.Error("got nil error, want one")
		}
	})
}

func TestLoadAdminToken(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "admin_token")
	tests := []struct {
		name    string
		content string // written to file before the call; "-" removes it
		want    string
		wantErr string // the whole error message
	}{
		{name: "token", content: adminToken + "\n", want: adminToken},
		{name: "rotated", content: "rotated-" + adminToken, want: "rotated-" + adminToken},
		{name: "whitespace trimmed", content: " \t" + adminToken + "\r\n\n", want: adminToken},
		{name: "exactly 16", content: "0123456789abcdef\n", want: "0123456789abcdef"},
		{name: "base64 with padding", content: "c2VjcmV0LXRva2VuLTEyMzQ1Ng==\n", want: "c2VjcmV0LXRva2VuLTEyMzQ1Ng=="},
		{name: "15 characters", content: "0123456789abcde\n", wantErr: "config: admin_token_file: the token in " + file + " is shorter than 16 characters"},
		{name: "short once trimmed", content: "  0123456789abcde  \n", wantErr: "config: admin_token_file: the token in " + file + " is shorter than 16 characters"},
		{name: "empty", content: "", wantErr: "config: admin_token_file: " + file + " is empty"},
		{name: "only whitespace", content: " \n\t\r\n", wantErr: "config: admin_token_file: " + file + " is empty"},
		{name: "inner space", content: "admin-TOKEN 4e7f21a9b3\n", wantErr: "config: admin_token_file: the token in " + file + " must be printable ASCII with no spaces or line breaks (it is sent as Authorization: Bearer)"},
		{name: "two lines", content: adminToken + "\n" + adminToken + "\n", wantErr: "config: admin_token_file: the token in " + file + " must be printable ASCII with no spaces or line breaks (it is sent as Authorization: Bearer)"},
		{name: "non-ASCII", content: "admin-TOKEN-4e7f21a9b3\u00e9\n", wantErr: "config: admin_token_file: the token in " + file + " must be printable ASCII with no spaces or line breaks (it is sent as Authorization: Bearer)"},
		{name: "too large", content: strings.Repeat("a", 4097), wantErr: "config: admin_token_file: " + file + " is larger than 4096 bytes"},
		{name: "removed", content: "-", wantErr: "config: admin_token_file: open " + file + ": no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.content == "-" {
				if err := os.Remove(file); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(file, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			c := &Config{AdminTokenFile: file}
			got, err := c.LoadAdminToken()
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("got error %v, want %q", err, tt.wantErr)
				}
				if content := strings.TrimSpace(tt.content); content != "" && content != "-" && strings.Contains(strings.ReplaceAll(err.Error(), file, ""), content[:min(8, len(content))]) {
					t.Errorf("got %q, which holds the file's content", err)
				}
				var ce *Error
				if !errors.As(err, &ce) || ce.Key != "admin_token_file" {
					t.Errorf("got %#v, want an *Error with Key admin_token_file", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want nil", err)
			}
			if got.Reveal() != tt.want {
				t.Errorf("got %q, want %q", got.Reveal(), tt.want)
			}
		})
	}

	t.Run("unset", func(t *testing.T) {
		got, err := (&Config{}).LoadAdminToken()
		if got != "" || err != nil {
			t.Errorf("got %q, %v; want \"\", nil", got.Reveal(), err)
		}
	})
	t.Run("directory", func(t *testing.T) {
		_, err := (&Config{AdminTokenFile: dir}).LoadAdminToken()
		if want := "config: admin_token_file: read " + dir + ": is a directory"; err == nil || err.Error() != want {
			t.Errorf("got %v, want %q", err, want)
		}
	})
	t.Run("endless file", func(t *testing.T) {
		_, err := (&Config{AdminTokenFile: "/dev/zero"}).LoadAdminToken()
		if want := "config: admin_token_file: /dev/zero is larger than 4096 bytes"; err == nil || err.Error() != want {
			t.Errorf("got %v, want %q", err, want)
		}
	})
	t.Run("loaded config", func(t *testing.T) {
		path := writeFile(t, "token", adminToken+"\n")
		c := mustLoad(t, "", with(prodEnv(), map[string]string{"BFF_ADMIN_TOKEN_FILE": path}))
		if c.AdminTokenFile != path {
			t.Errorf("admin_token_file: got %q, want %q", c.AdminTokenFile, path)
		}
		got, err := c.LoadAdminToken()
		if err != nil || got.Reveal() != adminToken {
			t.Errorf("got %v; want the file's token, nil", err)
		}
	})
}

func TestDecodedKeys(t *testing.T) {
	raw := []byte("0123456789abcdefghijklmnopqrstuv\xff\xfe") // 34 bytes; \xff makes + and / differ from - and _
	tests := []struct {
		name    string
		keys    []Secret
		want    [][]byte
		wantErr string
	}{
		{"none", nil, [][]byte{}, ""},
		{"std padded", []Secret{Secret(base64.StdEncoding.EncodeToString(raw))}, [][]byte{raw}, ""},
		{"std raw", []Secret{Secret(base64.RawStdEncoding.EncodeToString(raw))}, [][]byte{raw}, ""},
		{"url padded", []Secret{Secret(base64.URLEncoding.EncodeToString(raw))}, [][]byte{raw}, ""},
		{"url raw", []Secret{Secret(base64.RawURLEncoding.EncodeToString(raw))}, [][]byte{raw}, ""},
		{"newest first", []Secret{Secret(sessionKey), Secret(sessionKeyOld)}, [][]byte{[]byte("session-KEY-0123456789abcdefghijk"), []byte("old-session-KEY-0123456789abcdefgh")}, ""},
		{"exactly 32", []Secret{Secret(base64.StdEncoding.EncodeToString(raw[:32]))}, [][]byte{raw[:32]}, ""},
		{"31 bytes", []Secret{Secret(sessionKey), Secret(base64.StdEncoding.EncodeToString(raw[:31]))}, nil, "config: session.keys[1]: decodes to 31 bytes, want at least 32"},
		{"not base64", []Secret{Secret(sessionKey + "*")}, nil, "config: session.keys[0]: not valid base64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Session{Keys: tt.keys}.DecodedKeys()
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("got error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want nil", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDecodedEncryptionKey(t *testing.T) {
	raw := []byte("0123456789abcdefghijklmnopqrst\xff\xfe")
	tests := []struct {
		name    string
		key     Secret
		want    []byte
		wantErr string
	}{
		{"empty", "", nil, ""},
		{"std", Secret(base64.StdEncoding.EncodeToString(raw)), raw, ""},
		{"url raw", Secret(base64.RawURLEncoding.EncodeToString(raw)), raw, ""},
		{"short", Secret(base64.StdEncoding.EncodeToString(raw[:16])), nil, "config: redis.encryption_key: decodes to 16 bytes, want exactly 32"},
		{"bad", "not base64!", nil, "config: redis.encryption_key: not valid base64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Redis{EncryptionKey: tt.key}.DecodedEncryptionKey()
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("got error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !bytes.Equal(got, tt.want) || (tt.want == nil) != (got == nil) {
				t.Errorf("got %q, %v; want %q, nil", got, err, tt.want)
			}
		})
	}
}

func TestInProcessStore(t *testing.T) {
	tests := []struct {
		name  string
		redis Redis
		want  bool
	}{
		{"nothing", Redis{}, true},
		{"empty lists", Redis{ClusterAddrs: []string{}, Sentinel: Sentinel{Addrs: []string{}}}, true},
		{"url", Redis{URL: "redis://x:6379"}, false},
		{"sentinel", Redis{Sentinel: Sentinel{Master: "m", Addrs: []string{"s:26379"}}}, false},
		{"cluster", Redis{ClusterAddrs: []string{"c:6379"}}, false},
		{"defaults", Defaults().Redis, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.redis.InProcessStore(); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestSecretsNeverPrinted loads configurations that fail for every reason a
// secret could be involved in, and prints a loaded one every way it can be
// printed, and checks no secret value appears.
func TestSecretsNeverPrinted(t *testing.T) {
	secretFile := writeFile(t, "secret", "file-"+upstreamSecret+"\n")
	tokenFile := writeFile(t, "admin_token", adminToken+"\n")
	badTokenFile := writeFile(t, "bad_admin_token", adminToken+" "+adminToken+"\n")
	shortTokenFile := writeFile(t, "short_admin_token", shortAdminToken+"\n")
	all := with(prodEnv(), map[string]string{
		"BFF_REDIS_URL":      "",
		"BFF_REDIS_SENTINEL": "{master: m, addrs: [s:26379], password: " + sentinelSecret + "}",
	})
	failing := []map[string]string{
		{"BFF_REDIS_URL": "http://:" + redisPassword + "@redis:6379"},
		{"BFF_REDIS_URL": "redis://:" + redisPassword + "%zz@redis:6379"},
		{"BFF_REDIS_URL": "redis://:" + redisPassword + "@redis:6379", "BFF_REDIS_CLUSTER_ADDRS": "[c:1]"},
		{"BFF_REDIS_URL": redisPassword},
		{"BFF_REDIS_ENCRYPTION_KEY": encryptionKey + "AAAA"},
		{"BFF_REDIS_ENCRYPTION_KEY": "*" + encryptionKey},
		{"BFF_REDIS_DECRYPTION_KEYS": "[" + decryptionKey + "AAAA]"},
		{"BFF_REDIS_DECRYPTION_KEYS": "['*" + decryptionKey + "']"},
		{"BFF_REDIS_DECRYPTION_KEYS": "[" + decryptionKey},
		{"BFF_SESSION_KEYS": "[" + sessionKey + "*]"},
		{"BFF_SESSION_KEYS": "[" + sessionKey[:20] + "]"},
		{"BFF_SESSION_KEYS": "[" + sessionKey + ", [" + sessionKeyOld + "]]"},
		{"BFF_SESSION_KEYS": "[" + sessionKey + ", {" + sessionKeyOld + ": 1}]"},
		{"BFF_SESSION_KEYS": "[" + sessionKey + ", " + sessionKeyOld},
		{"BFF_UPSTREAM_CLIENT_SECRET_FILE": secretFile},
		{"BFF_UPSTREAM_CLIENT_SECRET": "", "BFF_UPSTREAM_CLIENT_SECRET_FILE": secretFile, "BFF_ENV": "bogus"},
		{"BFF_AUTH_OIDC_CLIENT_SECRET": oidcSecret, "BFF_AUTH_OIDC_ISSUER": "nope"},
		{"BFF_REDIS_SENTINEL": "{master: m, addrs: [s], password: " + sentinelSecret + "}"},
		{"BFF_REDIS_SENTINEL": "{master: m, addrs: [s:1], password: [" + sentinelSecret + "]}"},
		{"BFF_REDIS_SENTINEL": "{master: m, addrs: [s:1], password: " + sentinelSecret},
		{"BFF_ADMIN_TOKEN_FILE": badTokenFile},
		{"BFF_ADMIN_TOKEN_FILE": shortTokenFile},
		{"BFF_ADMIN_TOKEN_FILE": tokenFile, "BFF_ENV": "bogus"},
	}
	for i, env := range failing {
		t.Run(fmt.Sprintf("error %d", i), func(t *testing.T) {
			_, err := load(t, "", with(all, env))
			if err == nil {
				t.Fatal("got nil error, want one")
			}
			checkNoSecret(t, "error", err.Error())
		})
	}

	t.Run("file", func(t *testing.T) {
		yaml := "upstream:\n  client_secret: " + upstreamSecret + "\n  client_secret_file: /x\nredis:\n  url: redis://:" + redisPassword + "@h:1\n  encryption_key: '" + encryptionKey + "x'\n"
		_, err := load(t, yaml, prodEnv())
		if err == nil {
			t.Fatal("got nil error, want one")
		}
		checkNoSecret(t, "error", err.Error())
	})

	c := mustLoad(t, "", with(all, map[string]string{"BFF_UPSTREAM_CLIENT_SECRET": "", "BFF_UPSTREAM_CLIENT_SECRET_FILE": secretFile, "BFF_ADMIN_TOKEN_FILE": tokenFile}))
	secret, err := c.Upstream.LoadClientSecret()
	if err != nil || secret.Reveal() != "file-"+upstreamSecret {
		t.Fatalf("LoadClientSecret: got %v, want the file's secret", err)
	}
	token, err := c.LoadAdminToken()
	if err != nil || token.Reveal() != adminToken {
		t.Fatalf("LoadAdminToken: got %v, want the file's token", err)
	}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "config", c, "secret", secret, "token", token)
	outputs := map[string]string{
		"Dump":  c.Dump(),
		"%v":    fmt.Sprintf("%v", c),
		"%+v":   fmt.Sprintf("%+v", c),
		"%#v":   fmt.Sprintf("%#v", c),
		"token": fmt.Sprintf("%v %s %+v %#v %q", token, token, token, token, token),
		"slog":  logged.String(),
	}
	for name, out := range outputs {
		t.Run(name, func(t *testing.T) { checkNoSecret(t, name, out) })
	}
	t.Run("Dump shows which secrets are set", func(t *testing.T) {
		d := c.Dump()
		for _, want := range []string{"admin_token_file: " + tokenFile, "client_secret: \"\"", "client_secret_file: " + secretFile, "password: REDACTED", "encryption_key: REDACTED", "decryption_keys: [REDACTED]", "keys: [REDACTED, REDACTED]"} {
			if !strings.Contains(d, want) {
				t.Errorf("got Dump\n%s\nwant it to contain %q", d, want)
			}
		}
	})
}

// shortAdminToken is an admin token too short to be accepted; it must not
// be printed either.
const shortAdminToken = "adm-SHORT-9z"

func checkNoSecret(t *testing.T, what, s string) {
	t.Helper()
	for _, v := range append(secretValues(), "file-"+upstreamSecret, sessionKey[:20], shortAdminToken) {
		if strings.Contains(s, v) {
			t.Errorf("%s holds a secret value: %s", what, s)
		}
	}
}

// TestDumpLoadsAgain checks that Dump's output, when it holds no secret,
// loads back into the same configuration.
func TestDumpLoadsAgain(t *testing.T) {
	env := with(devEnv(), map[string]string{
		"BFF_UPSTREAM_CLIENT_SECRET":  "",
		"BFF_TRUSTED_PROXIES":         `["10.0.0.0/8"]`,
		"BFF_LOG_LEVEL":               "debug",
		"BFF_UPSTREAM_RETRY":          "{max_attempts: 4, base_delay: 150ms, max_delay: 90s}",
		"BFF_UPSTREAM_REFRESH_BEFORE": "1m30s",
		"BFF_REDIS_KEY_PREFIX":        "true",
		"BFF_CORS_ALLOWED_ORIGINS":    `["https://web.example.com"]`,
	})
	env["BFF_UPSTREAM_CLIENT_SECRET_FILE"] = writeFile(t, "secret", upstreamSecret)
	c := mustLoad(t, "redis: {url: \"\"}\n", env)
	again := mustLoad(t, c.Dump(), nil)
	if !reflect.DeepEqual(again, c) {
		t.Errorf("got\n%s\nafter a round trip, want\n%s", again.Dump(), c.Dump())
	}
}
