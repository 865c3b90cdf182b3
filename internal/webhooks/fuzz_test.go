package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// FuzzVerify feeds arbitrary headers and bodies to Verify: it never panics,
// and it accepts only a message whose header carries the signature an
// independent HMAC under the secret gives (so never one made without it).
func FuzzVerify(f *testing.F) {
	ts := strconv.FormatInt(testNow.Unix(), 10)
	good, _ := Sign(secretA, "msg_1", testNow, body)
	f.Add("msg_1", ts, good, body)
	f.Add("msg_1", ts, "v1,"+strings.Repeat("A", 44), body)
	f.Add("msg_1", ts, good+" v1,garbled v2,x", body)
	f.Add("", "-1", "v1,", []byte{})
	f.Add("msg_1", "99999999999999999999", good, body)
	f.Add("msg_1", ts, "v1a,"+good[3:], body)
	v, err := NewVerifier([]string{secretA}, DefaultTolerance)
	if err != nil {
		f.Fatal(err)
	}
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secretA, "whsec_"))
	f.Fuzz(func(t *testing.T, id, timestamp, signature string, body []byte) {
		h := http.Header{}
		h.Set(HeaderID, id)
		h.Set(HeaderTimestamp, timestamp)
		h.Set(HeaderSignature, signature)
		if _, err := v.Verify(h, body, testNow); err != nil {
			return
		}
		m := hmac.New(sha256.New, key)
		m.Write([]byte(id + "." + timestamp + "."))
		m.Write(body)
		want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
		if !strings.Contains(signature, want) {
			t.Fatalf("accepted id %q timestamp %q signature %q without the signature %q", id, timestamp, signature, want)
		}
	})
}
