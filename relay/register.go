package relay

import (
	"errors"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/protocol"
)

// Protocol names and the version on the wire.
const (
	// HopProtocol is spoken to a relay: reserve a slot, or connect to a target.
	HopProtocol = "/tendril/relay/hop"
	// StopProtocol is spoken by a relay to a target: someone connects to you.
	StopProtocol = "/tendril/relay/stop"
	// Version is the version of both protocols.
	Version = "1"
)

// ensureOpener registers name, with no handler, so that this node may open it (a Service
// opens only protocols it has registered), unless it is registered already.
func ensureOpener(svc *tendril.Service, name string) error {
	for _, p := range svc.Protocols() {
		if p.Name == name {
			return nil
		}
	}
	err := svc.AddProtocol(tendril.Protocol{Name: name, Versions: []string{Version}})
	if errors.Is(err, protocol.ErrDuplicateProtocol) {
		return nil // registered meanwhile
	}
	return err
}

// addServer registers p, whose handler serves the protocol, replacing a registration of
// the same name that has no handler (ensureOpener's, by the other half of this package on
// the same Service).
func addServer(svc *tendril.Service, p tendril.Protocol) error {
	err := svc.AddProtocol(p)
	if !errors.Is(err, protocol.ErrDuplicateProtocol) {
		return err
	}
	for _, q := range svc.Protocols() {
		if q.Name == p.Name && q.Handler == nil && q.StreamHandler == nil && q.RequestHandler == nil {
			if err := svc.RemoveProtocol(p.Name); err != nil {
				return err
			}
			return svc.AddProtocol(p)
		}
	}
	return err
}
