//go:build linux

package lab

import (
	"fmt"
	"net/netip"
)

// Segment is a layer-2 network: a Linux bridge in a namespace of its own, which hosts join
// with Host.Attach. Multicast floods to every port (no snooping), as on a small switch, so
// that discovery by multicast works between the hosts of one segment.
type Segment struct {
	lab  *Lab
	name string
	ns   string       // the namespace holding the bridge br0
	v4   netip.Prefix // addresses handed to the hosts that attach
	v6   netip.Prefix

	// Guarded by lab.mu.
	attached int // hosts attached so far; the next gets host number attached+1
}

// publicV4 are the IPv4 documentation ranges (RFC 5737): global unicast to net/netip and
// to tendril's address checks, and routed nowhere in the real world.
var publicV4 = []netip.Prefix{
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
}

// LAN returns a new segment with private addresses: the n-th LAN of the lab (from 1)
// hands out 10.n.0.1, 10.n.0.2, ... and fd00:0:0:n::1, ... in order of attachment.
func (l *Lab) LAN(name string) *Segment {
	l.t.Helper()
	l.mu.Lock()
	l.lans++
	n := l.lans
	l.mu.Unlock()
	if n > 254 {
		l.t.Fatalf("lab: %s: more than 254 LANs", name)
	}
	v4 := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(n), 0, 0}), 24)
	v6 := netip.PrefixFrom(netip.AddrFrom16([16]byte{0: 0xfd, 6: byte(n >> 8), 7: byte(n)}), 64)
	return l.segment(name, v4, v6)
}

// Public returns a new segment with addresses that look public: the n-th (at most 3) uses
// 198.51.100.0/24, 203.0.113.0/24 or 192.0.2.0/24 and 2001:db8:0:n::/64. Routers with
// NAT put their outside interface here.
func (l *Lab) Public(name string) *Segment {
	l.t.Helper()
	l.mu.Lock()
	l.pubs++
	n := l.pubs
	l.mu.Unlock()
	if n > len(publicV4) {
		l.t.Fatalf("lab: %s: more than %d public segments", name, len(publicV4))
	}
	v6 := netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 6: byte(n >> 8), 7: byte(n)}), 64)
	return l.segment(name, publicV4[n-1], v6)
}

// routableV4 is the prefix of the n-th Routable segment: 100.128.n.0/24, just above the
// shared address space of carrier-grade NATs (100.64.0.0/10). Unlike the documentation
// ranges, miniupnpd accepts it as an external address; like every lab address, it is
// reached only inside the lab's namespaces, which have no route out.
func routableV4(n int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{100, 128, byte(n), 0}), 24)
}

// Routable returns a new public segment with addresses outside every special-purpose
// range: the n-th (from 1, at most 254) hands out 100.128.n.1, ... and
// 2001:db8:100:n::1, .... It is for a router that runs miniupnpd (NATConfig.UPnP), which
// refuses to map ports behind an external address in the documentation ranges of Public
// segments, and for the hosts that reach such a router from outside.
func (l *Lab) Routable(name string) *Segment {
	l.t.Helper()
	l.mu.Lock()
	l.routables++
	n := l.routables
	l.mu.Unlock()
	if n > 254 {
		l.t.Fatalf("lab: %s: more than 254 routable segments", name)
	}
	v6 := netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0x01, 0x00, 6: byte(n >> 8), 7: byte(n)}), 64)
	return l.segment(name, routableV4(n), v6)
}

func (l *Lab) segment(name string, v4, v6 netip.Prefix) *Segment {
	l.t.Helper()
	s := &Segment{lab: l, name: name, ns: l.newNamespace(name), v4: v4, v6: v6}
	// No STP and no forwarding delay: a port forwards as soon as it is up. No multicast
	// snooping: without a querier it would stop forwarding groups it has not seen joined.
	if err := ip("-n", s.ns, "link", "add", "br0", "type", "bridge",
		"stp_state", "0", "forward_delay", "0", "mcast_snooping", "0"); err != nil {
		l.t.Fatalf("lab: %v", err)
	}
	if err := ip("-n", s.ns, "link", "set", "br0", "up"); err != nil {
		l.t.Fatalf("lab: %v", err)
	}
	return s
}

// Name returns the name the segment was created with.
func (s *Segment) Name() string { return s.name }

// Prefix returns the segment's IPv4 prefix.
func (s *Segment) Prefix() netip.Prefix { return s.v4 }

// Prefix6 returns the segment's IPv6 prefix.
func (s *Segment) Prefix6() netip.Prefix { return s.v6 }

// hostAddr returns the n-th address (from 1) of p; 0 and the broadcast address of an IPv4
// prefix are never handed out.
func hostAddr(p netip.Prefix, n int) (netip.Addr, error) {
	size := p.Addr().BitLen() - p.Bits()
	if n < 1 || size < 31 && n >= 1<<size-1 {
		return netip.Addr{}, fmt.Errorf("lab: no host number %d in %s", n, p)
	}
	b := p.Masked().Addr().AsSlice()
	carry := n
	for i := len(b) - 1; i >= 0 && carry > 0; i-- {
		carry += int(b[i])
		b[i] = byte(carry)
		carry >>= 8
	}
	a, _ := netip.AddrFromSlice(b)
	return a, nil
}
