package tokens_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/tokens"
)

const testSecret = "s3cr3t-client-secret-value"

func jwtWithExp(exp int64) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc([]byte(fmt.Sprintf(`{"sub":"u","exp":%d}`, exp))) + ".c2ln"
}

func TestMinterRequestAndExpiry(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	cases := []struct {
		name  string
		unit  time.Duration
		reply string
		want  time.Time
	}{
		{"expiresIn in seconds", time.Second, `{"accessToken":"opaque","tokenType":"Bearer","expiresIn":86400}`, now.Add(24 * time.Hour)},
		{"expiresIn in milliseconds", time.Millisecond, `{"accessToken":"opaque","tokenType":"Bearer","expiresIn":90000}`, now.Add(90 * time.Second)},
		{"JWT exp wins over expiresIn", time.Second, fmt.Sprintf(`{"accessToken":%q,"tokenType":"Bearer","expiresIn":86400}`, jwtWithExp(now.Unix()+600)), now.Add(600 * time.Second)},
		{"no expiresIn: already expired", time.Second, `{"accessToken":"opaque","tokenType":"Bearer"}`, now},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got map[string]string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodPost || r.URL.Path != "/base/oauth/token" || r.Header.Get("Content-Type") != "application/json" {
					t.Errorf("got %s %s %q, want POST /base/oauth/token application/json", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
				}
				if r.Header.Get("Authorization") != "" {
					t.Error("the token request carries an Authorization header")
				}
				_ = json.NewDecoder(r.Body).Decode(&got)
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(tc.reply))
			}))
			defer srv.Close()
			m := tokens.NewMinter(tokens.MinterOptions{
				BaseURL: srv.URL + "/base/", ClientID: "cid", Secret: fixedSecret(t, testSecret),
				ExpiresInUnit: tc.unit, Now: func() time.Time { return now },
			})
			tok, err := m.Token(context.Background(), "user-1")
			if err != nil {
				t.Fatal(err)
			}
			if got["clientId"] != "cid" || got["clientSecret"] != testSecret || got["userId"] != "user-1" {
				t.Fatalf("got request %v, want clientId, clientSecret and userId", got)
			}
			if !tok.Expiry.Equal(tc.want) {
				t.Fatalf("got expiry %v, want %v", tok.Expiry, tc.want)
			}
		})
	}
}

func TestMinterFailures(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		want   tokens.Kind
	}{
		{"401 message shape", 401, `{"message":"Unauthorized"}`, tokens.KindAuth},
		{"401 typed shape", 401, `{"type":"CLIENT_ERROR","message":"{\"error\":\"access_denied\",\"error_description\":\"Unauthorized\"}"}`, tokens.KindAuth},
		{"400 validation", 400, `{"type":"VALIDATION_ERROR","message":"[\"\\\"userId\\\" is required\"]"}`, tokens.KindRejected},
		{"500", 500, `{"type":"INTERNAL_ERROR","message":"SERVER_ERROR"}`, tokens.KindUpstream},
		{"200 garbage", 200, `<html>`, tokens.KindUpstream},
		{"200 without token", 200, `{"tokenType":"Bearer"}`, tokens.KindUpstream},
		{"200 wrong token type", 200, `{"accessToken":"x","tokenType":"MAC","expiresIn":10}`, tokens.KindUpstream},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			m := tokens.NewMinter(tokens.MinterOptions{BaseURL: srv.URL, ClientID: "cid", Secret: fixedSecret(t, testSecret)})
			_, err := m.Token(context.Background(), "u")
			var me *tokens.MintError
			if !errors.As(err, &me) || me.Kind != tc.want {
				t.Fatalf("got %v, want a MintError of kind %v", err, tc.want)
			}
			if strings.Contains(err.Error(), testSecret) || strings.Contains(err.Error(), srv.URL) {
				t.Fatalf("error text leaks the secret or the URL: %v", err)
			}
		})
	}
}

func TestMinterTransportFailures(t *testing.T) {
	t.Run("unreachable", func(t *testing.T) {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		addr := ln.Addr().String()
		ln.Close()
		m := tokens.NewMinter(tokens.MinterOptions{BaseURL: "http://" + addr, ClientID: "c", Secret: fixedSecret(t, testSecret)})
		_, err := m.Token(context.Background(), "u")
		var me *tokens.MintError
		if !errors.As(err, &me) || me.Kind != tokens.KindUnreachable {
			t.Fatalf("got %v, want KindUnreachable", err)
		}
		if strings.Contains(err.Error(), addr) {
			t.Fatalf("error names the upstream address: %v", err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
		defer srv.Close()
		defer close(release)
		m := tokens.NewMinter(tokens.MinterOptions{
			BaseURL: srv.URL, ClientID: "c", Secret: fixedSecret(t, testSecret),
			Client: &http.Client{Timeout: 50 * time.Millisecond},
		})
		_, err := m.Token(context.Background(), "u")
		var me *tokens.MintError
		if !errors.As(err, &me) || me.Kind != tokens.KindTimeout {
			t.Fatalf("got %v, want KindTimeout", err)
		}
	})
}
