package holepunch

import "errors"

var (
	// ErrInvalidConfig reports a Config that New refuses.
	ErrInvalidConfig = errors.New("holepunch: invalid config")
	// ErrMalformed: the peer sent a message this package cannot parse.
	ErrMalformed = errors.New("holepunch: malformed message")
	// ErrNotRelayed: the peer asked for a punch on a session that is not relayed.
	ErrNotRelayed = errors.New("holepunch: the session is not relayed")
	// ErrRateLimited: the peer asked for more attempts than the limits allow.
	ErrRateLimited = errors.New("holepunch: rate limited")
	// ErrNoAddrs: one end had no address the other may dial.
	ErrNoAddrs = errors.New("holepunch: no address to dial")
	// ErrTimedOut: no direct connection came up within the attempt's time.
	ErrTimedOut = errors.New("holepunch: no direct connection in time")
	// ErrUnsupported: the peer does not run the protocol.
	ErrUnsupported = errors.New("holepunch: the peer does not support hole punching")
	// ErrClosed: the Puncher is closed.
	ErrClosed = errors.New("holepunch: closed")
)
