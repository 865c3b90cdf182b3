package upstreamsim

import (
	crand "crypto/rand"
	"math/rand/v2"
	"strings"
	"time"
)

// crockford is the ULID alphabet (Crockford's base32).
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// ulidAt encodes a ULID: 48 bits of Unix milliseconds then 80 bits of
// entropy, 26 characters. Ids made this way sort by time, which the cursor
// paging relies on.
func ulidAt(t time.Time, entropy [10]byte) string {
	var out [26]byte
	ms := uint64(t.UnixMilli())
	for i := 9; i >= 0; i-- {
		out[i] = crockford[ms&31]
		ms >>= 5
	}
	var buf uint64
	bits, j := 0, 10
	for _, b := range entropy {
		buf = buf<<8 | uint64(b)
		bits += 8
		for bits >= 5 {
			bits -= 5
			out[j] = crockford[(buf>>bits)&31]
			j++
		}
	}
	return string(out[:])
}

// newULID is a ULID at t with entropy from crypto/rand.
func newULID(t time.Time) string {
	var e [10]byte
	_, _ = crand.Read(e[:])
	return ulidAt(t, e)
}

// seededULID is a ULID at t with entropy from a deterministic generator.
func seededULID(t time.Time, rng *rand.Rand) string {
	var e [10]byte
	a, b := rng.Uint64(), rng.Uint64()
	for i := range 8 {
		e[i] = byte(a >> (8 * i))
	}
	e[8], e[9] = byte(b), byte(b>>8)
	return ulidAt(t, e)
}

// validULID reports whether s has the shape of a ULID. The upstream answers
// 400 CLIENT_ERROR for a payment id that does not.
func validULID(s string) bool {
	if len(s) != 26 || s[0] > '7' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z' && c != 'I' && c != 'L' && c != 'O' && c != 'U')
		if !ok {
			return false
		}
	}
	return true
}

// seededRand is a generator fixed by the seed (Options.Seed, may be empty),
// the user id and a purpose, so the seed data of a user is the same every
// time.
func seededRand(seed, userID, purpose string) *rand.Rand {
	return rand.New(rand.NewPCG(fnv64(seed+"\x00"+userID), fnv64(purpose+"\x00"+userID)))
}

// newID is the id of a resource the user creates at t: from the user's
// seeded generator when the simulator is seeded (so a scripted sequence of
// calls gets the same ids on every run), else from crypto/rand. Ids are
// monotonic per user, as in the ULID spec: one made in the same
// millisecond as the last (always so under a frozen clock) is the last
// plus one, so lists still come back in creation order. The caller holds
// u.mu.
func (u *userData) newID(t time.Time) string {
	var id string
	if u.ids == nil {
		id = newULID(t)
	} else {
		id = seededULID(t, u.ids)
	}
	if id <= u.lastID {
		id = nextULID(u.lastID)
	}
	u.lastID = id
	return id
}

// nextULID is id plus one in its 80 bits of entropy.
func nextULID(id string) string {
	b := []byte(id)
	for i := len(b) - 1; i >= 10; i-- {
		if j := strings.IndexByte(crockford, b[i]); j < len(crockford)-1 {
			b[i] = crockford[j+1]
			return string(b)
		}
		b[i] = crockford[0]
	}
	return string(b) // all 80 bits were set: not reached in practice
}

func fnv64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
