package portmap

import (
	"errors"
	"fmt"
)

// Sentinel errors. Errors returned by this package wrap them; test with errors.Is.
var (
	// ErrInvalidConfig means a Config field is out of range; the error names the field.
	ErrInvalidConfig = errors.New("portmap: invalid config")
	// ErrClosed is returned by Start on a closed Mapper.
	ErrClosed = errors.New("portmap: mapper closed")
	// ErrStarted is returned by a second Start.
	ErrStarted = errors.New("portmap: mapper already started")
	// ErrNoGateway means no gateway was found: no default route, no UPnP device answered
	// from an acceptable address, or none offered a WAN connection service.
	ErrNoGateway = errors.New("portmap: no gateway")
	// ErrRefused means the gateway answered and said no (a NAT-PMP result code or a
	// UPnP fault); see GatewayError for the code.
	ErrRefused = errors.New("portmap: gateway refused")
	// ErrBadResponse means the gateway's answer was malformed, inconsistent with the
	// request, or not an answer at all (wrong version, size, opcode or port; garbage).
	ErrBadResponse = errors.New("portmap: bad response from gateway")
	// ErrBadExternalAddr means the gateway reported an external address that no one could
	// reach: unspecified (0.0.0.0), loopback, multicast, broadcast, link-local, or not an
	// IPv4 address at all. A private or shared (CGNAT) address is not an error: the
	// Mapping says DoubleNAT.
	ErrBadExternalAddr = errors.New("portmap: unusable external address")
	// ErrUntrustedGateway means a UPnP device pointed us at a host other than itself (its
	// description, control URL or a redirect), or answered from off the local network.
	// Following it would let a LAN device aim our requests at a third party.
	ErrUntrustedGateway = errors.New("portmap: gateway points at another host")
	// ErrTooLarge means a gateway's description or SOAP answer exceeded its size cap.
	ErrTooLarge = errors.New("portmap: gateway response too large")
	// ErrUnreachable means the gateway could not be reached: nothing listens on its
	// NAT-PMP port or its UPnP control URL, or the network is down.
	ErrUnreachable = errors.New("portmap: gateway unreachable")
	// ErrTimeout means the gateway did not answer within RequestTimeout.
	ErrTimeout = errors.New("portmap: gateway timed out")
)

// GatewayError is a refusal from the gateway: a NAT-PMP result code (RFC 6886 section
// 3.5) or a UPnP error code (IGD WANIPConnection, e.g. 718 ConflictInMappingEntry). It
// wraps ErrRefused.
type GatewayError struct {
	Method Method
	// Code is the gateway's result code.
	Code int
}

func (e *GatewayError) Error() string {
	return fmt.Sprintf("portmap: %s gateway refused: code %d (%s)", e.Method, e.Code, e.meaning())
}

// Unwrap makes errors.Is(err, ErrRefused) true.
func (e *GatewayError) Unwrap() error { return ErrRefused }

func (e *GatewayError) meaning() string {
	switch e.Method {
	case NATPMP:
		switch e.Code {
		case 1:
			return "unsupported version"
		case 2:
			return "not authorized"
		case 3:
			return "network failure"
		case 4:
			return "out of resources"
		case 5:
			return "unsupported opcode"
		}
	case UPnP:
		switch e.Code {
		case upnpNotAuthorized:
			return "not authorized"
		case upnpConflict:
			return "conflict in mapping entry"
		case upnpSamePortValues:
			return "internal and external ports must be the same"
		case upnpOnlyPermanentLeases:
			return "only permanent leases supported"
		case upnpNoSuchEntry:
			return "no such entry"
		case upnpActionNotAuthorized:
			return "action not authorized"
		}
	}
	return "unknown"
}
