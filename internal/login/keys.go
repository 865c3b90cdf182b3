package login

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"
)

// KeyRefetchInterval is the least time between two fetches of the
// provider's signing keys.
const KeyRefetchInterval = 30 * time.Second

// keyRetryAfterFailure is how soon a failed fetch may be tried again.
const keyRetryAfterFailure = 5 * time.Second

// maxKeySetBytes bounds the provider's key set document.
const maxKeySetBytes = 1 << 20

// signingAlgs are the algorithms go-oidc verifies (its supportedAlgorithms).
var signingAlgs = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.ES256, jose.ES384, jose.ES512, jose.PS256, jose.PS384, jose.PS512, jose.EdDSA}

// keySet is the provider's signing keys (its jwks_uri), an oidc.KeySet.
// It stands in for go-oidc's RemoteKeySet, which fetches the keys again
// for every token that fails to verify under the cached ones: unauthenticated
// callers (POST /auth/backchannel-logout needs no login) could then make
// the BFF fetch the provider's keys once per forged token. Here a fetch
// happens only for a key id the set does not hold (a rotation), at most
// once per KeyRefetchInterval, one at a time; a token signed with a known
// key id that does not verify is refused without a fetch.
type keySet struct {
	url     string
	client  *http.Client
	now     func() time.Time
	observe Observer

	mu       sync.Mutex
	keys     []jose.JSONWebKey
	last     time.Time     // start of the last fetch; zero: none yet
	inflight chan struct{} // closed when the running fetch ends
}

var _ oidc.KeySet = (*keySet)(nil)

// VerifySignature implements oidc.KeySet.
func (k *keySet) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	jws, err := jose.ParseSigned(jwt, signingAlgs)
	if err != nil {
		return nil, fmt.Errorf("malformed token: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("a token must carry exactly one signature")
	}
	kid := jws.Signatures[0].Header.KeyID
	keys, known := k.lookup(kid)
	if known {
		if payload, ok := verifyWith(jws, keys, kid); ok {
			return payload, nil
		}
		if kid != "" {
			// A key id held that does not verify: forged, never a reason
			// to fetch.
			return nil, errNotVerified
		}
		// A token without a key id that the held keys do not verify: the
		// provider may have replaced its only key, and only a fetch can
		// tell. Rate-limited as an unknown key id is.
	}
	keys, err = k.refresh(ctx, kid)
	if err != nil {
		return nil, err
	}
	if payload, ok := verifyWith(jws, keys, kid); ok {
		return payload, nil
	}
	return nil, errNotVerified
}

var errNotVerified = errors.New("the signature does not verify under the provider's keys")

// verifyWith verifies jws with the keys of id kid (every key when the
// token names none).
func verifyWith(jws *jose.JSONWebSignature, keys []jose.JSONWebKey, kid string) ([]byte, bool) {
	for _, key := range keys {
		if kid == "" || key.KeyID == kid {
			if payload, err := jws.Verify(&key); err == nil {
				return payload, true
			}
		}
	}
	return nil, false
}

// lookup returns the cached keys and whether they can judge kid: they
// hold it, or the token names no key and there are keys to try.
func (k *keySet) lookup(kid string) ([]jose.JSONWebKey, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys, holds(k.keys, kid)
}

func holds(keys []jose.JSONWebKey, kid string) bool {
	if kid == "" {
		return len(keys) > 0
	}
	for _, key := range keys {
		if key.KeyID == kid {
			return true
		}
	}
	return false
}

// refresh fetches the key set when kid is still unknown (a token naming
// no key: always a candidate) and the last fetch is at least
// KeyRefetchInterval old, joining a fetch in flight; otherwise it returns
// the keys it has (which then do not verify).
func (k *keySet) refresh(ctx context.Context, kid string) ([]jose.JSONWebKey, error) {
	k.mu.Lock()
	if kid != "" && holds(k.keys, kid) {
		defer k.mu.Unlock()
		return k.keys, nil
	}
	wait := k.inflight
	if wait == nil {
		if !k.last.IsZero() && k.now().Sub(k.last) < KeyRefetchInterval {
			defer k.mu.Unlock()
			return k.keys, nil
		}
		wait = make(chan struct{})
		k.inflight = wait
		k.last = k.now()
		go k.fetch(wait)
	}
	k.mu.Unlock()
	select {
	case <-wait:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys, nil
}

// fetch reads the key set, keeps it if it is well formed, and closes done.
// It runs detached from any caller (bounded by the client's timeout), so a
// caller that gives up does not waste the fetch for the others.
func (k *keySet) fetch(done chan struct{}) {
	keys, err := k.get()
	k.mu.Lock()
	if err == nil {
		k.keys = keys
	} else {
		k.last = k.now().Add(keyRetryAfterFailure - KeyRefetchInterval)
	}
	k.inflight = nil
	k.mu.Unlock()
	k.observe.KeysFetched()
	close(done)
}

func (k *keySet) get() ([]jose.JSONWebKey, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the provider's keys answered %d", resp.StatusCode)
	}
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxKeySetBytes)).Decode(&set); err != nil {
		return nil, fmt.Errorf("the provider's keys are unreadable: %w", err)
	}
	return set.Keys, nil
}
