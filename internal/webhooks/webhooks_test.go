package webhooks

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

var (
	testNow = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	secretA = "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	secretB = "whsec_" + base64.StdEncoding.EncodeToString([]byte("another key, rotated in, 32 byte"))
	body    = []byte(`{"type":"payment.status_changed","timestamp":"2026-03-10T12:00:00Z","data":{"id":"01KY","status":"ACSC","updatedAt":"2026-03-10T12:00:00Z"}}`)
)

// signed is a header for body sent as msg_1 at ts under secret.
func signed(t *testing.T, secret string, ts time.Time, body []byte) http.Header {
	t.Helper()
	sig, err := Sign(secret, "msg_1", ts, body)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set(HeaderID, "msg_1")
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, sig)
	return h
}

func TestVerify(t *testing.T) {
	v, err := NewVerifier([]string{secretA, secretB}, DefaultTolerance)
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(h http.Header)) http.Header {
		h := signed(t, secretA, testNow, body)
		f(h)
		return h
	}
	otherKey := "whsec_" + base64.StdEncoding.EncodeToString([]byte("not a key the receiver knows!!!!"))
	flipped := append([]byte(nil), body...)
	flipped[len(flipped)-3] ^= 1
	tests := []struct {
		name    string
		h       http.Header
		body    []byte
		wantErr error
	}{
		{"valid", signed(t, secretA, testNow, body), body, nil},
		{"no webhook-id", edit(func(h http.Header) { h.Del(HeaderID) }), body, ErrMalformed},
		{"no webhook-timestamp", edit(func(h http.Header) { h.Del(HeaderTimestamp) }), body, ErrMalformed},
		{"no webhook-signature", edit(func(h http.Header) { h.Del(HeaderSignature) }), body, ErrMalformed},
		{"timestamp not a number", edit(func(h http.Header) { h.Set(HeaderTimestamp, "12:00") }), body, ErrMalformed},
		{"timestamp with a leading zero", edit(func(h http.Header) { h.Set(HeaderTimestamp, "0"+h.Get(HeaderTimestamp)) }), body, ErrMalformed},
		{"timestamp with a sign", edit(func(h http.Header) { h.Set(HeaderTimestamp, "+"+h.Get(HeaderTimestamp)) }), body, ErrMalformed},
		{"id too long", edit(func(h http.Header) { h.Set(HeaderID, strings.Repeat("m", maxID+1)) }), body, ErrMalformed},
		{"signature bad base64", edit(func(h http.Header) { h.Set(HeaderSignature, "v1,not*base64") }), body, ErrMalformed},
		{"signature too short", edit(func(h http.Header) { h.Set(HeaderSignature, "v1,AAAA") }), body, ErrMalformed},
		{"only another version", edit(func(h http.Header) { h.Set(HeaderSignature, strings.Replace(h.Get(HeaderSignature), "v1,", "v1a,", 1)) }), body, ErrMalformed},
		{"wrong secret", signed(t, otherKey, testNow, body), body, ErrForged},
		{"body changed by one byte", signed(t, secretA, testNow, body), flipped, ErrForged},
		{"other id", edit(func(h http.Header) { h.Set(HeaderID, "msg_2") }), body, ErrForged},
		{"timestamp moved", edit(func(h http.Header) { h.Set(HeaderTimestamp, strconv.FormatInt(testNow.Unix()+1, 10)) }), body, ErrForged},
		{"5m01s old", signed(t, secretA, testNow.Add(-5*time.Minute-time.Second), body), body, ErrStale},
		{"5m01s ahead", signed(t, secretA, testNow.Add(5*time.Minute+time.Second), body), body, ErrStale},
		{"exactly 5m old", signed(t, secretA, testNow.Add(-5*time.Minute), body), body, nil},
		{"exactly 5m ahead", signed(t, secretA, testNow.Add(5*time.Minute), body), body, nil},
		{"rotation: second secret", signed(t, secretB, testNow, body), body, nil},
		{"several signatures, one matches", edit(func(h http.Header) {
			wrong, _ := Sign(otherKey, "msg_1", testNow, body)
			h.Set(HeaderSignature, wrong+" v1a,c29tZXRoaW5n  v1,garbled "+h.Get(HeaderSignature))
		}), body, nil},
		{"several signatures, none matches", edit(func(h http.Header) {
			wrong, _ := Sign(otherKey, "msg_1", testNow, body)
			h.Set(HeaderSignature, wrong+" "+wrong)
		}), body, ErrForged},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, err := v.Verify(tt.h, tt.body, testNow)
			if !errors.Is(err, tt.wantErr) || (err != nil) != (tt.wantErr != nil) {
				t.Fatalf("got error %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if want := tt.h.Get(HeaderTimestamp); msg.ID != "msg_1" || strconv.FormatInt(msg.Timestamp.Unix(), 10) != want {
				t.Errorf("got %+v, want id msg_1 at %s", msg, want)
			}
		})
	}
}

