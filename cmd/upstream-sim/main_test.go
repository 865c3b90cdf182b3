package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/testing/poll"
	"github.com/fintech-bff/bff/internal/testing/syncbuf"
	"github.com/fintech-bff/bff/internal/webhooks"
)

var listening = regexp.MustCompile(`listening on (http://\S+)`)

// start runs the binary's run on a free port and returns its base URL, a
// stop function that cancels ctx and returns run's error, and the stderr
// buffer.
func start(t *testing.T, args []string, env map[string]string) (string, func() error, *syncbuf.Buffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncbuf.Buffer
	errc := make(chan error, 1)
	go func() {
		errc <- run(ctx, append([]string{"-listen", "127.0.0.1:0"}, args...), func(k string) string { return env[k] }, &stdout, &stderr)
	}()
	var m []string
	if !poll.Within(5*time.Second, func() bool {
		if m = listening.FindStringSubmatch(stdout.String()); m != nil {
			return true
		}
		select {
		case err := <-errc:
			cancel()
			t.Fatalf("run returned early: %v (stderr %s)", err, stderr.String())
		default:
		}
		return false
	}) {
		cancel()
		t.Fatalf("server did not start; stderr %s", stderr.String())
	}
	stop := func() error {
		cancel()
		select {
		case err := <-errc:
			return err
		case <-time.After(15 * time.Second):
			t.Fatal("run did not return after cancel")
			return nil
		}
	}
	return m[1], stop, &stderr
}

