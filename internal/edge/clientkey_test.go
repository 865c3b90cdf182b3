package edge

import "testing"

func TestClientKey(t *testing.T) {
	for _, tc := range []struct {
		ip   string
		bits int
		want string
	}{
		{"198.51.100.7", 64, "198.51.100.7"},
		{"::ffff:198.51.100.7", 64, "198.51.100.7"},
		{"2001:db8:1:2:aaaa:bbbb:cccc:dddd", 64, "2001:db8:1:2::/64"},
		{"2001:db8:1:2::1", 64, "2001:db8:1:2::/64"},
		{"2001:db8:1:3::1", 64, "2001:db8:1:3::/64"},
		{"2001:db8:1:2:ff::1", 56, "2001:db8:1::/56"},
		{"fe80::1%eth0", 64, "fe80::/64"},
		{"2001:db8::1", 128, "2001:db8::1"},
		{"not-an-address", 64, "not-an-address"},
	} {
		if got := clientKey(tc.ip, tc.bits); got != tc.want {
			t.Errorf("clientKey(%q, %d) = %q, want %q", tc.ip, tc.bits, got, tc.want)
		}
	}
}
