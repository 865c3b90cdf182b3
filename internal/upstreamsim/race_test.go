package upstreamsim

import (
	"fmt"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestConcurrentTrafficAndControl runs API calls, consent decisions and
// control calls (Reset, LoadFixtures, SetPersona, UpdateSettings,
// rotation) at once. Run under -race (as make test does) it checks that
// the consent pages' owner scan, the settings knobs, the fixtures' key
// swap and the resets share no unguarded state; it also checks that
// decisions went through and that the simulator still answers afterwards.
// Bounded by count, not time, so it takes about a second.
func TestConcurrentTrafficAndControl(t *testing.T) {
	sim := New(Options{Now: fixedClock(), Seed: "race", Control: true})
	const workers, rounds = 6, 60
	payment := `{"paymentInformation":{"amount":1,"currency":"ILS","creditorAccount":{"iban":"IL620108000000099999999"}},` +
		`"providerIds":["demobank-sandbox"],"redirectUrl":"https://app.example.com/payment-done"}`
	serve := func(method, path, tok, body, contentType string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		req.Header.Set("Content-Type", contentType)
		rec := httptest.NewRecorder()
		sim.ServeHTTP(rec, req)
		return rec
	}
	var wg sync.WaitGroup
	var decided atomic.Int64
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := fmt.Sprintf("u%d", g%3)
			for i := range rounds {
				tok, _ := sim.tokens.mintClient("dev-client", "dev-secret", user, sim.Now(), time.Hour)
				if rec := serve("POST", "/v2/payments", tok, payment, "application/json"); rec.Code == 201 {
					_, after, _ := strings.Cut(rec.Body.String(), `"payUrl":"`)
					link, _, _ := strings.Cut(after, `"`)
					if u, err := url.Parse(link); err == nil {
						form := url.Values{"token": {u.Query().Get("token")}, "decision": {"approve"}}.Encode()
						serve("GET", u.RequestURI(), "", "", "")
						rec := serve("POST", u.Path, "", form, "application/x-www-form-urlencoded")
						if strings.HasPrefix(rec.Header().Get("Location"), "https://app.example.com/payment-done?") {
							decided.Add(1)
						}
					}
				}
				for _, p := range []string{"/v2/connections", "/v2/data/transactions?limit=5", "/v2/payments"} {
					serve("GET", p, tok, "", "")
				}
				switch i % 20 {
				case 3:
					sim.Reset()
				case 7:
					sim.LoadFixtures(fmt.Sprint("race", i), time.Time{})
				case 11:
					_ = sim.SetPersona(user, PersonaBusy)
				case 13:
					_, _ = sim.UpdateSettings(SettingsPatch{PublicURL: ptr("http://sim.test"), TokenTTL: ptr(time.Hour)})
				case 17:
					sim.RotateSecretPurgeFailed("dev-secret-2")
					serve("GET", "/_sim/requests", "", "", "")
				}
			}
		}()
	}
	wg.Wait()
	if decided.Load() == 0 {
		t.Error("no consent decision reached the app: the test exercised no decision")
	}
	sim.Reset()
	tok, _ := sim.tokens.mintClient("dev-client", "dev-secret", "after", sim.Now(), time.Hour)
	if rec := serve("GET", "/v2/payments", tok, "", ""); rec.Code != 200 {
		t.Errorf("after the storm: got %d %s, want 200", rec.Code, rec.Body)
	}
}