func mint(t *testing.T, base, secret string) (int, string) {
	t.Helper()
	res, err := http.Post(base+"/oauth/token", "application/json",
		strings.NewReader(`{"clientId":"dev-client","clientSecret":"`+secret+`","userId":"u"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var m struct {
		AccessToken string `json:"accessToken"`
	}
	_ = json.NewDecoder(res.Body).Decode(&m)
	return res.StatusCode, m.AccessToken
}

func TestRun(t *testing.T) {
	base, stop, stderr := start(t, []string{"-control", "-client-secret", "flag-secret"}, map[string]string{"SIM_CLIENT_SECRET": "env-secret"})

	res, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("readyz: got %d, want 200", res.StatusCode)
	}
	if code, _ := mint(t, base, "flag-secret"); code != http.StatusUnauthorized {
		t.Errorf("flag secret overridden by env: got %d, want 401", code)
	}
	code, tok := mint(t, base, "env-secret")
	if code != http.StatusOK {
		t.Fatalf("env secret: got %d, want 200", code)
	}
	req, _ := http.NewRequest("GET", base+"/v2/payments", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Items []struct {
			PayURL string `json:"payUrl"`
		} `json:"items"`
	}
	_ = json.NewDecoder(res.Body).Decode(&list)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || len(list.Items) == 0 {
		t.Fatalf("payments: got %d with %d items, want 200 with the seeded payments", res.StatusCode, len(list.Items))
	}
	if got := list.Items[0].PayURL; !strings.HasPrefix(got, base+"/consent/payments/") {
		t.Errorf("without -public-url: got payUrl %q, want the consent page on %s", got, base)
	}
	res, err = http.Get(base + "/_sim/counters")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("control enabled by -control: got %d, want 200", res.StatusCode)
	}

	if err := stop(); err != nil {
		t.Errorf("run after cancel: got %v, want nil", err)
	}
	logs := stderr.String()
	for _, secret := range []string{"env-secret", "flag-secret", tok} {
		if strings.Contains(logs, secret) {
			t.Errorf("logs contain a secret or token %q", secret)
		}
	}
	for line := range strings.SplitSeq(strings.TrimSpace(logs), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("log line is not JSON: %s", line)
		}
	}
}

func TestRunFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"bad plan", []string{"-plan", "gold"}},
		{"bad unit", []string{"-expires-in-unit", "hours"}},
		{"unknown flag", []string{"-nope"}},
		{"stray argument", []string{"extra"}},
		{"bad listen address", []string{"-listen", "256.0.0.1:99999"}},
		{"public url without a scheme", []string{"-public-url", "localhost:8081"}},
		{"bad -now", []string{"-now", "yesterday"}},
		{"relative redirect url", []string{"-allowed-redirect-urls", "/payment-done"}},
		{"webhook url not http", []string{"-webhook-url", "ftp://hooks.example/x"}},
		{"webhook secret without whsec_", []string{"-webhook-secret", "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0"}},
		{"webhook secret too short", []string{"-webhook-secret", "whsec_c2hvcnQ="}},
		{"unknown reply profile", []string{"-reply-profile", "minimal"}},
		{"negative list lag", []string{"-list-lag", "-1s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A run that wrongly accepts the flags serves until ctx ends: on a
			// free port, and for a bounded time, so the test fails instead of
			// hanging or taking the default port.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			args := append([]string{"-listen", "127.0.0.1:0"}, tt.args...)
			err := run(ctx, args, func(string) string { return "" }, io.Discard, io.Discard)
			if err == nil {
				t.Errorf("got nil error for %v, want one", tt.args)
			}
		})
	}
}

func TestRunOptions(t *testing.T) {
	base, stop, _ := start(t, []string{"-plan", "free", "-expires-in-unit", "milliseconds", "-token-ttl", "2m", "-credits", "0"}, nil)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	res, err := http.Post(base+"/oauth/token", "application/json",
		strings.NewReader(`{"clientId":"dev-client","clientSecret":"dev-secret","userId":"u"}`))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		AccessToken string  `json:"accessToken"`
		ExpiresIn   float64 `json:"expiresIn"`
	}
	_ = json.NewDecoder(res.Body).Decode(&m)
	res.Body.Close()
	if m.ExpiresIn != 120000 {
		t.Errorf("got expiresIn %v, want 120000 (ms)", m.ExpiresIn)
	}
	req, _ := http.NewRequest("GET", base+"/v2/payments", nil)
	req.Header.Set("Authorization", "Bearer "+m.AccessToken)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("free plan: got %d, want 403", res.StatusCode)
	}
	res, err = http.Get(base + "/_sim/counters")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("control off by default: got %d, want 404", res.StatusCode)
	}
}

// -account-cap 0 and an empty -allowed-redirect-urls mean what the same
// values mean at run time (no new connection, no redirect url), not "the
// default" as a zero Options field does.
func TestRunZeroCapAndEmptyAllowList(t *testing.T) {
	base, stop, _ := start(t, []string{"-control", "-account-cap", "0", "-allowed-redirect-urls", ""}, nil)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	res, err := http.Get(base + "/_sim/settings")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		AccountCap          int      `json:"accountCap"`
		AllowedRedirectURLs []string `json:"allowedRedirectURLs"`
	}
	err = json.NewDecoder(res.Body).Decode(&got)
	res.Body.Close()
	if err != nil || got.AccountCap != 0 || got.AllowedRedirectURLs == nil || len(got.AllowedRedirectURLs) != 0 {
		t.Errorf("got %+v (%v), want accountCap 0 and allowedRedirectURLs []", got, err)
	}
}

// -reply-profile and -list-lag are the settings' start-up values.
func TestRunReplyProfileAndListLag(t *testing.T) {
	base, stop, _ := start(t, []string{"-control", "-reply-profile", "documented", "-list-lag", "300ms"}, nil)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	res, err := http.Get(base + "/_sim/settings")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		ReplyProfile string `json:"replyProfile"`
		ListLag      string `json:"listLag"`
	}
	err = json.NewDecoder(res.Body).Decode(&got)
	res.Body.Close()
	if err != nil || got.ReplyProfile != "documented" || got.ListLag != "300ms" {
		t.Errorf("got %+v (%v), want replyProfile documented and listLag 300ms", got, err)
	}
	if body := get(t, base, "u", "/v2/payments"); strings.Contains(body, "updatedAt") {
		t.Errorf("documented profile: got %s, want no updatedAt", body)
	}
}

// get fetches path with a fresh token for user and returns the body.
func get(t *testing.T, base, user, path string) string {
	t.Helper()
	res, err := http.Post(base+"/oauth/token", "application/json",
		strings.NewReader(`{"clientId":"dev-client","clientSecret":"dev-secret","userId":"`+user+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		AccessToken string `json:"accessToken"`
	}
	_ = json.NewDecoder(res.Body).Decode(&m)
	res.Body.Close()
	req, _ := http.NewRequest("GET", base+path, nil)
	req.Header.Set("Authorization", "Bearer "+m.AccessToken)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: got %d %s, want 200", path, res.StatusCode, b)
	}
	return string(b)
}

// TestRunSeedAndNow checks that -seed and -now make two runs answer the
// same bytes, dated from -now.
func TestRunSeedAndNow(t *testing.T) {
	args := []string{"-seed", "demo", "-now", "2026-07-23T04:12:09Z"}
	var replies []string
	for range 2 {
		base, stop, _ := start(t, args, nil)
		replies = append(replies, get(t, base, "alice", "/v2/connections")+get(t, base, "alice", "/v2/data/transactions?limit=20"))
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	}
	if replies[0] != replies[1] {
		t.Errorf("got different replies from two runs with the same -seed and -now:\n%s\n%s", replies[0], replies[1])
	}
	// The active connection started 30 days before the frozen day.
	if !strings.Contains(replies[0], `"startDate":"2026-06-23"`) {
		t.Errorf("got %s, want a connection started 2026-06-23 (30 days before -now)", replies[0])
	}
}

// The served Date header is the simulator's clock, frozen by -now and
// moved by the control API, as the createdAt of a payment made there: the
// HTTP server keeps the Date the simulator sets.
func TestRunDateFollowsTheClock(t *testing.T) {
	base, stop, _ := start(t, []string{"-control", "-now", "2026-07-23T04:12:09Z"}, nil)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	post := func(path, body string) *http.Response {
		t.Helper()
		res, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	steps := []struct {
		advance  string // "": no move
		wantDate string
	}{
		{"", "Thu, 23 Jul 2026 04:12:09 GMT"},
		{"90m", "Thu, 23 Jul 2026 05:42:09 GMT"},
		{"48h30s", "Sat, 25 Jul 2026 05:42:39 GMT"},
	}
	for _, st := range steps {
		if st.advance != "" {
			post("/_sim/clock/advance", `{"duration":"`+st.advance+`"}`)
		}
		res := post("/oauth/token", `{"clientId":"dev-client","clientSecret":"dev-secret","userId":"u"}`)
		if got := res.Header.Get("Date"); res.StatusCode != http.StatusOK || got != st.wantDate {
			t.Errorf("after +%s: got %d with Date %q, want 200 with Date %q", st.advance, res.StatusCode, got, st.wantDate)
		}
	}
	res, err := http.Post(base+"/_sim/payments", "application/json", strings.NewReader(
		`{"userId":"u","includeFakeProviders":true,"paymentInformation":{"amount":5,"currency":"EUR","creditorAccount":{"iban":"FR7630006000011234567890189"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		CreatedAt string `json:"createdAt"`
	}
	err = json.NewDecoder(res.Body).Decode(&p)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusCreated || p.CreatedAt != "2026-07-25T05:42:39Z" {
		t.Errorf("POST /_sim/payments: got %d createdAt %q (%v), want 201 createdAt 2026-07-25T05:42:39Z", res.StatusCode, p.CreatedAt, err)
	}
}

// -webhook-url and SIM_WEBHOOK_SECRET: a created payment posts a webhook
// signed with the env's secret, which neither the logs nor
// GET /_sim/settings show.
func TestRunWebhooks(t *testing.T) {
	const secret = "whsec_ZW52IHdlYmhvb2sgc2VjcmV0LCAzMiBieXRlcyE="
	got := make(chan *http.Request, 1)
	bodies := make(chan []byte, 1)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r
		bodies <- b
	}))
	defer recv.Close()
	base, stop, stderr := start(t, []string{"-control", "-v", "-webhook-url", recv.URL, "-webhook-secret", "whsec_ZmxhZyB3ZWJob29rIHNlY3JldCwgMzIgYnl0ZXMh"},
		map[string]string{"SIM_WEBHOOK_SECRET": secret})
	_, tok := mint(t, base, "dev-secret")
	req, _ := http.NewRequest("POST", base+"/v2/payments", strings.NewReader(
		`{"paymentInformation":{"amount":5,"currency":"EUR","creditorAccount":{"iban":"FR7630006000011234567890189"}},"providerIds":["demobank-sandbox"]}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("create payment: got %d, want 201", res.StatusCode)
	}
	select {
	case r := <-got:
		v, _ := webhooks.NewVerifier([]string{secret}, webhooks.DefaultTolerance)
		if _, err := v.Verify(r.Header, <-bodies, time.Now()); err != nil {
			t.Errorf("webhook under SIM_WEBHOOK_SECRET: got %v, want it verified", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no webhook within 10s")
	}
	res, err = http.Get(base + "/_sim/settings")
	if err != nil {
		t.Fatal(err)
	}
	settings, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if err := stop(); err != nil {
		t.Errorf("run after cancel: got %v, want nil", err)
	}
	for where, text := range map[string]string{"logs": stderr.String(), "GET /_sim/settings": string(settings)} {
		if strings.Contains(text, secret[6:]) || strings.Contains(text, "ZmxhZyB3ZWJob29r") {
			t.Errorf("%s show a webhook secret: %s", where, text)
		}
	}
	if !strings.Contains(string(settings), `"webhookUrl":"`+recv.URL+`"`) {
		t.Errorf("GET /_sim/settings: got %s, want webhookUrl %s", settings, recv.URL)
	}
}
