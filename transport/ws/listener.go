//go:build !js

package ws

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/coder/websocket"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/internal/deadline"
	"github.com/tendril-p2p/tendril/internal/proxyhdr"
	"github.com/tendril-p2p/tendril/transport"
)

// Listener accepts WebSocket connections on a TCP address. Accept returns each TCP
// connection as it comes, before reading from it, for the Service to admit it by its
// address; Upgrade then reads a trusted proxy's PROXY header, runs the TLS handshake
// (/wss) and the HTTP upgrade on the connection's own goroutine.
type Listener struct {
	ln   net.Listener
	cfg  *Config
	tls  *tls.Config // nil for /ws
	opts transport.ListenOptions
	tg   target
	addr ma.Multiaddr
}

func (t *Transport) listen(ctx context.Context, tg target, opts transport.ListenOptions) (transport.Listener, error) {
	var tlsCfg *tls.Config
	if tg.secure {
		if t.cfg.TLS == nil {
			return nil, fmt.Errorf("ws: listen %s: %w", tg.addr, ErrNoTLS)
		}
		tlsCfg = t.cfg.TLS.Clone()
		// HTTP/1.1 only: the upgrade does not exist in HTTP/2, which a browser would
		// otherwise pick if the configuration offers it.
		tlsCfg.NextProtos = []string{"http/1.1"}
	}
	lc := net.ListenConfig{KeepAlive: t.cfg.KeepAlive}
	ln, err := lc.Listen(ctx, tg.network, tg.hostport)
	if err != nil {
		return nil, fmt.Errorf("ws: listen %s: %w", tg.addr, err)
	}
	m := multiaddrOf(ln.Addr(), tg.suffix)
	if m == nil {
		ln.Close()
		return nil, fmt.Errorf("ws: listening on %v: no multiaddr for it", ln.Addr())
	}
	return &Listener{ln: ln, cfg: t.cfg, tls: tlsCfg, opts: opts, tg: tg, addr: m}, nil
}

// Accept returns the next TCP connection, unread. After Close it returns an error
// wrapping net.ErrClosed.
func (l *Listener) Accept() (net.Conn, error) { return l.ln.Accept() }

// Multiaddr returns the bound address, with /ws, /wss or /tls/ws as it was asked for.
func (l *Listener) Multiaddr() ma.Multiaddr { return l.addr }

// Close stops the listener; connections already accepted are not closed.
func (l *Listener) Close() error { return l.ln.Close() }

// Upgrade turns c, a connection from Accept, into a WebSocket Conn, within ctx: c's
// deadlines are ctx's while it runs, and ctx's end interrupts it. From a trusted proxy it
// first reads a PROXY header if there is one; on /wss it runs the TLS handshake; then it
// reads one HTTP request (at most Config.MaxRequestHeader bytes) and upgrades it.
//
// A request that is not an upgrade of Config.Path to the tendril subprotocol is answered
// with an HTTP error (404, 405, 426, 400, 431) and the error returned wraps
// transport.ErrBadHeader, as do those of a malformed PROXY header, a failed TLS handshake
// and bytes that are no HTTP request. A request still incomplete when ctx ends (a client
// trickling it) fails with ctx's cause. On error the caller closes c.
//
// The Conn's RemoteAddr is the client's: the PROXY header's, then that of
// X-Forwarded-For or Forwarded if the connection (or the PROXY header's source) is a
// trusted proxy.
func (l *Listener) Upgrade(ctx context.Context, c net.Conn) (net.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("ws: upgrade from %s: %w", c.RemoteAddr(), context.Cause(ctx))
	}
	if d, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(aLongTimeAgo) })
	wc, err := l.upgrade(ctx, c)
	stopped := stop()
	if err != nil && errors.Is(err, transport.ErrBadHeader) {
		return nil, err
	}
	if !stopped || err != nil && deadline.TimedOut(err) {
		if wc != nil {
			wc.ws.CloseNow()
		}
		return nil, fmt.Errorf("ws: upgrade from %s: %w", c.RemoteAddr(), causeOf(ctx, err))
	}
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Time{})
	return wc, nil
}

