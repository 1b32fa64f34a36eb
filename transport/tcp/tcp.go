// Package tcp is tendril's TCP transport: /ip4|/ip6|/dns|/dns4|/dns6/HOST/tcp/PORT.
//
// Connections from trusted proxies (transport.ListenOptions.TrustedProxies) may begin with
// a PROXY protocol v1 or v2 header, which Upgrade reads and believes: the connection's
// RemoteAddr is then the client's. From anyone else, nothing is read before the handshake.
package tcp

import (
	"context"
	"fmt"
	"net"
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
}

// Transport dials and listens on TCP addresses.
type Transport struct {
	keepAlive time.Duration
}

// New returns a TCP transport; a nil cfg means the defaults.
func New(cfg *Config) *Transport {
	if cfg == nil {
		cfg = &Config{}
	}
	return &Transport{keepAlive: cfg.KeepAlive}
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
