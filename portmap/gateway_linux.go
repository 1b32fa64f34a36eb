//go:build linux

package portmap

import (
	"fmt"
	"net/netip"
	"os"
)

// defaultGateway returns the default route's IPv4 gateway.
func defaultGateway() (netip.Addr, error) {
	f, err := os.Open("/proc/net/route")
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%w: %w", ErrNoGateway, err)
	}
	defer f.Close()
	return parseDefaultGateway(f)
}
