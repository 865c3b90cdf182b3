// Package idempotency makes money-moving requests safe to retry: the first
// request under an Idempotency-Key runs, its final response is kept (per
// user and key, 24 hours, encrypted), and a retry with the same key and
// body gets that response again instead of moving money twice.
//
// The package is plain Go: no HTTP framework. The proxy calls Begin before
// forwarding and Finish or Release after.
package idempotency

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/seal"
)

// Retention is how long a final response is kept for replay.
const Retention = 24 * time.Hour

// MaxKeyLen bounds an Idempotency-Key.
const MaxKeyLen = 255

// Outcomes of Begin other than "go ahead".
var (
	// ErrInProgress: the same key is being processed right now.
	ErrInProgress = errors.New("idempotency: a request with this key is in progress")
	// ErrKeyReused: the key was used with a different request.
	ErrKeyReused = errors.New("idempotency: the key was used for a different request")
	// ErrInvalidKey: the key is empty, too long or not printable ASCII.
	ErrInvalidKey = errors.New("idempotency: the key must be 1 to 255 printable ASCII characters")
)

// Store is what idempotency needs of the shared store.
type Store interface {
	Get(ctx context.Context, key string) ([]byte, error)
	Set(ctx context.Context, key string, value []byte, ttl time.Duration) error
	SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error)
	DelIf(ctx context.Context, key string, prefix []byte) (bool, error)
}

var (
	_ Store = (*kv.Redis)(nil)
	_ Store = (*kv.Memory)(nil)
)

// Response is a stored final response.
type Response struct {
	Status int         `json:"s"`
	Header http.Header `json:"h"`
	Body   []byte      `json:"b"`
}

// record is what the store holds under a key: in progress (no Response) or
// done. The fingerprint identifies the request the key was first used for.
type record struct {
	Fingerprint string    `json:"f"`
	Owner       string    `json:"o,omitempty"` // the in-progress claim's fencing value
	Response    *Response `json:"r,omitempty"`
}

// Keeper runs the protocol. Safe for concurrent use.
type Keeper struct {
	store   Store
	box     *seal.Box
	pending time.Duration
}

// New returns a Keeper. encryptionKey (32 bytes) seals stored responses:
// they hold payment data; records sealed under one of decryptionKeys still
// open, so a retry keeps its stored answer across a key rotation. pending
// bounds how long an in-progress claim lives should its instance die (the
// longest a request may take).
func New(store Store, encryptionKey []byte, decryptionKeys [][]byte, pending time.Duration) (*Keeper, error) {
	box, err := seal.Derive(encryptionKey, "bff idempotency records", decryptionKeys...)
	if err != nil {
		return nil, fmt.Errorf("idempotency: %w", err)
	}
	return &Keeper{store: store, box: box, pending: pending}, nil
}

// Fingerprint identifies a request: method, path, query and body.
func Fingerprint(method, path, query string, body []byte) string {
	h := sha256.New()
	for _, s := range []string{method, path, query} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	h.Write(body)
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// ValidKey reports whether an Idempotency-Key is acceptable.
func ValidKey(k string) bool {
	if len(k) == 0 || len(k) > MaxKeyLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// Claim is a started request; pass it to Finish or Release.
type Claim struct {
	key, fp, owner string
}

// Begin claims key for the user's request with fingerprint fp. It returns
// a claim (go ahead and forward), or a stored response to replay, or
// ErrInProgress / ErrKeyReused / ErrInvalidKey.
func (k *Keeper) Begin(ctx context.Context, userID, idemKey, fp string) (*Claim, *Response, error) {
	if !ValidKey(idemKey) {
		return nil, nil, ErrInvalidKey
	}
	key := storeKey(userID, idemKey)
	owner := randomOwner()
	claim, err := k.seal(key, record{Fingerprint: fp, Owner: owner})
	if err != nil {
		return nil, nil, err
	}
	got, err := k.store.SetNX(ctx, key, claim, k.pending)
	if err != nil {
		return nil, nil, err
	}
	if got {
		return &Claim{key: key, fp: fp, owner: owner}, nil, nil
	}
	b, err := k.store.Get(ctx, key)
	if errors.Is(err, kv.ErrNotFound) { // released or expired just now
		return nil, nil, ErrInProgress
	}
	if err != nil {
		return nil, nil, err
	}
	rec, err := k.open(key, b)
	if err != nil {
		return nil, nil, err
	}
	if subtle.ConstantTimeCompare([]byte(rec.Fingerprint), []byte(fp)) != 1 {
		return nil, nil, ErrKeyReused
	}
	if rec.Response == nil {
		return nil, nil, ErrInProgress
	}
	return nil, rec.Response, nil
}

// Finish stores the final response for replay during Retention.
func (k *Keeper) Finish(ctx context.Context, c *Claim, resp Response) error {
	b, err := k.seal(c.key, record{Fingerprint: c.fp, Response: &resp})
	if err != nil {
		return err
	}
	return k.store.Set(ctx, c.key, b, Retention)
}

// Release gives the key up (the request surely did not reach the upstream),
// so a retry with the same key runs again. It only removes its own claim.
func (k *Keeper) Release(ctx context.Context, c *Claim) error {
	_, err := k.store.DelIf(ctx, c.key, []byte(c.owner))
	return err
}

// storeKey scopes a key to its user; both are hashed.
func storeKey(userID, idemKey string) string {
	sum := sha256.Sum256([]byte(userID + "\x00" + idemKey))
	return "idem:" + base64.RawURLEncoding.EncodeToString(sum[:])
}

func randomOwner() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// seal stores records as owner | nonce | AES-GCM(record JSON), the store
// key as associated data. The owner prefix lets Release delete only its
// own in-progress claim (compare-and-delete on a prefix); done records
// have an empty owner.
func (k *Keeper) seal(key string, r record) ([]byte, error) {
	plain, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("idempotency: %w", err)
	}
	owner := r.Owner
	if owner == "" {
		owner = "----------------" // 16 characters, like an owner, never one
	}
	out := make([]byte, 0, len(owner)+len(plain)+k.box.Overhead())
	return k.box.Seal(append(out, owner...), plain, []byte(key)), nil
}

func (k *Keeper) open(key string, b []byte) (record, error) {
	const ownerLen = 16
	if len(b) < ownerLen {
		return record{}, errors.New("idempotency: short record")
	}
	plain, err := k.box.Open(nil, b[ownerLen:], []byte(key))
	if err != nil {
		return record{}, errors.New("idempotency: record does not decrypt under redis.encryption_key or redis.decryption_keys")
	}
	var r record
	if err := json.Unmarshal(plain, &r); err != nil {
		return record{}, errors.New("idempotency: unreadable record")
	}
	return r, nil
}
