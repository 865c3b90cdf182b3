package upstreamsim

import (
	"net/http"
	"testing"
)

// HEAD on a GET route answers as the GET without the body (net/http's
// ServeMux routes HEAD to GET patterns; the server drops the body), so the
// BFF can forward HEAD as HEAD. Other methods' routes do not
// take it.
func TestHeadAnswersAsGet(t *testing.T) {
	h := newHarness(t, Options{})
	tok := h.token("head-user")
	for _, path := range []string{"/v2/providers", "/v2/data/transaction-categories", "/v2/payments/01KVRWDN00G3MYR9S9JBXJ7000"} {
		get, head := h.do("GET", path, tok, nil), h.do("HEAD", path, tok, nil)
		if head.status != get.status || len(head.body) != 0 {
			t.Errorf("HEAD %s: got %d with %d bytes, want the GET's %d and no body", path, head.status, len(head.body), get.status)
		}
		for _, k := range []string{"Content-Type", "Content-Length"} {
			if head.header.Get(k) != get.header.Get(k) || get.header.Get(k) == "" {
				t.Errorf("HEAD %s: got %s %q, want the GET's %q", path, k, head.header.Get(k), get.header.Get(k))
			}
		}
	}
	if r := h.do("HEAD", "/v2/pay/open-banking-init", tok, nil); r.status != http.StatusNotFound {
		t.Errorf("HEAD on a POST route: got %d, want 404 as any unknown route", r.status)
	}
	if r := h.do("HEAD", "/v2/providers", "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("HEAD without a token: got %d, want 401", r.status)
	}
}
