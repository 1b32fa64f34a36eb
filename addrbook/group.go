package addrbook

import (
	"net/netip"
	"strings"

	ma "github.com/multiformats/go-multiaddr"
)

// Group is the address group an address belongs to: the unit of diversity. Addresses in
// one group are assumed to be under one operator's control, so the book spreads its
// buckets, its dials and its peer-exchange answers across groups rather than addresses.
//
// A Group is a short string whose prefix names its kind:
//
//	ip4:1.2.0.0/16        routable IPv4: the /16
//	ip6:2001:db8::/32     routable IPv6: the /32
//	local                 loopback, private, link-local and other unroutable IPs, together
//	dns:example.com       a DNS name: its last two labels
//	memory                the in-process transport
//	other:/unix           anything else: its first protocol
//
// IPv6 is grouped by /32, not /48: a /32 is what a regional registry hands one provider,
// so an attacker with one allocation (or one hosting account with a routed /32) holds
// 65,536 /48s and would count as 65,536 groups; Bitcoin Core groups IPv6 by /32 for the
// same reason. IPv4-mapped IPv6 and 6to4 (2002::/16) addresses are grouped by the IPv4
// address they carry, so one IPv4 /16 cannot pose as many IPv6 groups.
//
// DNS names are grouped by their last two labels because whoever owns a domain can mint
// any number of names under it; without a public-suffix list, names under a two-label
// public suffix (co.uk) share a group, which costs them diversity, never the book its
// bounds.
type Group string

// GroupLocal is the group of every unroutable IP address (loopback, private, link-local,
// unspecified, shared and documentation ranges).
const GroupLocal Group = "local"

// GroupMemory is the group of every in-process (/memory) address.
const GroupMemory Group = "memory"

// sixToFour is 2002::/16, whose addresses embed an IPv4 address in bits 16..48.
var sixToFour = netip.MustParsePrefix("2002::/16")

// GroupOf returns the group of a transport multiaddr (without /p2p/). An empty multiaddr
// is in group "other:".
func GroupOf(m ma.Multiaddr) Group {
	if len(m) == 0 {
		return "other:"
	}
	c := m[0]
	switch c.Protocol().Code {
	case ma.P_IP4, ma.P_IP6:
		ip, ok := netip.AddrFromSlice(c.RawValue())
		if !ok {
			return Group("other:/" + c.Protocol().Name)
		}
		return ipGroup(ip)
	case ma.P_DNS, ma.P_DNS4, ma.P_DNS6, ma.P_DNSADDR:
		return dnsGroup(c.Value())
	case ma.P_MEMORY:
		return GroupMemory
	case ma.P_IP6ZONE:
		return GroupLocal // a zone is only meaningful on this host's links
	}
	return Group("other:/" + c.Protocol().Name)
}

// ipGroup groups a routable IPv4 address by /16 and an IPv6 one by /32.
func ipGroup(ip netip.Addr) Group {
	ip = ip.Unmap()
	if ip.Is6() && sixToFour.Contains(ip) {
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})
	}
	if !routable(ip) {
		return GroupLocal
	}
	bits, kind := 32, "ip6:"
	if ip.Is4() {
		bits, kind = 16, "ip4:"
	}
	p, _ := ip.Prefix(bits)
	return Group(kind + p.String())
}

// unroutable lists the ranges, besides those netip classifies, that no public peer can be
// reached at: telling a peer about them is useless and they must not count as diversity.
var unroutable = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT (RFC 6598)
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation (RFC 5737)
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking (RFC 2544)
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved
	netip.MustParsePrefix("2001:db8::/32"),   // documentation (RFC 3849)
}

// routable reports whether ip is a public unicast address.
func routable(ip netip.Addr) bool {
	if !ip.IsValid() || ip.IsLoopback() || ip.IsPrivate() || ip.IsUnspecified() ||
		ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsMulticast() ||
		ip.IsInterfaceLocalMulticast() {
		return false
	}
	for _, p := range unroutable {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// dnsGroup keeps a name's last two labels, lower-cased and without a trailing dot.
func dnsGroup(name string) Group {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return GroupLocal
	}
	if i := strings.LastIndexByte(name, '.'); i > 0 {
		if j := strings.LastIndexByte(name[:i], '.'); j >= 0 {
			name = name[j+1:]
		}
	}
	return Group("dns:" + name)
}

// IsPublic reports whether a is an address on the public Internet: a routable IP address
// or a DNS name other than localhost (GroupOf's ip4, ip6 and dns groups). Loopback,
// private, link-local, unspecified, shared and documentation ranges, in-process (/memory)
// and other transports are not.
func IsPublic(a ma.Multiaddr) bool {
	g := string(GroupOf(a))
	return strings.HasPrefix(g, "ip4:") || strings.HasPrefix(g, "ip6:") || strings.HasPrefix(g, "dns:")
}

// IsLocal reports whether g is the group of unroutable addresses; such addresses are
// omitted from peer-exchange answers to public peers (SampleOptions.OmitLocal).
func (g Group) IsLocal() bool { return g == GroupLocal }
