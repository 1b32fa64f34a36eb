package mdns

import "errors"

// Sentinel errors. Errors returned by this package wrap them; test with errors.Is.
var (
	// ErrInvalidConfig means a Config field is out of range; the error names the field.
	ErrInvalidConfig = errors.New("mdns: invalid config")
	// ErrPayloadTooLarge means a payload exceeds MaxPayload bytes.
	ErrPayloadTooLarge = errors.New("mdns: payload too large")
	// ErrClosed is returned by Start and SetPayload on a closed Service.
	ErrClosed = errors.New("mdns: service closed")
	// ErrStarted is returned by a second Start.
	ErrStarted = errors.New("mdns: service already started")
	// ErrNoSocket means neither the IPv4 nor the IPv6 multicast socket could be opened.
	ErrNoSocket = errors.New("mdns: no multicast socket")

	// errMalformed is why a packet that does not parse as DNS was dropped.
	errMalformed = errors.New("mdns: malformed packet")
	// errTooManyRecords is why a packet whose header announces more than maxRecords records
	// was dropped before it was parsed: parsing cost is bounded by the header, not the body.
	errTooManyRecords = errors.New("mdns: too many records in packet")
	// errTooLarge is why a packet longer than maxPacket was dropped.
	errTooLarge = errors.New("mdns: packet too large")
)
