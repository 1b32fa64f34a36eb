package portmap

import (
	"fmt"
	"net/netip"
	"time"
)

// Mapping is a port mapping held on a gateway. The zero Mapping means none.
type Mapping struct {
	// Method is the protocol that made the mapping.
	Method Method
	// Protocol is "tcp" or "udp".
	Protocol string
	// InternalPort is the local port mapped.
	InternalPort int
	// External is the gateway's external address and the port it assigned, which may
	// differ from InternalPort when the gateway refused the same port.
	External netip.AddrPort
	// Gateway is the router that holds the mapping.
	Gateway netip.Addr
	// Expires is when the lease runs out unless renewed. The zero time means the
	// gateway granted a permanent mapping (UPnP lease 0); it is still refreshed.
	Expires time.Time
	// DoubleNAT is true when the external address is itself private (RFC 1918) or
	// shared (100.64.0.0/10, RFC 6598): another NAT sits beyond this gateway, so the
	// mapping does not make the node reachable from the Internet. Report such an address
	// as a candidate at most, never as public.
	DoubleNAT bool
}

// IsZero reports whether m is the zero Mapping (no mapping).
func (m Mapping) IsZero() bool { return m == Mapping{} }

func (m Mapping) String() string {
	if m.IsZero() {
		return "no mapping"
	}
	s := fmt.Sprintf("%s %s %d -> %s via %s", m.Method, m.Protocol, m.InternalPort, m.External, m.Gateway)
	if m.DoubleNAT {
		s += " (double NAT)"
	}
	return s
}

// sameEndpoint reports whether a and b differ in nothing a caller is told about:
// everything but the expiry.
func sameEndpoint(a, b Mapping) bool {
	a.Expires, b.Expires = time.Time{}, time.Time{}
	return a == b
}

var sharedSpace = netip.MustParsePrefix("100.64.0.0/10") // RFC 6598, carrier-grade NAT

// checkExternal vets an external address a gateway reported. It returns an error
// wrapping ErrBadExternalAddr for an address no one could reach, and whether the address
// is behind another NAT.
func checkExternal(a netip.Addr) (doubleNAT bool, err error) {
	a = a.Unmap()
	switch {
	case !a.Is4():
		return false, fmt.Errorf("%w: %v is not IPv4", ErrBadExternalAddr, a)
	case a.IsUnspecified(), a.IsLoopback(), a.IsMulticast(), a.IsLinkLocalUnicast(),
		a == netip.AddrFrom4([4]byte{255, 255, 255, 255}), a.As4()[0] == 0, a.As4()[0] >= 240:
		return false, fmt.Errorf("%w: %v", ErrBadExternalAddr, a)
	}
	return a.IsPrivate() || sharedSpace.Contains(a), nil
}
