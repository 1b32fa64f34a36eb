package tendril

import (
	"context"
	"net"

	"github.com/tendril-p2p/tendril/protocol"
	"github.com/tendril-p2p/tendril/secio"
)

// Protocol is a protocol the Service speaks: a name, the versions it supports, and how this
// node serves it: a message Handler, a raw StreamHandler or a RequestHandler (at most one).
// A protocol with none of them is one this node only opens (with OpenStream or Request):
// peers that open it here are refused as for an unknown protocol.
type Protocol struct {
	// Name identifies the protocol on the wire, e.g. "/chat". It must start with "/".
	Name string
	// Versions lists the supported versions ("1.0", "1.1", ...). They are compared as
	// versions, not strings: "10.0" is newer than "9.0".
	Versions []string
	// Select picks the version from the local and the remote lists when this node accepts a
	// stream. Nil: the highest version both support.
	Select protocol.SelectFunc
	// Handler receives whole messages (message mode).
	Handler Handler
	// StreamHandler receives the raw stream (raw mode), for protocols that stream bytes.
	StreamHandler StreamHandler
	// RequestHandler answers requests (request mode, see Session.Request): each request
	// comes on a stream of its own, so that requests never wait behind one another, a
	// requester that gives up frees the work its request started, and a handler may make
	// requests itself.
	RequestHandler RequestHandler
	// MaxMessageSize bounds this protocol's messages, requests and replies, in both
	// directions, below Config.MaxMessageSize (zero: that). A protocol whose messages are
	// small by design (a peer exchange answer, an identify record) says so here, so that a
	// peer cannot make this node read megabytes before the protocol's own checks run.
	MaxMessageSize int
	// OpenOnConnect makes the dialling side open this protocol as soon as a session is
	// established, so that both sides' handlers get Connected without further calls.
	OpenOnConnect bool
	// AllowLegacyTEA lets the protocol run on legacy TEA sessions (ListenLegacy,
	// DialLegacy), which are neither authenticated nor integrity-protected: anyone on the
	// path can read, forge and replay their messages. Off by default: there, this node
	// refuses the protocol to the peer (a typed refusal, protocol.CodeRefused) and its own
	// OpenProtocol fails with ErrInsecureSession.
	AllowLegacyTEA bool
}

func (p *Protocol) info() protocol.Info {
	return protocol.Info{Name: p.Name, Versions: p.Versions, Select: p.Select}
}

// served reports whether this node serves p (has a handler for it): peers may open it.
func (p *Protocol) served() bool {
	return p.Handler != nil || p.StreamHandler != nil || p.RequestHandler != nil
}

// rawServer is what serves a stream of a raw-mode or request-mode protocol the peer opens
// (nil for message mode, and for a protocol this node only opens).
func (p *Protocol) rawServer(svc *Service) StreamHandler {
	switch {
	case p.StreamHandler != nil:
		return p.StreamHandler
	case p.RequestHandler != nil:
		return requestServer{h: p.RequestHandler, svc: svc}
	}
	return nil
}

// streamMode reports whether p's streams are served raw (raw or request mode): each open
// is a stream of its own, and its handler owns it.
func (p *Protocol) streamMode() bool { return p.StreamHandler != nil || p.RequestHandler != nil }

// Handler handles one protocol in message mode. For one session and protocol, the calls are
// made from one goroutine, in order: Connected, then Received for each message, then
// Disconnected. Different sessions call concurrently, so a Handler shared by sessions must be
// safe for concurrent use. A handler that blocks delays only its own stream (and, through
// flow control, the peer's sends on it).
type Handler interface {
	// Connected is called when the protocol stream has been negotiated.
	Connected(c *Context, version string)
	// Received is called for each message. msg belongs to the handler.
	Received(c *Context, msg []byte)
	// Disconnected is called once when the stream has ended, whatever the reason.
	Disconnected(c *Context)
}

// HandlerFuncs adapts plain functions to Handler; nil fields do nothing.
type HandlerFuncs struct {
	OnConnected    func(c *Context, version string)
	OnReceived     func(c *Context, msg []byte)
	OnDisconnected func(c *Context)
}

// Connected calls h.OnConnected if it is set.
func (h HandlerFuncs) Connected(c *Context, version string) {
	if h.OnConnected != nil {
		h.OnConnected(c, version)
	}
}

// Received calls h.OnReceived if it is set.
func (h HandlerFuncs) Received(c *Context, msg []byte) {
	if h.OnReceived != nil {
		h.OnReceived(c, msg)
	}
}

// Disconnected calls h.OnDisconnected if it is set.
func (h HandlerFuncs) Disconnected(c *Context) {
	if h.OnDisconnected != nil {
		h.OnDisconnected(c)
	}
}

// StreamHandler handles one protocol in raw mode: it owns the stream until it returns, and
// the Service closes the stream then. ServeStream is called on its own goroutine; it should
// return when the stream fails or when c.Done() is closed (the peer reset the stream, or
// the session is ending, for whatever reason); see Config.HandlerExitTimeout for one that
// does not. A session runs at most mux.Config.MaxStreams raw handlers at once, including
// handlers of streams that have ended but not returned yet; the peer's streams beyond that
// are refused.
type StreamHandler interface {
	ServeStream(c *Context, version string, stream net.Conn)
}

// StreamHandlerFunc adapts a function to StreamHandler.
type StreamHandlerFunc func(c *Context, version string, stream net.Conn)

// ServeStream calls f.
func (f StreamHandlerFunc) ServeStream(c *Context, version string, stream net.Conn) {
	f(c, version, stream)
}

// Context is what a handler knows about its stream: the session, the protocol and version,
// and how to answer. It is valid for the stream's lifetime.
type Context struct {
	ps *protoStream
}

// Session returns the session the stream belongs to.
func (c *Context) Session() *Session { return c.ps.sess }

// Peer returns the remote peer's ID (zero for legacy TEA sessions).
func (c *Context) Peer() secio.PeerID { return c.ps.sess.peer }

// Protocol returns the protocol's name.
func (c *Context) Protocol() string { return c.ps.proto.Name }

// Version returns the negotiated version.
func (c *Context) Version() string { return c.ps.version }

// Outbound reports whether this node opened the stream.
func (c *Context) Outbound() bool { return c.ps.outbound }

// Done is closed when the stream is ending: reset or closed by either side (a raw stream:
// reset by either side, or closed by both), or its session ending, whatever ended it
// (closed locally, connection lost or reset, keepalive timeout, trimmed by admission). A
// handler that keeps running for Config.HandlerExitTimeout after its session ended (or
// briefly past the deadline of the Service's Shutdown) is abandoned: the session is
// unregistered without it.
func (c *Context) Done() <-chan struct{} { return c.ps.closing }

// Send queues msg on this stream without blocking; it returns ErrSessionBlocked if the
// session's send queue is full. msg may be reused once Send returns.
func (c *Context) Send(msg []byte) error { return c.ps.send(context.Background(), msg, false) }

// SendContext queues msg, waiting under ctx while the session's send queue is full.
// Do not call it from a Received call of the same session if the peer may be doing the same:
// two handlers waiting for each other's queue would only end with ctx.
func (c *Context) SendContext(ctx context.Context, msg []byte) error {
	return c.ps.send(ctx, msg, true)
}

// Close ends the stream gracefully: messages already queued are sent, then the stream is
// closed; Disconnected follows once the peer has closed its side too.
func (c *Context) Close() error {
	c.ps.closeLocal()
	return nil
}