// upgrade runs Upgrade's steps; c's deadlines are set.
func (l *Listener) upgrade(ctx context.Context, c net.Conn) (*Conn, error) {
	remote := transport.RemoteAddrPort(c)
	conn := c
	if l.opts.Trusted(remote.Addr()) {
		pc, err := proxyhdr.Accept(c, true)
		if err != nil {
			if deadline.TimedOut(err) {
				return nil, err
			}
			return nil, fmt.Errorf("ws: upgrade from %s: %w: %w", remote, transport.ErrBadHeader, err)
		}
		conn = pc
		remote = transport.RemoteAddrPort(pc)
	}
	if l.tls != nil {
		tc := tls.Server(conn, l.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			if deadline.TimedOut(err) || ctx.Err() != nil {
				return nil, err
			}
			return nil, fmt.Errorf("ws: upgrade from %s: %w: TLS handshake: %w", remote, transport.ErrBadHeader, err)
		}
		conn = tc
	}

	lr := &boundedReader{r: conn, n: int64(l.cfg.MaxRequestHeader)}
	br := getRequestReader(lr)
	req, err := http.ReadRequest(br)
	var pre []byte
	if err == nil {
		if n := br.Buffered(); n > 0 {
			// A client may send frames right after its request without waiting for the
			// answer: they are the stream's first bytes.
			pre = make([]byte, n)
			_, _ = io.ReadFull(br, pre)
		}
	}
	putRequestReader(br)
	if err != nil {
		switch {
		case deadline.TimedOut(lr.err):
			return nil, lr.err
		case lr.n <= 0:
			return nil, l.refuse(conn, remote, &refusal{status: http.StatusRequestHeaderFieldsTooLarge,
				reason: fmt.Sprintf("ws: upgrade request longer than %d bytes", l.cfg.MaxRequestHeader)})
		case err == io.EOF || lr.err != nil && lr.err != io.EOF:
			return nil, fmt.Errorf("ws: upgrade from %s: no request: %w", remote, cmpErr(lr.err, err))
		}
		return nil, l.refuse(conn, remote, &refusal{status: http.StatusBadRequest, reason: "ws: malformed HTTP request: " + err.Error()})
	}
	if f := checkRequest(req, l.cfg.Path); f != nil {
		return nil, l.refuse(conn, remote, f)
	}
	client := remote
	if l.opts.Trusted(remote.Addr()) {
		client = proxyhdr.ClientAddr(remote, req.Header, l.opts.Trusted)
	}

	w := newWire(conn, pre)
	rw := &rawResponse{conn: conn, wire: w, h: http.Header{}}
	ws, err := websocket.Accept(rw, req, &acceptOptions)
	if err != nil {
		if rw.status != http.StatusSwitchingProtocols {
			_ = rw.finish()
			return nil, fmt.Errorf("ws: upgrade from %s: %w: %d: %w", remote, transport.ErrBadHeader, rw.status, err)
		}
		return nil, fmt.Errorf("ws: upgrade from %s: %w", remote, err)
	}
	raddr := conn.RemoteAddr()
	if client != remote {
		raddr = net.TCPAddrFromAddrPort(client)
	}
	return newConn(ws, w, l.cfg, false, conn.LocalAddr(), raddr, l.tg.suffix), nil
}

// cmpErr returns the first of errs that is not nil.
func cmpErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// refuse answers a refused request and returns the error saying why.
func (l *Listener) refuse(conn net.Conn, remote netip.AddrPort, f *refusal) error {
	rw := &rawResponse{conn: conn, h: http.Header{}}
	f.answer(rw)
	_ = rw.finish()
	return f.error(remote.String())
}

// causeOf returns why an upgrade that timed out did: ctx's cause. A deadline can pass a
// moment before ctx's timer fires, hence the short wait for it.
func causeOf(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		if _, ok := ctx.Deadline(); ok && deadline.TimedOut(err) {
			t := time.NewTimer(100 * time.Millisecond)
			defer t.Stop()
			select {
			case <-ctx.Done():
			case <-t.C:
			}
		}
	}
	if cause := context.Cause(ctx); cause != nil {
		return cause
	}
	return err
}

var _ transport.Listener = (*Listener)(nil)
