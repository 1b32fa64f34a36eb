//go:build !js

package ws

import (
	"context"
	"net"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"
	"golang.org/x/net/nettest"

	"github.com/tendril-p2p/tendril/transport"
)

// TestNettest runs the net.Conn conformance tests of golang.org/x/net/nettest (I/O,
// ping-pong, deadlines in the past, present and future, Close during I/O, concurrent
// methods) over /ws, IPv4 and IPv6, each way round. Not over /wss: its FutureTimeout
// test writes on after a write timed out, which crypto/tls does not allow (TestDeadlines
// covers /wss).
func TestNettest(t *testing.T) {
	srv, pool, err := SelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"/ip4/127.0.0.1/tcp/0/ws", "/ip6/::1/tcp/0/ws"} {
		for _, dialFirst := range []bool{true, false} {
			name := addr
			if !dialFirst {
				name += "/accepted-first"
			}
			t.Run(name, func(t *testing.T) {
				server := New(&Config{TLS: srv})
				client := New(&Config{ClientTLS: clientTLS(pool)})
				nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
					d, a, err := dialPair(client, server, addr)
					if err != nil {
						return nil, nil, nil, err
					}
					if !dialFirst {
						d, a = a, d
					}
					return d, a, func() { closeBoth(d, a) }, nil
				})
			})
		}
	}
}

// dialPair is pair for nettest's MakePipe, which wants an error rather than a test.
func dialPair(client, server *Transport, addr string) (dialled, accepted net.Conn, err error) {
	ln, err := server.Listen(context.Background(), ma.StringCast(addr), transport.ListenOptions{})
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			ch <- result{nil, err}
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		up, err := ln.Upgrade(ctx, c)
		if err != nil {
			c.Close()
		}
		ch <- result{up, err}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d, err := client.Dial(ctx, ln.Multiaddr())
	r := <-ch
	if err != nil || r.err != nil {
		if d != nil {
			d.Close()
		}
		if r.c != nil {
			r.c.Close()
		}
		if err == nil {
			err = r.err
		}
		return nil, nil, err
	}
	return d, r.c, nil
}
