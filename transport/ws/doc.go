// Package ws is tendril's WebSocket transport: /ip4|/ip6|/dns|/dns4|/dns6/HOST/tcp/PORT
// followed by /ws, or by /wss or /tls/ws for WebSocket over TLS. It carries tendril's
// byte stream (the secio handshake, then the mux) in binary WebSocket messages, so that
// browsers (GOOS=js GOARCH=wasm, where Dial uses the browser's WebSocket) and nodes on
// networks that let only HTTP(S) out can join.
//
// A Transport dials and listens. Its Listener reads the HTTP upgrade itself, on the
// connection's own goroutine, after the Service has admitted the connection by its
// address (see transport.Listener); a Handler serves the same endpoint on an HTTP server
// the caller already runs. Both speak the "tendril" subprotocol (Subprotocol) at
// Config.Path and accept any Origin: tendril authenticates peers in its own handshake.
//
// Connections are Conns: net.Conns with TCP's deadline behaviour and the TCP addresses
// (the client's, behind a trusted proxy), whose multiaddrs end in /ws or /wss. The
// WebSocket protocol is github.com/coder/websocket's.
package ws
