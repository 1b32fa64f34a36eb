//go:build !js

package ws

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/internal/deadline"
	"github.com/tendril-p2p/tendril/internal/proxyhdr"
	"github.com/tendril-p2p/tendril/transport"
)

// Handler serves tendril's WebSocket endpoint on an HTTP server the caller runs (next to
// a web application, behind its TLS), and is the transport.Listener of the connections it
// receives: give it to Service.AddListener and mount it on the server at Config.Path.
//
// ServeHTTP checks the request (answering 404, 405, 426 or 400 as a Listener does) and
// holds it for Accept, in a backlog of Config.Backlog requests (503 at once when it is
// full). What Accept returns is a placeholder whose RemoteAddr is the client's (with the
// trusted proxies of the ListenOptions applied to X-Forwarded-For and Forwarded), so that
// the Service admits the client before anything is done for it; Upgrade then answers 101
// and hijacks the connection. A request that the Service does not take up within
// Config.PendingTimeout, that it refuses (closing the placeholder), or that is pending
// when the Handler is closed is answered 503.
type Handler struct {
	cfg     *Config
	opts    transport.ListenOptions
	addr    ma.Multiaddr
	suffix  string
	backlog chan *pendingConn

	closeOnce sync.Once
	closed    chan struct{}
}

// NewHandler returns a Handler; a nil cfg means DefaultConfig(). addr is the address
// clients reach the HTTP server at, which Multiaddr returns and which says whether the
// connections are /ws or /wss (the HTTP server, or a proxy in front of it, does TLS).
func NewHandler(cfg *Config, opts transport.ListenOptions, addr ma.Multiaddr) (*Handler, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	tg, ok := parseAddr(addr)
	if !ok {
		return nil, fmt.Errorf("%w: %s is not a WebSocket address", transport.ErrUnsupported, addr)
	}
	opts.TrustedProxies = append([]netip.Prefix(nil), opts.TrustedProxies...)
	return &Handler{
		cfg:     c,
		opts:    opts,
		addr:    addr,
		suffix:  tg.suffix,
		backlog: make(chan *pendingConn, c.Backlog),
		closed:  make(chan struct{}),
	}, nil
}

// pendingConn states: a request waits for Upgrade, which takes it, unless it is dropped
// first (the wait ended, the Service closed it, the Handler closed). Whoever moves it out
// of pendingWaiting closes done once it has finished with the ResponseWriter.
const (
	pendingWaiting int32 = iota
	pendingTaken
	pendingDropped
)

// pendingConn is a request held by ServeHTTP for the Service: what Accept returns.
type pendingConn struct {
	h             *Handler
	w             http.ResponseWriter
	r             *http.Request
	local, remote net.Addr
	state         atomic.Int32
	done          chan struct{}
}

// ServeHTTP checks an upgrade request and holds it until the Service has upgraded or
// refused it; see Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f := checkRequest(r, h.cfg.Path); f != nil {
		f.answer(w)
		return
	}
	p := &pendingConn{h: h, w: w, r: r, remote: h.clientAddr(r), done: make(chan struct{})}
	p.local, _ = r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	select {
	case <-h.closed:
		unavailable(w, "ws: the endpoint is closed")
		return
	default:
	}
	select {
	case h.backlog <- p:
	default:
		unavailable(w, "ws: too many upgrades waiting")
		return
	}
	t := time.NewTimer(h.cfg.PendingTimeout)
	defer t.Stop()
	select {
	case <-p.done:
	case <-r.Context().Done():
	case <-t.C:
	case <-h.closed:
	}
	if p.state.CompareAndSwap(pendingWaiting, pendingDropped) {
		close(p.done)
		if r.Context().Err() == nil {
			unavailable(w, "ws: the request was not taken up in time")
		}
		return
	}
	<-p.done // Upgrade may be using w: it is bounded by its context
	if p.state.Load() == pendingDropped {
		unavailable(w, "ws: the connection was refused")
	}
}

// clientAddr returns the client's address: r's remote address, or the one a trusted proxy
// names in X-Forwarded-For or Forwarded.
func (h *Handler) clientAddr(r *http.Request) net.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return httpAddr(r.RemoteAddr) // a server on a Unix socket, say
	}
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	if h.opts.Trusted(ap.Addr()) {
		ap = proxyhdr.ClientAddr(ap, r.Header, h.opts.Trusted)
	}
	return net.TCPAddrFromAddrPort(ap)
}

func unavailable(w http.ResponseWriter, reason string) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, reason, http.StatusServiceUnavailable)
}

