// Package pairs makes the two ends of a connection over each transport, for the
// table-driven suites (mux, protocol). It is apart from testutil because the transports'
// own tests import testutil.
package pairs

import (
	"context"
	"net"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/internal/testutil"
	"github.com/tendril-p2p/tendril/transport"
	"github.com/tendril-p2p/tendril/transport/memory"
	"github.com/tendril-p2p/tendril/transport/ws"
)

// All are the transports the table-driven suites (mux, protocol) run over, each making
// the two ends of a new connection: net.Pipe (unbuffered), loopback TCP, WebSocket on
// loopback, and the in-memory transport (unshaped).
var All = []struct {
	Name string
	New  func(t testing.TB) (net.Conn, net.Conn)
}{
	{"pipe", func(testing.TB) (net.Conn, net.Conn) { return net.Pipe() }},
	{"tcp", testutil.TCPPair},
	{"ws", WSPair},
	{"memory", MemoryPair},
}

// WSPair returns the two ends of a WebSocket connection over loopback TCP (transport/ws):
// the dialer's, then the listener's.
func WSPair(t testing.TB) (net.Conn, net.Conn) {
	t.Helper()
	return transportPair(t, ws.New(nil), ws.New(nil), "/ip4/127.0.0.1/tcp/0/ws")
}

// pairNetwork is the in-memory network of MemoryPair.
var pairNetwork = memory.NewNetwork(memory.NetworkConfig{})

// MemoryPair returns the two ends of an unshaped in-memory connection (transport/memory).
func MemoryPair(t testing.TB) (net.Conn, net.Conn) {
	t.Helper()
	return transportPair(t, pairNetwork.NewTransport(), pairNetwork.NewTransport(), "/memory/0")
}

// transportPair listens on at with server, dials it with client, and upgrades the accepted
// connection as a Service would.
func transportPair(t testing.TB, client, server transport.Transport, at string) (net.Conn, net.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ln, err := server.Listen(ctx, ma.StringCast(at), transport.ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type accepted struct {
		c   net.Conn
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			var up net.Conn
			if up, err = ln.Upgrade(ctx, c); err != nil {
				c.Close()
			}
			c = up
		}
		ch <- accepted{c, err}
	}()
	a, err := client.Dial(ctx, ln.Multiaddr())
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		a.Close()
		t.Fatal(r.err)
	}
	return a, r.c
}
