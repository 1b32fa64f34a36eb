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

	// ErrBadFrame reports a frame from the peer that breaks the WebSocket protocol (RFC
	// 6455): reserved bits set, an unknown opcode, a client's frame unmasked or a
	// server's masked, a control frame fragmented or longer than 125 bytes, a
	// continuation outside a message or a new message inside one. The connection is
	// closed with status 1002 (protocol error).
	ErrBadFrame = errors.New("ws: frame breaks the WebSocket protocol")

	// ErrStalledFrame is no longer returned: a read whose deadline passes in the middle of
	// a frame times out as any other and loses nothing (see Config.FrameGrace).
	//
	// Deprecated: kept so that code testing for it still compiles.
	ErrStalledFrame = errors.New("ws: read deadline passed in a frame that then stalled")

	// ErrSubprotocol reports a server that did not agree to the "tendril" subprotocol.
	ErrSubprotocol = errors.New("ws: peer did not agree to the tendril subprotocol")
)
