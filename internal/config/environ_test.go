package config

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// environ turns a map of variables into os.Environ's form, sorted.
func environ(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

func TestCheckEnvironNames(t *testing.T) {
	var all []string
	for _, k := range envKeys() {
		all = append(all, k.name+"=x")
	}
	tests := []struct {
		name    string
		environ []string
		want    []string // each a whole error line; nil for no error
	}{
		{name: "none", environ: nil},
		{name: "every key's variable", environ: all},
		{name: "other variables", environ: []string{"PATH=/bin", "HOME=/root", "BFF=1", "XBFF_LISTEN=:1", "bff_listen=:1", "Bff_Listen=:1"}},
		{name: "misspelt leaf", environ: []string{"PATH=/bin", "BFF_UPSTREAM_TIMOUT=5s"},
			want: []string{"config: BFF_UPSTREAM_TIMOUT: names no configuration key (did you mean BFF_UPSTREAM_TIMEOUT?); every BFF_ variable must be a key's override (see docs/configuration.md)"}},
		{name: "empty value", environ: []string{"BFF_LISTENN="},
			want: []string{"config: BFF_LISTENN: names no configuration key (did you mean BFF_LISTEN?); every BFF_ variable must be a key's override (see docs/configuration.md)"}},
		{name: "no equals sign", environ: []string{"BFF_NOPE"},
			want: []string{"config: BFF_NOPE: names no configuration key; every BFF_ variable must be a key's override (see docs/configuration.md)"}},
		{name: "prefix alone", environ: []string{"BFF_=1"},
			want: []string{"config: BFF_: names no configuration key; every BFF_ variable must be a key's override (see docs/configuration.md)"}},
		{name: "field of a list entry", environ: []string{"BFF_UPSTREAM_ROUTES_PREFIX=/v2/x"},
			want: []string{"config: BFF_UPSTREAM_ROUTES_PREFIX: names no configuration key; every BFF_ variable must be a key's override (see docs/configuration.md)"}},
		{name: "lower-case key part", environ: []string{"BFF_listen=:1"},
			want: []string{"config: BFF_listen: names no configuration key (did you mean BFF_LISTEN?); every BFF_ variable must be a key's override (see docs/configuration.md)"}},
		{name: "the only longer name", environ: []string{"BFF_ADMIN_TOKEN=x"},
			want: []string{"config: BFF_ADMIN_TOKEN: names no configuration key (did you mean BFF_ADMIN_TOKEN_FILE?); every BFF_ variable must be a key's override (see docs/configuration.md)"}},
		{name: "kubernetes service port", environ: []string{"BFF_PORT=tcp://10.0.0.1:8080", "BFF_PORT_8080_TCP_ADDR=10.0.0.1"},
			want: []string{
				"config: BFF_PORT: names no configuration key (a Kubernetes service link for a Service named bff? set enableServiceLinks: false in the pod spec); every BFF_ variable must be a key's override (see docs/configuration.md)",
				"config: BFF_PORT_8080_TCP_ADDR: names no configuration key (a Kubernetes service link for a Service named bff? set enableServiceLinks: false in the pod spec); every BFF_ variable must be a key's override (see docs/configuration.md)",
			}},
		{name: "kubernetes service link", environ: []string{"BFF_SERVICE_HOST=10.0.0.1"},
			want: []string{"config: BFF_SERVICE_HOST: names no configuration key (a Kubernetes service link for a Service named bff? set enableServiceLinks: false in the pod spec); every BFF_ variable must be a key's override (see docs/configuration.md)"}},
		{name: "replaced key", environ: []string{"BFF_UPSTREAM_TOKEN_CACHE_ENTRIES=0"},
			want: []string{"config: BFF_UPSTREAM_TOKEN_CACHE_ENTRIES: overrides upstream.token_cache_entries, which was replaced by upstream.token_cache_bytes: the in-process token cache is bounded by memory, not by a count (default 134217728, 128 MiB; 0 still turns it off)"}},
		{name: "all reported, each once, in order", environ: []string{"BFF_LISTEN=:1", "BFF_B=1", "BFF_A=1", "BFF_B=2"},
			want: []string{
				"config: BFF_B: names no configuration key; every BFF_ variable must be a key's override (see docs/configuration.md)",
				"config: BFF_A: names no configuration key; every BFF_ variable must be a key's override (see docs/configuration.md)",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckEnvironNames(tt.environ)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("got error %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got nil error, want %q", tt.want)
			}
			if got := strings.Split(err.Error(), "\n"); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Env == "" || ce.Key != "" {
				t.Errorf("got %#v, want an *Error naming the variable", err)
			}
		})
	}

	t.Run("value never printed", func(t *testing.T) {
		err := CheckEnvironNames([]string{"BFF_UPSTREAM_CLIENT_SECRETT=" + upstreamSecret, "BFF_REDIS_URLL=redis://:" + redisPassword + "@h:1"})
		if err == nil {
			t.Fatal("got nil error, want one")
		}
		for _, name := range []string{"BFF_UPSTREAM_CLIENT_SECRETT", "BFF_REDIS_URLL"} {
			if !strings.Contains(err.Error(), name) {
				t.Errorf("got %q, want it to name %s", err, name)
			}
		}
		checkNoSecret(t, "error", err.Error())
	})
}

