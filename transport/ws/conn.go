package ws

import (
	"net"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/transport"
)

// Conn is a byte stream carried in binary WebSocket messages: what Dial returns, and what
// a Listener's or a Handler's Upgrade returns. It implements net.Conn and
// transport.Addressed.
//
// Each Write is sent as one message, or as several of at most Config.MaxMessage bytes;
// Read returns the bytes of the messages received in order, whatever their boundaries, so
// the stream is the same as over TCP. A text message, or a message longer than
// Config.MaxMessage, closes the connection (ErrTextMessage, ErrMessageTooBig).
//
// Deadlines behave as TCP's: a Read or Write past its deadline fails with
// os.ErrDeadlineExceeded, a net.Error whose Timeout method reports true, and the
// connection stays usable. Natively, a Read that a deadline interrupts in the middle of a
// frame loses nothing: the next Read goes on where it stopped. A Write that a deadline
// interrupts returns the timeout with its message accepted whole, and what it could not
// send goes out first in the next Write (or Close). Over /wss a write deadline that
// interrupts a write fails every later Write, as on any crypto/tls connection.
//
// Natively the Conn answers the peer's pings (the latest of a burst), ignores its pongs,
// and closes the connection on a frame that breaks the protocol (ErrBadFrame, status
// 1002).
//
// Close sends a close frame (status 1000) and waits, for at most Config.CloseTimeout, for
// the peer's. A close frame from the peer with status 1000 or 1001 is the end of the
// stream: Read returns io.EOF. There is no half-close (CloseWrite): a WebSocket close
// frame ends both directions.
type Conn struct {
	connIO
	local, remote net.Addr
	// suffix is how the listener or the address dialled spells the WebSocket part of the
	// multiaddrs: "/ws", "/wss" or "/tls/ws".
	suffix string
}

// LocalAddr returns the local TCP address; in a browser, which does not tell it, an
// address whose String is "browser".
func (c *Conn) LocalAddr() net.Addr { return c.local }

// RemoteAddr returns the remote TCP address: the client's, when a trusted proxy named it
// (a PROXY header, X-Forwarded-For, Forwarded); the server's when dialling. In a browser
// it is the server's if the address dialled was an IP address, else an address whose
// String is the URL dialled.
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// LocalMultiaddr returns /ip4|/ip6/IP/tcp/PORT followed by /ws, /wss or /tls/ws, or nil if
// the local address is not known.
func (c *Conn) LocalMultiaddr() ma.Multiaddr { return multiaddrOf(c.local, c.suffix) }

// RemoteMultiaddr returns the remote address as LocalMultiaddr does. In a browser, for an
// address dialled by name, it is the address dialled.
func (c *Conn) RemoteMultiaddr() ma.Multiaddr { return multiaddrOf(c.remote, c.suffix) }

// multiaddrOf returns a's multiaddr followed by suffix: a TCP address, or the address a
// browser dialled.
func multiaddrOf(a net.Addr, suffix string) ma.Multiaddr {
	switch a := a.(type) {
	case *net.TCPAddr:
		m, err := ma.NewMultiaddr(transport.IPPort(a.AddrPort(), "tcp") + suffix)
		if err != nil {
			return nil
		}
		return m
	case *URLAddr:
		return a.Multiaddr
	}
	return nil
}

// URLAddr is the remote address of a connection a browser dialled by name: the browser
// does not say which IP address it connected to.
type URLAddr struct {
	URL       string       // the URL dialled
	Multiaddr ma.Multiaddr // the address dialled
}

// Network returns "ws" or "wss".
func (a *URLAddr) Network() string {
	if len(a.URL) > 3 && a.URL[:4] == "wss:" {
		return "wss"
	}
	return "ws"
}

// String returns the URL dialled.
func (a *URLAddr) String() string { return a.URL }

var (
	_ net.Conn            = (*Conn)(nil)
	_ transport.Addressed = (*Conn)(nil)
)
