package ws

import "errors"

// Errors returned by this package. Errors that carry details wrap one of these sentinels
// (or transport.ErrBadHeader, transport.ErrUnsupported), so callers test them with
// errors.Is.
var (
	// ErrInvalidConfig reports a Config that fails Validate.
	ErrInvalidConfig = errors.New("ws: invalid config")

	// ErrNoTLS reports a /wss (or /tls/ws) listener asked of a Transport whose Config has
	// no TLS server configuration.
	ErrNoTLS = errors.New("ws: /wss listener without Config.TLS")

	// ErrMessageTooBig reports a WebSocket message longer than Config.MaxMessage from the
	// peer (the connection is closed with status 1009, message too big), or the peer's
	// closing the connection with that status because one of ours was longer than it
	// accepts.
	ErrMessageTooBig = errors.New("ws: message too big")

	// ErrTextMessage reports a text message from the peer: tendril's stream is carried in
	// binary messages only, and the connection is closed with status 1008 (policy
	// violation).
	ErrTextMessage = errors.New("ws: text message where only binary ones are accepted")

	// ErrStalledFrame reports a read whose deadline passed in the middle of a WebSocket
	// frame that then did not arrive in full within Config.FrameGrace. The frame cannot be
	// resumed, so the connection is closed; unlike a deadline that passes between frames,
	// this error is permanent and is not a timeout.
	ErrStalledFrame = errors.New("ws: read deadline passed in a frame that then stalled")

	// ErrSubprotocol reports a server that did not agree to the "tendril" subprotocol.
	ErrSubprotocol = errors.New("ws: peer did not agree to the tendril subprotocol")
)
