package config

import (
	"strings"
	"testing"
)

// session.mobile_dpop: required in production and optional in development
// unless set, set from the file or BFF_SESSION_MOBILE_DPOP in either env,
// and any other value stops start-up naming the key.
func TestMobileDPoP(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		yaml string
		want string
	}{
		{"production default", prodEnv(), "", MobileDPoPRequired},
		{"development default", devEnv(), "", MobileDPoPOptional},
		{"production optional from the environment", with(prodEnv(), map[string]string{"BFF_SESSION_MOBILE_DPOP": "optional"}), "", MobileDPoPOptional},
		{"production off from the file", prodEnv(), "session:\n  mobile_dpop: off\n", MobileDPoPOff},
		{"development required", with(devEnv(), map[string]string{"BFF_SESSION_MOBILE_DPOP": "required"}), "", MobileDPoPRequired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mustLoad(t, tc.yaml, tc.env).Session.MobileDPoP; got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
	for _, v := range []string{"Required", "on", "true"} {
		_, err := load(t, "", with(devEnv(), map[string]string{"BFF_SESSION_MOBILE_DPOP": v}))
		if err == nil || !strings.Contains(fromEnv.ReplaceAllString(err.Error(), ""), `session.mobile_dpop: "`+v+`" is not one of off, optional, required`) {
			t.Errorf("%q: got %v, want an error naming session.mobile_dpop", v, err)
		}
	}
}