// The published test vector of Standard Webhooks (its Go library's
// TestWebhookSign): Sign and Verify agree with the other implementations.
func TestStandardWebhooksVector(t *testing.T) {
	const (
		secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		id     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
		want   = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	)
	ts, payload := time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`)
	got, err := Sign(secret, id, ts, payload)
	if err != nil || got != want {
		t.Fatalf("got %q, %v, want %q", got, err, want)
	}
	v, err := NewVerifier([]string{secret}, DefaultTolerance)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, "1614265330")
	h.Set(HeaderSignature, want)
	if _, err := v.Verify(h, payload, ts.Add(time.Minute)); err != nil {
		t.Errorf("got %v, want the vector accepted", err)
	}
}

func TestNewVerifierRefusesBadSecrets(t *testing.T) {
	tests := []struct {
		name    string
		secrets []string
		wantIn  string
	}{
		{"none", nil, "no secret"},
		{"no prefix", []string{secretA, strings.TrimPrefix(secretB, "whsec_")}, "secret 1"},
		{"not base64", []string{"whsec_!!!!"}, "secret 0"},
		{"key too short", []string{"whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 23))}, "secret 0"},
		{"key too long", []string{"whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 65))}, "secret 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewVerifier(tt.secrets, DefaultTolerance)
			if err == nil || !strings.Contains(err.Error(), tt.wantIn) {
				t.Fatalf("got %v, want an error naming %q", err, tt.wantIn)
			}
			for _, s := range tt.secrets {
				if b64 := strings.TrimPrefix(s, "whsec_"); len(b64) > 4 && strings.Contains(err.Error(), b64) {
					t.Errorf("error %q quotes a secret", err)
				}
			}
		})
	}
	if _, err := NewVerifier([]string{secretA}, 0); err == nil {
		t.Error("got no error for a zero tolerance, want one")
	}
}

func TestParsePaymentStatus(t *testing.T) {
	ok := `{"type":"payment.status_changed","timestamp":"2026-03-10T12:00:00Z","data":{"id":"01KY","status":"ACSC","updatedAt":"2026-03-10T12:01:00.5Z","extra":1}}`
	got, err := ParsePaymentStatus([]byte(ok))
	if want := (PaymentStatus{"01KY", "ACSC", time.Date(2026, 3, 10, 12, 1, 0, 5e8, time.UTC)}); err != nil || !got.UpdatedAt.Equal(want.UpdatedAt) || got.PaymentID != want.PaymentID || got.Status != want.Status {
		t.Fatalf("got %+v, %v, want %+v", got, err, want)
	}
	tests := []struct {
		name, body string
		wantErr    error
	}{
		{"not JSON", `nope`, ErrPayload},
		{"no type", `{"data":{"id":"01KY","status":"ACSC","updatedAt":"2026-03-10T12:00:00Z"}}`, ErrPayload},
		{"unknown type", `{"type":"payment.created","data":{}}`, ErrUnknownType},
		{"no data", `{"type":"payment.status_changed"}`, ErrPayload},
		{"no id", `{"type":"payment.status_changed","data":{"status":"ACSC","updatedAt":"2026-03-10T12:00:00Z"}}`, ErrPayload},
		{"no status", `{"type":"payment.status_changed","data":{"id":"01KY","updatedAt":"2026-03-10T12:00:00Z"}}`, ErrPayload},
		{"no updatedAt", `{"type":"payment.status_changed","data":{"id":"01KY","status":"ACSC"}}`, ErrPayload},
		{"status not upstream's", `{"type":"payment.status_changed","data":{"id":"01KY","status":"PAID","updatedAt":"2026-03-10T12:00:00Z"}}`, ErrUnknownStatus},
		{"updatedAt not RFC 3339", `{"type":"payment.status_changed","data":{"id":"01KY","status":"ACSC","updatedAt":"yesterday"}}`, ErrPayload},
		{"status not a string", `{"type":"payment.status_changed","data":{"id":"01KY","status":1,"updatedAt":"2026-03-10T12:00:00Z"}}`, ErrPayload},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ParsePaymentStatus([]byte(tt.body)); !errors.Is(err, tt.wantErr) {
				t.Errorf("got %v, want %v", err, tt.wantErr)
			}
		})
	}
}
