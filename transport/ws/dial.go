//go:build !js

package ws

import (
	"bufio"
	"context"
	"crypto/sha1"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/tendril-p2p/tendril/internal/deadline"
)

// dial connects to tg and runs the client side of the upgrade: coder/websocket makes the
// request and checks the answer, and upgradeTrip carries the exchange over a connection of
// its own making, so that the Conn has the TCP connection's addresses and deadlines.
func (t *Transport) dial(ctx context.Context, tg target) (net.Conn, error) {
	trip := &upgradeTrip{cfg: t.cfg, tg: tg}
	ws, _, err := websocket.Dial(ctx, tg.url(t.cfg.Path), &websocket.DialOptions{
		HTTPClient:   &http.Client{Transport: trip},
		Subprotocols: []string{Subprotocol},
	})
	if err != nil {
		if trip.wire != nil {
			trip.wire.Close()
		}
		if ctx.Err() != nil || deadline.TimedOut(err) {
			err = causeOf(ctx, err)
		}
		return nil, fmt.Errorf("ws: dial %s: %w", tg.addr, err)
	}
	return newConn(ws, trip.wire, t.cfg, true, trip.wire.LocalAddr(), trip.wire.RemoteAddr(), tg.suffix), nil
}

// upgradeTrip is the http.RoundTripper of one dial: it connects (TCP, then TLS for /wss),
// writes the upgrade request, reads the answer and checks it, all within the request's
// context, and hands the connection back as the response's body, which coder/websocket
// takes for the WebSocket connection's.
type upgradeTrip struct {
	cfg  *Config
	tg   target
	wire *wire // the upgraded connection, once there is one
}

func (u *upgradeTrip) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	d := net.Dialer{KeepAlive: u.cfg.KeepAlive}
	raw, err := d.DialContext(ctx, u.tg.network, u.tg.hostport)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = raw.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = raw.SetDeadline(aLongTimeAgo) })
	resp, c, pre, err := u.exchange(ctx, raw, req)
	if !stop() && err == nil {
		err = context.Cause(ctx)
	}
	if err != nil {
		raw.Close()
		return nil, err
	}
	_ = c.SetDeadline(time.Time{})
	u.wire = newWire(c, pre)
	resp.Body = u.wire
	return resp, nil
}

// exchange runs the TLS handshake (for /wss) and the HTTP exchange on raw. It returns the
// checked response, the connection to go on with and what was read past the response.
func (u *upgradeTrip) exchange(ctx context.Context, raw net.Conn, req *http.Request) (*http.Response, net.Conn, []byte, error) {
	c := raw
	if u.tg.secure {
		tc := tls.Client(raw, u.clientTLS())
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, nil, nil, err
		}
		c = tc
	}
	if err := req.Write(c); err != nil {
		return nil, nil, nil, err
	}
	lr := &boundedReader{r: c, n: int64(u.cfg.MaxRequestHeader)}
	br := bufio.NewReaderSize(lr, requestBuffer)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		if lr.err != nil && lr.err != io.EOF {
			return nil, nil, nil, lr.err
		}
		if lr.n <= 0 {
			return nil, nil, nil, fmt.Errorf("ws: the server's answer is longer than %d bytes", u.cfg.MaxRequestHeader)
		}
		return nil, nil, nil, fmt.Errorf("ws: reading the server's answer: %w", err)
	}
	if err := checkResponse(req, resp); err != nil {
		return nil, nil, nil, err
	}
	var pre []byte
	if n := br.Buffered(); n > 0 {
		pre = make([]byte, n)
		_, _ = io.ReadFull(br, pre)
	}
	return resp, c, pre, nil
}

// clientTLS returns the TLS configuration to dial the target with.
func (u *upgradeTrip) clientTLS() *tls.Config {
	var cfg *tls.Config
	if u.cfg.ClientTLS != nil {
		cfg = u.cfg.ClientTLS.Clone()
	} else {
		cfg = &tls.Config{}
	}
	if cfg.ServerName == "" {
		cfg.ServerName = u.tg.host
	}
	if len(cfg.NextProtos) == 0 {
		// An HTTP/2 server would otherwise pick h2, where this upgrade does not exist.
		cfg.NextProtos = []string{"http/1.1"}
	}
	return cfg
}

// checkResponse checks the server's answer as coder/websocket is about to, so that an
// answer it would refuse is refused here, with the reason, and coder/websocket never
// reads a body from the upgraded connection (it waits seconds for one after a refusal);
// and it requires the tendril subprotocol, which coder/websocket lets a server omit.
func checkResponse(req *http.Request, resp *http.Response) error {
	if resp.StatusCode != http.StatusSwitchingProtocols {
		msg := ""
		if resp.ContentLength > 0 {
			// An error page of a known length, as this package's listeners send: its
			// first line says why.
			b, _ := io.ReadAll(io.LimitReader(resp.Body, min(resp.ContentLength, 512)))
			msg, _, _ = strings.Cut(string(b), "\n")
			msg = ": " + msg
		}
		return fmt.Errorf("ws: the server answered %q%s", resp.Status, msg)
	}
	switch {
	case !hasToken(resp.Header, "Connection", "upgrade") || !hasToken(resp.Header, "Upgrade", "websocket"):
		return errors.New("ws: the server's answer is not a WebSocket upgrade")
	case resp.Header.Get("Sec-WebSocket-Accept") != acceptKey(req.Header.Get("Sec-WebSocket-Key")):
		return errors.New("ws: the server's Sec-WebSocket-Accept does not match the key sent")
	case resp.Header.Get("Sec-WebSocket-Protocol") != Subprotocol:
		return fmt.Errorf("%w: it answered %q", ErrSubprotocol, resp.Header.Get("Sec-WebSocket-Protocol"))
	case len(resp.Header.Values("Sec-WebSocket-Extensions")) > 0:
		return errors.New("ws: the server asked for extensions none of which were offered")
	}
	return nil
}

// acceptKey is the Sec-WebSocket-Accept answering key (RFC 6455, section 4.2.2).
func acceptKey(key string) string {
	h := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(h[:])
}

// aLongTimeAgo is a deadline in the past, which interrupts blocked I/O at once.
var aLongTimeAgo = time.Unix(1, 0)
