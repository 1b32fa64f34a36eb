package mdns

import (
	"net"
	"net/netip"
	"slices"
)

// ifaceInfo is an interface in use and its unicast addresses.
type ifaceInfo struct {
	ifi   net.Interface
	addrs []netip.Addr // both families; IPv6 link-local ones zoned with the interface name
}

func (i ifaceInfo) has(fam family) bool {
	return slices.ContainsFunc(i.addrs, func(a netip.Addr) bool { return a.Is4() == (fam == v4) })
}

// usable reports whether an interface can carry mDNS: up and running, multicast-capable,
// and named in allow when allow is not nil. Running matters: an interface set up whose
// carrier is not yet on drops what is sent through it, and the first announcements with it.
func usable(ifi net.Interface, allow []string) bool {
	const need = net.FlagUp | net.FlagRunning | net.FlagMulticast
	if ifi.Flags&need != need {
		return false
	}
	return allow == nil || slices.Contains(allow, ifi.Name)
}

// scanInterfaces lists the usable interfaces that have at least one address.
func scanInterfaces(allow []string) ([]ifaceInfo, error) {
	ifis, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var out []ifaceInfo
	for _, ifi := range ifis {
		if !usable(ifi, allow) {
			continue
		}
		as, err := ifi.Addrs()
		if err != nil {
			continue
		}
		info := ifaceInfo{ifi: ifi}
		for _, a := range as {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ad, ok := netip.AddrFromSlice(ipn.IP)
			if !ok {
				continue
			}
			ad = ad.Unmap()
			if ad.Is6() && (ad.IsLinkLocalUnicast()) {
				ad = ad.WithZone(ifi.Name)
			}
			info.addrs = append(info.addrs, ad)
		}
		if len(info.addrs) > 0 {
			out = append(out, info)
		}
	}
	return out, nil
}
