//go:build integration

package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/fintech-bff/bff/internal/upstreamsim"
)

// X-Forwarded-For and X-Request-Id are believed only from trusted proxies.
func TestForwardedHeadersTrust(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name            string
		extra           string
		wantXFF, wantID string
	}{
		{"untrusted peer", "", "127.0.0.1", ""},
		{"trusted proxy", `trusted_proxies: ["127.0.0.1/32"]`, "198.51.100.9", "lb-request-42"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := start(t, options{extraYAML: tc.extra})
			b := e.browser()
			b.login("fwd")
			r := b.do("GET", "/api/v2/providers", "", "X-Forwarded-For", "198.51.100.9", "X-Request-Id", "lb-request-42")
			seen := e.sim.Requests()
			last := seen[len(seen)-1]
			if got := last.Header.Get("X-Forwarded-For"); got != tc.wantXFF {
				t.Fatalf("upstream saw X-Forwarded-For %q, want %q", got, tc.wantXFF)
			}
			gotID := r.header.Get("X-Request-Id")
			if tc.wantID != "" && gotID != tc.wantID {
				t.Fatalf("got X-Request-Id %q, want the proxy's %q", gotID, tc.wantID)
			}
			if tc.wantID == "" && gotID == "lb-request-42" {
				t.Fatal("an untrusted client's X-Request-Id was believed")
			}
			if last.Header.Get("X-Request-Id") != gotID {
				t.Fatalf("upstream saw X-Request-Id %q, client got %q", last.Header.Get("X-Request-Id"), gotID)
			}
		})
	}
}

// Echo's own 404 and 405 use the envelope too.
func TestEdgeErrorsUseTheEnvelope(t *testing.T) {
	t.Parallel()
	e := start(t, options{})
	r := e.browser().do("PUT", "/auth/session", "")
	wantProblem(t, r, 405, "METHOD_NOT_ALLOWED")
}

// rss reads a process's resident and peak resident set sizes in KiB.
func rss(t *testing.T, pid int) (cur, peak int) {
	t.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		n, _ := strconv.Atoi(fields[1])
		switch fields[0] {
		case "VmRSS:":
			cur = n
		case "VmHWM:":
			peak = n
		}
	}
	return cur, peak
}

// A 50 MB upstream reply streams through: the BFF's peak memory does not
// grow with it.
func TestLargeResponseIsStreamed(t *testing.T) {
	e := start(t, options{})
	b := e.browser()
	b.login("big")
	const size = 50 << 20
	big := `{"items":[` + strings.Repeat(`{"id":"0123456789","amount":{"chargedAmount":"12.50"}},`, size/56) + `{}]}`
	e.sim.InjectFault(upstreamsim.Fault{PathPrefix: "/v2/data/transactions", Status: 200, Body: big})
	// Warm up: the paths, pools and race-detector shadow memory.
	for i := 0; i < 3; i++ {
		b.do("GET", "/api/v2/providers", "")
	}
	_, before := rss(t, e.cmd.Process.Pid)
	req, _ := http.NewRequest("GET", e.public+"/api/v2/data/transactions", nil)
	for _, c := range b.http.Jar.Cookies(mustURL(t, e.public)) {
		req.AddCookie(c)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || n != int64(len(big)) {
		t.Fatalf("got %d, %d bytes, %v; want 200 and %d bytes", resp.StatusCode, n, err, len(big))
	}
	_, after := rss(t, e.cmd.Process.Pid)
	t.Logf("peak RSS %d KiB before, %d KiB after streaming %d MiB", before, after, n>>20)
	if grew := after - before; grew > 16<<10 {
		t.Fatalf("peak RSS grew by %d KiB while streaming 50 MiB, want under 16 MiB: the body was buffered", grew)
	}
}

// A transaction is read and patched by its SK, which holds '#': the app
// escapes it (%23) and the BFF must pass the escaped segment on intact.
func TestForwardTransactionBySK(t *testing.T) {
	t.Parallel()
	e := start(t, options{})
	b := e.browser()
	b.login("sk-user")
	var list struct {
		Items []struct{ ID, SK string }
	}
	if r := b.do("GET", "/api/v2/data/transactions?limit=1", ""); r.status != 200 || json.Unmarshal(r.body, &list) != nil || len(list.Items) != 1 {
		t.Fatalf("list: got %d %s, want one transaction", r.status, r.body)
	}
	tx := list.Items[0]
	if !strings.HasPrefix(tx.SK, "TRANSACTION#") {
		t.Fatalf("got SK %q, want TRANSACTION#...", tx.SK)
	}
	path := "/api/v2/data/transactions/" + url.PathEscape(tx.SK)
	if got := b.do("GET", path, "").json(t)["id"]; got != tx.ID {
		t.Errorf("GET by escaped SK: got id %v, want %s", got, tx.ID)
	}
	r := b.do("PATCH", path, `{"category":{"main":"SHOPPING","sub":"SHOPPING_OTHER"}}`, "X-CSRF", "1")
	if r.status != 200 || r.json(t)["id"] != tx.ID {
		t.Errorf("PATCH by escaped SK: got %d %s, want 200 for %s", r.status, r.body, tx.ID)
	}
}
