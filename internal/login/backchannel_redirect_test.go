package login

import (
	"context"
	"crypto/elliptic"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// elsewhere records what reaches another host.
type elsewhere struct {
	srv  *httptest.Server
	mu   sync.Mutex
	hits []string
}

func newElsewhere(t *testing.T) *elsewhere {
	e := &elsewhere{}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		e.mu.Lock()
		e.hits = append(e.hits, r.Method+" "+r.URL.Path+" "+r.PostForm.Encode()+" dpop="+r.Header.Get("DPoP"))
		e.mu.Unlock()
		// A GET answered like a token or PAR response.
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"request_uri":"urn:evil","token_type":"DPoP","id_token":"x"}`))
	}))
	t.Cleanup(e.srv.Close)
	return e
}

// A back-channel request is never sent on to where a redirect points: a
// 307 or 308 would resend the form (the client assertion, the code and its
// verifier) and the DPoP proof to another host, which could redeem them at
// the provider within their minute; a 302 or 303 would read another
// host's answer as the provider's.
func TestBackChannelFollowsNoRedirect(t *testing.T) {
	keys, _ := ParseClientKeys(privateJWKS(t, ecKey(t, elliptic.P256())), "")
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect, http.StatusFound, http.StatusSeeOther} {
		evil := newElsewhere(t)

		// At the token endpoint.
		op := newFAPIOP(t, keys.PublicJWKS())
		op.meta["token_endpoint"] = op.srv.URL + "/token-moved"
		op.mux.HandleFunc("/token-moved", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, evil.srv.URL+"/token", status)
		})
		p, err := newFAPI2(t, op, keys)
		if err != nil {
			t.Fatal(err)
		}
		if err := fapi2Login(t, p, op); err == nil {
			t.Errorf("%d at the token endpoint: the login succeeded", status)
		}

		// At the PAR endpoint.
		op2 := newFAPIOP(t, keys.PublicJWKS())
		op2.meta["pushed_authorization_request_endpoint"] = op2.srv.URL + "/par-moved"
		op2.mux.HandleFunc("/par-moved", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, evil.srv.URL+"/par", status)
		})
		p2, err := newFAPI2(t, op2, keys)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := p2.Begin(context.Background(), "/", nil); err == nil {
			t.Errorf("%d at the PAR endpoint: Begin succeeded", status)
		}

		evil.mu.Lock()
		if len(evil.hits) > 0 {
			t.Errorf("%d: the back channel followed the redirect to another host: %q", status, evil.hits)
		}
		evil.mu.Unlock()
	}
}
