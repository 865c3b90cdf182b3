package payments

import (
	"encoding/base64"
	"encoding/binary"
	"net/url"
	"strings"

	"github.com/fintech-bff/bff/internal/seal"
)

// A held payment is named in its step-up URL by an opaque reference: the
// record's id, its user and the session that made it, sealed, so it names
// nothing of the ledger and cannot be made or altered outside the BFF.

// holdRefs seals and opens the references. It is also the one place that
// says whether payments are held at all (holding): with step-up off
// nothing is held, no reference is shown, and none opens. The zero value
// is step-up off.
type holdRefs struct {
	box *seal.Box // nil: step-up is off
	url string    // the step-up endpoint as the client reaches it
}

// holding reports whether step-up is on: payments are held for the user's
// approval, and references are shown and opened.
func (h holdRefs) holding() bool { return h.box != nil }

// maxRefLen bounds a reference read from a URL.
const maxRefLen = 1024

// seal is the reference of hold id.
func (h holdRefs) seal(userID, sessionRef string, id int64) string {
	b := binary.BigEndian.AppendUint64(nil, uint64(id))
	b = append(append(append(b, userID...), 0), sessionRef...)
	return base64.RawURLEncoding.EncodeToString(h.box.Seal(nil, b, []byte("bff step-up hold")))
}

// open reads a reference seal made.
func (h holdRefs) open(ref string) (id int64, userID, sessionRef string, ok bool) {
	if !h.holding() || len(ref) > maxRefLen {
		return 0, "", "", false
	}
	sealed, err := base64.RawURLEncoding.Strict().DecodeString(ref)
	if err != nil {
		return 0, "", "", false
	}
	b, err := h.box.Open(nil, sealed, []byte("bff step-up hold"))
	if err != nil || len(b) < 9 {
		return 0, "", "", false
	}
	id = int64(binary.BigEndian.Uint64(b[:8]))
	userID, sessionRef, ok = strings.Cut(string(b[8:]), "\x00")
	return id, userID, sessionRef, ok && id > 0
}

// stepUpURL is where the client sends the user to approve hold id; ""
// when step-up is off.
func (h holdRefs) stepUpURL(userID, sessionRef string, id int64) string {
	if !h.holding() {
		return ""
	}
	return h.url + "?payment=" + url.QueryEscape(h.seal(userID, sessionRef, id))
}
