package ws

import (
	"context"
	"fmt"
	"net"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/transport"
)

// Subprotocol is the WebSocket subprotocol (Sec-WebSocket-Protocol) of tendril's stream.
// Diallers offer it and listeners require it: a WebSocket endpoint that speaks something
// else is refused before a byte of the handshake is sent to it.
const Subprotocol = "tendril"

// Transport dials and listens on WebSocket addresses: a host (/ip4, /ip6, /dns, /dns4,
// /dns6), /tcp/PORT, then exactly /ws, /wss or /tls/ws (the last two are the same: TLS).
type Transport struct {
	cfg *Config
	err error // cfg's validation error: Dial and Listen return it
}

// New returns a WebSocket transport; a nil cfg means DefaultConfig(). An invalid cfg (see
// Config.Validate) makes every Dial and Listen fail with its error.
func New(cfg *Config) *Transport {
	c, err := cfg.withDefaults()
	if err != nil {
		return &Transport{cfg: DefaultConfig(), err: err}
	}
	return &Transport{cfg: c}
}

// Handles reports whether addr is a host, /tcp/PORT and exactly /ws, /wss or /tls/ws.
func (t *Transport) Handles(addr ma.Multiaddr) bool {
	_, ok := parseAddr(addr)
	return ok
}

// Dial connects to addr and runs the WebSocket upgrade, both within ctx. In a browser
// (GOOS=js) the browser's WebSocket does both, and Config.ClientTLS does not apply.
func (t *Transport) Dial(ctx context.Context, addr ma.Multiaddr) (net.Conn, error) {
	tg, err := t.target(addr)
	if err != nil {
		return nil, err
	}
	return t.dial(ctx, tg)
}

// Listen binds addr (port 0 picks a free one); ctx bounds only the bind. A /wss listener
// needs Config.TLS. Listening is not possible in a browser (GOOS=js).
func (t *Transport) Listen(ctx context.Context, addr ma.Multiaddr, opts transport.ListenOptions) (transport.Listener, error) {
	tg, err := t.target(addr)
	if err != nil {
		return nil, err
	}
	return t.listen(ctx, tg, opts)
}

func (t *Transport) target(addr ma.Multiaddr) (target, error) {
	tg, ok := parseAddr(addr)
	if !ok {
		return target{}, fmt.Errorf("%w: %s is not a WebSocket address", transport.ErrUnsupported, addr)
	}
	if t.err != nil {
		return target{}, t.err
	}
	return tg, nil
}

// target is a WebSocket address taken apart.
type target struct {
	addr     ma.Multiaddr
	network  string // "tcp", "tcp4" or "tcp6"
	hostport string // host:port, for dialling, listening and the URL
	host     string // the host alone: the TLS server name
	secure   bool   // /wss or /tls/ws
	suffix   string // what follows /tcp/PORT, as written: "/ws", "/wss" or "/tls/ws"
}

func parseAddr(addr ma.Multiaddr) (target, bool) {
	network, hostport, rest, ok := transport.HostPort(addr)
	if !ok {
		return target{}, false
	}
	tg := target{addr: addr, network: network, hostport: hostport, host: addr[0].Value()}
	switch {
	case len(rest) == 1 && rest[0].Code() == ma.P_WS:
		tg.suffix = "/ws"
	case len(rest) == 1 && rest[0].Code() == ma.P_WSS:
		tg.secure, tg.suffix = true, "/wss"
	case len(rest) == 2 && rest[0].Code() == ma.P_TLS && rest[1].Code() == ma.P_WS:
		tg.secure, tg.suffix = true, "/tls/ws"
	default:
		return target{}, false
	}
	return tg, true
}

// url returns the URL to dial tg at.
func (tg target) url(path string) string {
	if tg.secure {
		return "wss://" + tg.hostport + path
	}
	return "ws://" + tg.hostport + path
}

var _ transport.Transport = (*Transport)(nil)
