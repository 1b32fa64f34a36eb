//go:build !js

package ws_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/transport"
	"github.com/tendril-p2p/tendril/transport/ws"
)

// A listener and a dialler on loopback, with the listener's two steps done as a Service
// does them: Accept, then Upgrade on the connection's own goroutine, within a deadline.
func Example() {
	tr := ws.New(nil)
	ln, err := tr.Listen(context.Background(), ma.StringCast("/ip4/127.0.0.1/tcp/0/ws"), transport.ListenOptions{})
	if err != nil {
		panic(err)
	}
	defer ln.Close()

	go func() {
		raw, err := ln.Accept()
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := ln.Upgrade(ctx, raw)
		if err != nil {
			raw.Close()
			return
		}
		io.WriteString(c, "hello over WebSocket")
		c.Close()
	}()

	c, err := tr.Dial(context.Background(), ln.Multiaddr())
	if err != nil {
		panic(err)
	}
	defer c.Close()
	b, _ := io.ReadAll(c) // to the end of the stream: the listener's close frame
	fmt.Printf("%s\n", b)
	fmt.Println("the remote multiaddr ends in /ws:", strings.HasSuffix(transport.RemoteMultiaddr(c).String(), "/ws"))
	// Output:
	// hello over WebSocket
	// the remote multiaddr ends in /ws: true
}
