// Package tcp is tendril's TCP transport: /ip4|/ip6|/dns|/dns4|/dns6/HOST/tcp/PORT.
//
// Listeners set SO_REUSEPORT (where the system has it), so that DialFrom can open
// connections from a listen port: a hole punch needs both ends to connect from the ports
// their NATs map for the listeners, at the same moment. Listen still fails with "address
// already in use" when another socket holds the port: it binds once without the option
// first.
//
// Connections from trusted proxies (transport.ListenOptions.TrustedProxies) may begin with
// a PROXY protocol v1 or v2 header, which Upgrade reads and believes: the connection's
// RemoteAddr is then the client's. From anyone else, nothing is read before the handshake.
package tcp

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/internal/proxyhdr"
	"github.com/tendril-p2p/tendril/transport"
)

// Config configures a Transport. The zero value is usable.
type Config struct {
	// KeepAlive is the TCP keepalive period of dialled and accepted connections, as in
	// net.Dialer: 0 the operating system's default, negative off (the Service turns it off
	// while its own keepalive pings every session).
	KeepAlive time.Duration

	// DisableReusePort makes listeners exclusive (no SO_REUSEPORT); DialFrom then fails
	// to connect from a listen port.
	DisableReusePort bool
}

// Transport dials and listens on TCP addresses.
type Transport struct {
	keepAlive time.Duration
	reusePort bool
}

// New returns a TCP transport; a nil cfg means the defaults.
func New(cfg *Config) *Transport {
	if cfg == nil {
		cfg = &Config{}
	}
	return &Transport{keepAlive: cfg.KeepAlive, reusePort: reusePortSupported && !cfg.DisableReusePort}
}

// Handles reports whether addr is exactly a host and /tcp/PORT.
func (t *Transport) Handles(addr ma.Multiaddr) bool {
	_, _, rest, ok := transport.HostPort(addr)
	return ok && len(rest) == 0
}

// Dial connects to addr.
func (t *Transport) Dial(ctx context.Context, addr ma.Multiaddr) (net.Conn, error) {
	network, hostport, err := t.split(addr)
	if err != nil {
		return nil, err
	}
	d := net.Dialer{KeepAlive: t.keepAlive}
	return d.DialContext(ctx, network, hostport)
}

// DialFrom connects to addr from the local address from (its IP may be unspecified: the
// system picks the source address; its port is typically a listen port of this
// transport's), with SO_REUSEPORT, so that the connection shares the port with the
// listener. This is the dial of a TCP hole punch: the peer's NAT sees the connection come
// from the address its own side was told, and a simultaneous open from both ends
// becomes one connection. It fails (ErrUnsupported) where SO_REUSEPORT is not available.
func (t *Transport) DialFrom(ctx context.Context, from netip.AddrPort, addr ma.Multiaddr) (net.Conn, error) {
	network, hostport, err := t.split(addr)
	if err != nil {
		return nil, err
	}
	if !reusePortSupported {
		return nil, fmt.Errorf("%w: SO_REUSEPORT is not available here", transport.ErrUnsupported)
	}
	d := net.Dialer{
		KeepAlive: t.keepAlive,
		LocalAddr: net.TCPAddrFromAddrPort(from),
		Control:   reusePort,
	}
	return d.DialContext(ctx, network, hostport)
}

// Listen binds addr.
func (t *Transport) Listen(ctx context.Context, addr ma.Multiaddr, opts transport.ListenOptions) (transport.Listener, error) {
	network, hostport, err := t.split(addr)
	if err != nil {
		return nil, err
	}
	lc := net.ListenConfig{KeepAlive: t.keepAlive}
	ln, err := lc.Listen(ctx, network, hostport)
	if err != nil {
		return nil, err
	}
	if t.reusePort {
		// The exclusive bind above proved the port free (port 0 picked one); bound again
		// with SO_REUSEPORT, it can be shared with DialFrom's connections. Another user's
		// sockets cannot join it (the kernel allows only the same user's).
		bound := ln.Addr().String()
		ln.Close()
		lc.Control = reusePort
		if ln, err = lc.Listen(ctx, network, bound); err != nil {
			return nil, err
		}
	}
	m := transport.FromNetAddr(ln.Addr())
	if m == nil {
		ln.Close()
		return nil, fmt.Errorf("tcp: listening on %v: no multiaddr for it", ln.Addr())
	}
	return &listener{ln: ln, opts: opts, addr: m}, nil
}

func (t *Transport) split(addr ma.Multiaddr) (network, hostport string, err error) {
	network, hostport, rest, ok := transport.HostPort(addr)
	if !ok || len(rest) != 0 {
		return "", "", fmt.Errorf("%w: %s is not a TCP address", transport.ErrUnsupported, addr)
	}
	return network, hostport, nil
}

// listener is a TCP listener.
type listener struct {
	ln   net.Listener
	opts transport.ListenOptions
	addr ma.Multiaddr
}

func (l *listener) Accept() (net.Conn, error) { return l.ln.Accept() }

// Upgrade reads a trusted proxy's PROXY header, if the connection comes from one and
// begins with it; ctx bounds the read.
func (l *listener) Upgrade(ctx context.Context, c net.Conn) (net.Conn, error) {
	if !l.opts.Trusted(transport.RemoteAddrPort(c).Addr()) {
		return c, nil
	}
	return ReadProxyHeader(ctx, c)
}

// ReadProxyHeader runs proxyhdr.Accept on c (a connection from a trusted proxy) within
// ctx: c's deadline is ctx's, and ctx's end interrupts the read.
func ReadProxyHeader(ctx context.Context, c net.Conn) (net.Conn, error) {
	if d, ok := ctx.Deadline(); ok {
		_ = c.SetReadDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetReadDeadline(time.Unix(1, 0)) })
	pc, err := proxyhdr.Accept(c, true)
	if !stop() {
		return nil, context.Cause(ctx)
	}
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", transport.ErrBadHeader, err)
	}
	return pc, nil
}

func (l *listener) Multiaddr() ma.Multiaddr { return l.addr }
func (l *listener) Close() error            { return l.ln.Close() }
