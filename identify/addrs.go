package identify

import (
	"net"
	"net/netip"

	ma "github.com/multiformats/go-multiaddr"
	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/peerrecord"
)

// DefaultAddrs returns what a node advertises when Config.Addrs is nil: svc's listen
// addresses, each listener on an unspecified IP (0.0.0.0, ::) replaced by one address per
// matching interface address of this machine (net.InterfaceAddrs): the addresses a peer
// could dial it at. Loopback addresses take the place of an unspecified one only when the
// machine has no other address of that family, and IPv6 link-local addresses never do (they
// need a zone to be dialled). At most peerrecord.MaxAddrs are returned, the listeners' in
// their order first.
//
// What a peer on another network can reach is known only from outside: the addresses
// peers observe (Identify.ObservedAddrs) and, later, reachability checks. Applications
// that know better set Config.Addrs.
func DefaultAddrs(svc *tendril.Service) []ma.Multiaddr {
	var listen []ma.Multiaddr
	for _, a := range svc.Addrs() {
		listen = append(listen, a.Transport)
	}
	return expandUnspecified(listen, interfaceIPs())
}

// interfaceIPs returns the machine's interface addresses, or none if they cannot be read.
func interfaceIPs() []netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var ips []netip.Addr
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			ips = append(ips, p.Addr())
		}
	}
	return ips
}

// expandUnspecified replaces each address on an unspecified IP by one per usable IP of
// its family in ifaces (see DefaultAddrs), drops duplicates and keeps at most
// peerrecord.MaxAddrs.
func expandUnspecified(listen []ma.Multiaddr, ifaces []netip.Addr) []ma.Multiaddr {
	var out []ma.Multiaddr
	add := func(m ma.Multiaddr) {
		if len(out) < peerrecord.MaxAddrs && !ma.Contains(out, m) {
			out = append(out, m)
		}
	}
	for _, m := range listen {
		if len(m) == 0 {
			continue
		}
		first := m[0]
		code := first.Protocol().Code
		ip, ok := netip.AddrFromSlice(first.RawValue())
		if (code != ma.P_IP4 && code != ma.P_IP6) || !ok || !ip.IsUnspecified() {
			add(m)
			continue
		}
		for _, ip := range usableIPs(ifaces, code == ma.P_IP4) {
			c, err := ma.NewComponent(first.Protocol().Name, ip.String())
			if err != nil {
				continue
			}
			add(append(ma.Multiaddr{*c}, m[1:]...))
		}
	}
	return out
}

// usableIPs returns the addresses of one family in ifaces that a peer could dial:
// no link-local or unspecified ones, and loopback only if nothing else is left.
func usableIPs(ifaces []netip.Addr, v4 bool) []netip.Addr {
	var ips, loopback []netip.Addr
	for _, ip := range ifaces {
		ip = ip.Unmap()
		switch {
		case ip.Is4() != v4, ip.IsUnspecified(), ip.IsLinkLocalUnicast(), ip.IsMulticast():
		case ip.IsLoopback():
			loopback = append(loopback, ip)
		default:
			ips = append(ips, ip)
		}
	}
	if len(ips) == 0 {
		return loopback
	}
	return ips
}