func TestLoadEnviron(t *testing.T) {
	t.Run("same as Load", func(t *testing.T) {
		env := with(prodEnv(), map[string]string{"BFF_UPSTREAM_TIMEOUT": "5s"})
		got, err := LoadEnviron("", append(environ(env), "PATH=/bin", "HOME=/root"))
		if err != nil {
			t.Fatalf("got error %v, want nil", err)
		}
		if want := mustLoad(t, "", env); !reflect.DeepEqual(got, want) {
			t.Errorf("got\n%s\nwant\n%s", got.Dump(), want.Dump())
		}
		// Values holding "=" (base64 padding) are kept whole.
		if got.Redis.EncryptionKey.Reveal() != encryptionKey {
			t.Errorf("redis.encryption_key: got a different value, want the one set")
		}
	})
	t.Run("file and environment", func(t *testing.T) {
		path := writeFile(t, "bff.yaml", "log_level: warn\nupstream:\n  timeout: 5s\n")
		c, err := LoadEnviron(path, environ(with(prodEnv(), map[string]string{"BFF_LOG_LEVEL": "debug"})))
		if err != nil {
			t.Fatalf("got error %v, want nil", err)
		}
		if c.LogLevel != "debug" || c.Upstream.Timeout != 5*time.Second {
			t.Errorf("got log_level %q, upstream.timeout %v; want debug, 5s", c.LogLevel, c.Upstream.Timeout)
		}
	})
	t.Run("first of two wins", func(t *testing.T) {
		c, err := LoadEnviron("", append(environ(prodEnv()), "BFF_LOG_LEVEL=warn", "BFF_LOG_LEVEL=debug"))
		if err != nil {
			t.Fatalf("got error %v, want nil", err)
		}
		if c.LogLevel != "warn" {
			t.Errorf("got %q, want warn", c.LogLevel)
		}
	})
	t.Run("unknown variable refused", func(t *testing.T) {
		_, err := LoadEnviron("", append(environ(prodEnv()), "BFF_UPSTREAM_TIMOUT=5s"))
		want := "config: BFF_UPSTREAM_TIMOUT: names no configuration key (did you mean BFF_UPSTREAM_TIMEOUT?)"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("got %v, want an error containing %q", err, want)
		}
		if strings.Contains(err.Error(), "5s") {
			t.Errorf("got %q, want the value left out", err)
		}
	})
	t.Run("validation still runs", func(t *testing.T) {
		_, err := LoadEnviron("", environ(with(prodEnv(), map[string]string{"BFF_LOG_LEVEL": "loud"})))
		want := `config: log_level (from BFF_LOG_LEVEL): "loud" is not one of debug, info, warn, error`
		if err == nil || err.Error() != want {
			t.Fatalf("got %v, want %q", err, want)
		}
	})
}