// Accept returns the next request held by ServeHTTP, as a placeholder connection to give
// to Upgrade. After Close it returns an error wrapping net.ErrClosed.
func (h *Handler) Accept() (net.Conn, error) {
	for {
		select {
		case <-h.closed:
			return nil, fmt.Errorf("ws: accept: %w", net.ErrClosed)
		default:
		}
		select {
		case p := <-h.backlog:
			if p.state.Load() == pendingWaiting {
				return p, nil
			}
		case <-h.closed:
			return nil, fmt.Errorf("ws: accept: %w", net.ErrClosed)
		}
	}
}

// Upgrade answers the request held by c (a placeholder from Accept) with 101 and returns
// the WebSocket Conn, within ctx (a write deadline on the HTTP connection). It fails if
// the request is no longer held (ServeHTTP's wait ended, or the client left).
func (h *Handler) Upgrade(ctx context.Context, c net.Conn) (net.Conn, error) {
	p, ok := c.(*pendingConn)
	if !ok || p.h != h {
		return nil, errors.New("ws: Handler.Upgrade of a connection it did not accept")
	}
	if !p.state.CompareAndSwap(pendingWaiting, pendingTaken) {
		return nil, fmt.Errorf("ws: upgrade from %s: the request is no longer held", p.remote)
	}
	defer close(p.done)
	if err := ctx.Err(); err != nil {
		p.state.Store(pendingDropped) // ServeHTTP answers 503
		return nil, fmt.Errorf("ws: upgrade from %s: %w", p.remote, context.Cause(ctx))
	}

	rc := http.NewResponseController(p.w)
	if d, ok := ctx.Deadline(); ok {
		_ = rc.SetWriteDeadline(d)
	}
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(fired)
		_ = rc.SetWriteDeadline(aLongTimeAgo)
	})
	hw := &hijackWriter{ResponseWriter: p.w}
	ws, err := websocket.Accept(hw, p.r, &acceptOptions)
	stopped := stop()
	if !stopped {
		<-fired // the ResponseController is not used once ServeHTTP returns
	}
	if err != nil || !stopped {
		if ws != nil {
			ws.CloseNow()
		} else if hw.wire != nil {
			hw.wire.Close()
		}
		if !stopped || deadline.TimedOut(err) {
			err = causeOf(ctx, err)
		}
		return nil, fmt.Errorf("ws: upgrade from %s: %w", p.remote, err)
	}
	// The hijacked connection keeps the write deadline set above and any the server set.
	_ = hw.wire.SetDeadline(time.Time{})
	return newConn(ws, hw.wire, h.cfg, false, hw.wire.LocalAddr(), p.remote, h.suffix), nil
}

// Multiaddr returns the address given to NewHandler.
func (h *Handler) Multiaddr() ma.Multiaddr { return h.addr }

// Close stops Accept (it returns net.ErrClosed) and answers the requests still held 503.
// Connections already upgraded are not closed.
func (h *Handler) Close() error {
	h.closeOnce.Do(func() { close(h.closed) })
	return nil
}

// hijackWriter hands coder/websocket the hijacked connection as a wire, with what the
// server had buffered of it, and a small bufio pair of its own.
type hijackWriter struct {
	http.ResponseWriter
	wire *wire
}

func (hw *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(hw.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	var pre []byte
	if n := brw.Reader.Buffered(); n > 0 {
		pre = make([]byte, n)
		_, _ = io.ReadFull(brw.Reader, pre)
	}
	hw.wire = newWire(c, pre)
	return hw.wire, bufio.NewReadWriter(bufio.NewReaderSize(hw.wire, serverReadBuffer), bufio.NewWriterSize(hw.wire, serverWriteBuffer)), nil
}

// The placeholder's net.Conn methods: there is nothing to read or write before Upgrade.

var errNotUpgraded = errors.New("ws: connection not upgraded yet")

func (p *pendingConn) Read([]byte) (int, error)         { return 0, errNotUpgraded }
func (p *pendingConn) Write([]byte) (int, error)        { return 0, errNotUpgraded }
func (p *pendingConn) LocalAddr() net.Addr              { return p.local }
func (p *pendingConn) RemoteAddr() net.Addr             { return p.remote }
func (p *pendingConn) SetDeadline(time.Time) error      { return nil }
func (p *pendingConn) SetReadDeadline(time.Time) error  { return nil }
func (p *pendingConn) SetWriteDeadline(time.Time) error { return nil }

// Close drops the request if Upgrade has not taken it (ServeHTTP answers 503); after
// Upgrade, it does nothing (the Conn Upgrade returned is the connection).
func (p *pendingConn) Close() error {
	if p.state.CompareAndSwap(pendingWaiting, pendingDropped) {
		close(p.done)
	}
	return nil
}

// httpAddr is a remote address of an HTTP request that is not an IP address and port.
type httpAddr string

func (a httpAddr) Network() string { return "http" }
func (a httpAddr) String() string  { return string(a) }

var _ transport.Listener = (*Handler)(nil)
