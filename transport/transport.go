// Package transport is the layer under secio: it turns an address into a connection
// (Dial) and accepts connections on an address (Listen). A Service holds a set of
// transports and picks the one that handles each address; secio and the mux then run on
// the net.Conn exactly as over TCP.
//
// The transports in this module are transport/tcp (/ip4|/ip6|/dns.../tcp/N),
// transport/ws (/.../tcp/N/ws and /.../tcp/N/wss, also written /tls/ws) and
// transport/memory (/memory/N, in one process, with per-link delay and rate).
//
// Listening is in two steps, so that the Service can admit each connection by its
// address before reading a byte of it: Accept returns a connection at once, and Upgrade,
// which the Service calls on the connection's own goroutine under the handshake's
// deadline, does whatever must happen before the handshake (a trusted proxy's PROXY
// header, the WebSocket HTTP upgrade).
package transport

import (
	"context"
	"errors"
	"net"
	"net/netip"

	ma "github.com/multiformats/go-multiaddr"
)

// Transport dials and listens on the addresses it handles.
type Transport interface {
	// Handles reports whether the transport dials and listens on addr (a multiaddr
	// without /p2p/).
	Handles(addr ma.Multiaddr) bool
	// Dial connects to addr. ctx bounds everything before the connection is returned
	// (for WebSocket, the HTTP upgrade too).
	Dial(ctx context.Context, addr ma.Multiaddr) (net.Conn, error)
	// Listen binds addr (port 0 picks a free one). ctx bounds only the bind.
	Listen(ctx context.Context, addr ma.Multiaddr, opts ListenOptions) (Listener, error)
}

// ListenOptions is what the Service tells a transport's listeners.
type ListenOptions struct {
	// TrustedProxies lists the networks whose connections may say on whose behalf they
	// come (a PROXY protocol v1/v2 header, an X-Forwarded-For header): the listener
	// believes them and the connection's RemoteAddr becomes the client's. From anyone
	// else, such headers are not read as such (a PROXY header is then the start of a
	// failed handshake; X-Forwarded-For is ignored).
	TrustedProxies []netip.Prefix
}

// Trusted reports whether ip is in o.TrustedProxies.
func (o *ListenOptions) Trusted(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, p := range o.TrustedProxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// Listener accepts connections on one address.
type Listener interface {
	// Accept waits for the next connection and returns it before reading anything from
	// it; it never waits on one connection's bytes, so that a silent client delays
	// no-one. Its RemoteAddr is where it comes from (a trusted proxy's, until Upgrade).
	// After Close, Accept returns an error wrapping net.ErrClosed.
	Accept() (net.Conn, error)
	// Upgrade does what must happen on an accepted connection before the handshake, on
	// the connection's own goroutine, within ctx (the handshake's deadline): read a
	// trusted proxy's header, run the WebSocket HTTP upgrade. It returns the connection
	// to run the handshake on (c itself if there is nothing to do), whose RemoteAddr is
	// the client's. On error the caller closes c.
	Upgrade(ctx context.Context, c net.Conn) (net.Conn, error)
	// Multiaddr returns the bound address.
	Multiaddr() ma.Multiaddr
	// Close stops the listener; connections already accepted are not closed.
	Close() error
}

// Addressed is implemented by connections whose multiaddrs are not those of their
// net.Addrs: a WebSocket connection adds /ws, an in-memory one is /memory/N.
type Addressed interface {
	LocalMultiaddr() ma.Multiaddr
	RemoteMultiaddr() ma.Multiaddr
}

// Relayed is implemented by connections that a third party carries, such as a relay's
// circuit (package relay): a Service prefers a direct session with a peer to one on such
// a connection (see tendril.Session.Relayed).
type Relayed interface {
	Relayed() bool
}

// IsRelayed reports whether c says that a third party carries it.
func IsRelayed(c net.Conn) bool {
	r, ok := c.(Relayed)
	return ok && r.Relayed()
}

// ErrUnsupported is wrapped by the errors of dialling or listening on an address that no
// transport (or not the one asked) handles.
var ErrUnsupported = errors.New("transport: no transport handles the address")

// ErrBadHeader is wrapped by the errors of Upgrade when what a client sent before the
// handshake is malformed or too long (a PROXY header, an HTTP request).
var ErrBadHeader = errors.New("transport: malformed connection header")

// For returns the first of ts that handles addr, or nil.
func For(ts []Transport, addr ma.Multiaddr) Transport {
	for _, t := range ts {
		if t.Handles(addr) {
			return t
		}
	}
	return nil
}
