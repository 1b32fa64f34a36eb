//go:build !linux

package portmap

import (
	"fmt"
	"net/netip"
)

// defaultGateway is not implemented off Linux: reading the routing table takes a
// per-system interface (routing sockets, IP Helper), and guessing ".1" of the local
// subnet would send requests to whatever host holds that address. Set Config.Gateway;
// UPnP still discovers on its own.
func defaultGateway() (netip.Addr, error) {
	return netip.Addr{}, fmt.Errorf("%w: default route not read on this system; set Config.Gateway", ErrNoGateway)
}
