package config

import (
	"net/netip"
	"reflect"
	"testing"
	"time"
)

// The typed views hand callers parsed values of a validated config.
func TestTypedViews(t *testing.T) {
	c := mustLoad(t, `
trusted_proxies: ["10.0.0.0/8", "192.168.1.7", "2001:db8::/32", "10.1.2.3/8"]
upstream:
  expires_in_unit: milliseconds
`, prodEnv())
	want := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.7/32"),
		netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("10.0.0.0/8"),
	}
	if got := c.TrustedProxyPrefixes(); !reflect.DeepEqual(got, want) {
		t.Errorf("TrustedProxyPrefixes: got %v, want %v", got, want)
	}
	if got := c.PublicOrigin(); got != "https://app.example.com" {
		t.Errorf("PublicOrigin: got %q, want https://app.example.com", got)
	}
	if got := c.Upstream.BaseURLParsed(); got.Scheme != "https" || got.Host != "api.example.com" {
		t.Errorf("BaseURLParsed: got %v", got)
	}
	if got := c.Upstream.ExpiresInDuration(); got != time.Millisecond {
		t.Errorf("ExpiresInDuration: got %v, want 1ms", got)
	}
	c.Upstream.ExpiresInUnit = UnitSeconds
	if got := c.Upstream.ExpiresInDuration(); got != time.Second {
		t.Errorf("ExpiresInDuration: got %v, want 1s", got)
	}
}
