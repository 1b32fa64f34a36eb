package transport

import (
	"net"
	"net/netip"
	"strconv"

	ma "github.com/multiformats/go-multiaddr"
)

// RemoteMultiaddr returns c's remote address as a multiaddr: its own if it is Addressed,
// else its net.Addr's (FromNetAddr); nil if it has none that a multiaddr can say.
func RemoteMultiaddr(c net.Conn) ma.Multiaddr {
	if a, ok := c.(Addressed); ok {
		return a.RemoteMultiaddr()
	}
	return FromNetAddr(c.RemoteAddr())
}

// LocalMultiaddr is RemoteMultiaddr for c's local end.
func LocalMultiaddr(c net.Conn) ma.Multiaddr {
	if a, ok := c.(Addressed); ok {
		return a.LocalMultiaddr()
	}
	return FromNetAddr(c.LocalAddr())
}

// FromNetAddr converts a TCP address into /ip4|/ip6/IP/tcp/PORT and a Unix socket's into
// /unix/PATH; nil for anything else.
func FromNetAddr(na net.Addr) ma.Multiaddr {
	var s string
	switch a := na.(type) {
	case *net.TCPAddr:
		s = IPPort(a.AddrPort(), "tcp")
	case *net.UnixAddr:
		if a.Name == "" {
			return nil
		}
		s = "/unix/" + a.Name
	default:
		return nil
	}
	m, err := ma.NewMultiaddr(s)
	if err != nil {
		return nil
	}
	return m
}

// IPPort returns "/ip4/IP/PROTO/PORT" or "/ip6/IP/PROTO/PORT" for ap (unmapped).
func IPPort(ap netip.AddrPort, proto string) string {
	ip := ap.Addr().Unmap()
	fam := "/ip4/"
	if ip.Is6() {
		fam = "/ip6/"
	}
	return fam + ip.WithZone("").String() + "/" + proto + "/" + strconv.Itoa(int(ap.Port()))
}

// RemoteAddrPort returns the IP address and port of c's remote end, unmapped, or the zero
// AddrPort if it is not an IP address (an in-memory or Unix connection): what admission
// counts per address and subnet.
func RemoteAddrPort(c net.Conn) netip.AddrPort {
	return AddrPortOf(c.RemoteAddr())
}

// AddrPortOf returns a's IP address and port, unmapped, if a is a TCP or UDP address.
func AddrPortOf(a net.Addr) netip.AddrPort {
	var ap netip.AddrPort
	switch a := a.(type) {
	case *net.TCPAddr:
		ap = a.AddrPort()
	case *net.UDPAddr:
		ap = a.AddrPort()
	default:
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// HostPort splits a multiaddr that starts /ip4|/ip6|/dns|/dns4|/dns6/HOST/tcp/PORT into
// the Go network ("tcp", "tcp4" or "tcp6") and "host:port", and returns the rest of the
// multiaddr after /tcp/PORT. ok is false if addr does not start that way.
func HostPort(addr ma.Multiaddr) (network, hostport string, rest ma.Multiaddr, ok bool) {
	if len(addr) < 2 {
		return "", "", nil, false
	}
	host, port := addr[0], addr[1]
	if port.Code() != ma.P_TCP {
		return "", "", nil, false
	}
	switch host.Code() {
	case ma.P_IP4, ma.P_DNS4:
		network = "tcp4"
	case ma.P_IP6, ma.P_DNS6:
		network = "tcp6"
	case ma.P_DNS:
		network = "tcp"
	default:
		return "", "", nil, false
	}
	return network, net.JoinHostPort(host.Value(), port.Value()), addr[2:], true
}
