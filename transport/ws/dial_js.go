//go:build js

package ws

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/coder/websocket"
	"github.com/tendril-p2p/tendril/transport"
)

// dial opens a browser WebSocket to tg: the browser connects, does TLS for wss and the
// upgrade, and tells nothing of the addresses it used.
func (t *Transport) dial(ctx context.Context, tg target) (net.Conn, error) {
	url := tg.url(t.cfg.Path)
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{Subprotocol}})
	if err != nil {
		if ctx.Err() != nil {
			err = context.Cause(ctx)
		}
		return nil, fmt.Errorf("ws: dial %s: %w", tg.addr, err)
	}
	if p := ws.Subprotocol(); p != Subprotocol {
		ws.CloseNow()
		return nil, fmt.Errorf("ws: dial %s: %w: it answered %q", tg.addr, ErrSubprotocol, p)
	}
	var remote net.Addr = &URLAddr{URL: url, Multiaddr: tg.addr}
	if ip, err := netip.ParseAddr(tg.host); err == nil {
		port, _ := strconv.Atoi(tg.addr[1].Value())
		remote = net.TCPAddrFromAddrPort(netip.AddrPortFrom(ip, uint16(port)))
	}
	return newConn(ws, t.cfg, remote, tg.suffix), nil
}

// listen is refused: a browser cannot accept connections.
func (t *Transport) listen(_ context.Context, tg target, _ transport.ListenOptions) (transport.Listener, error) {
	return nil, fmt.Errorf("%w: %s: a browser cannot listen", transport.ErrUnsupported, tg.addr)
}
