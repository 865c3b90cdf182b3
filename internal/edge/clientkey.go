package edge

import "net/netip"

// clientKey names a client in the per-address limits: an IPv4 address
// whole, an IPv6 address by its first v6Bits bits. A client (a home, a
// phone, a cloud machine) is given at least a /64, and chooses freely
// among its addresses: keyed whole, each would get a budget of its own.
// An IPv4-mapped IPv6 address counts as its IPv4 address. What does not
// parse is keyed as it is (Echo's RealIP is always an address).
func clientKey(ip string, v6Bits int) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	a = a.Unmap().WithZone("")
	if a.Is4() || v6Bits <= 0 || v6Bits >= 128 {
		return a.String()
	}
	p, err := a.Prefix(v6Bits)
	if err != nil {
		return a.String()
	}
	return p.String()
}
