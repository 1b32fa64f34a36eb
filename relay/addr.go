package relay

import (
	"fmt"
	"strings"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/secio"
)

// Circuit is the address of a peer reachable through a relay:
//
//	RELAYTRANSPORT/p2p/RELAY/p2p-circuit/p2p/TARGET
//
// e.g. /ip4/1.2.3.4/tcp/4001/p2p/RELAY/p2p-circuit/p2p/TARGET, as libp2p writes it. It is
// kept apart from tendril.Addr, whose /p2p/ part is one peer ID at the end, because it
// names two peers: the relay, whose identity its session verifies, and the target, whose
// identity the end-to-end handshake through the circuit verifies.
type Circuit struct {
	// Relay is the relay's address; its Peer is required.
	Relay tendril.Addr
	// Target is the peer reached through the relay.
	Target secio.PeerID
}

// circuitSuffix separates the relay's part of a circuit address from the target's.
const circuitSuffix = "/p2p-circuit"

// ParseCircuit parses "RELAYTRANSPORT/p2p/RELAY/p2p-circuit/p2p/TARGET". Errors wrap
// ErrInvalidCircuit (and tendril.ErrInvalidAddr for a bad relay address).
func ParseCircuit(s string) (Circuit, error) {
	i := strings.Index(s, circuitSuffix+"/")
	if i < 0 {
		return Circuit{}, fmt.Errorf("%w: %q has no /p2p-circuit/", ErrInvalidCircuit, s)
	}
	relay, err := tendril.ParseAddr(s[:i])
	if err != nil {
		return Circuit{}, fmt.Errorf("%w: relay: %w", ErrInvalidCircuit, err)
	}
	if relay.Peer.IsZero() {
		return Circuit{}, fmt.Errorf("%w: %q: the relay's /p2p/ID is required", ErrInvalidCircuit, s)
	}
	rest := s[i+len(circuitSuffix):]
	idStr, ok := strings.CutPrefix(rest, "/p2p/")
	if !ok || idStr == "" || strings.Contains(idStr, "/") {
		return Circuit{}, fmt.Errorf("%w: %q: /p2p-circuit must be followed by /p2p/TARGET and nothing else", ErrInvalidCircuit, s)
	}
	target, err := secio.ParsePeerID(idStr)
	if err != nil {
		return Circuit{}, fmt.Errorf("%w: %q: target: %w", ErrInvalidCircuit, s, err)
	}
	if target == relay.Peer {
		return Circuit{}, fmt.Errorf("%w: %q: the relay is its own target", ErrInvalidCircuit, s)
	}
	return Circuit{Relay: relay, Target: target}, nil
}

// MustParseCircuit is ParseCircuit for constants in programs and tests; it panics on
// error.
func MustParseCircuit(s string) Circuit {
	c, err := ParseCircuit(s)
	if err != nil {
		panic(err)
	}
	return c
}

// String returns the circuit address in the form ParseCircuit reads.
func (c Circuit) String() string {
	return c.Relay.String() + circuitSuffix + "/p2p/" + c.Target.String()
}

// MarshalText implements encoding.TextMarshaler.
func (c Circuit) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (c *Circuit) UnmarshalText(b []byte) error {
	p, err := ParseCircuit(string(b))
	if err != nil {
		return err
	}
	*c = p
	return nil
}

// circuitMultiaddr returns the transport address a relayed session reports: the relay's
// transport address with /p2p-circuit appended. The relay's peer ID cannot be part of
// it (tendril.Addr keeps /p2p/ outside the multiaddr, see its documentation), so a relayed
// session's RemoteAddr is RELAYTRANSPORT/p2p-circuit/p2p/PEER.
func circuitMultiaddr(relayTransport ma.Multiaddr) ma.Multiaddr {
	c, err := ma.NewComponent("p2p-circuit", "")
	if err != nil {
		panic("relay: go-multiaddr has no /p2p-circuit: " + err.Error())
	}
	out := make(ma.Multiaddr, 0, len(relayTransport)+1)
	out = append(out, relayTransport...)
	return append(out, *c)
}

// IsRelayed reports whether a is a relayed address: a relayed Session's RemoteAddr (or
// LocalAddr) has /p2p-circuit in its transport part.
func IsRelayed(a tendril.Addr) bool {
	for _, c := range a.Transport {
		if c.Code() == ma.P_CIRCUIT {
			return true
		}
	}
	return false
}
