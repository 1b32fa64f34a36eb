//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package tcp

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/transport"
)

// Attempt is a connection attempt under way (see the Unix version); here there is none.
type Attempt struct{}

// StartDialFrom is not available without SO_REUSEPORT: it fails with ErrUnsupported.
func (t *Transport) StartDialFrom(from netip.AddrPort, addr ma.Multiaddr) (*Attempt, error) {
	return nil, fmt.Errorf("%w: SO_REUSEPORT is not available here", transport.ErrUnsupported)
}

// Wait fails: there is no attempt.
func (a *Attempt) Wait(context.Context) (net.Conn, error) {
	return nil, fmt.Errorf("%w: no connection attempt", transport.ErrUnsupported)
}

// Close does nothing.
func (a *Attempt) Close() error { return nil }
