//go:build !js

package ws

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/transport"
)

// FuzzUpgrade feeds arbitrary bytes to a Listener's Upgrade, as a client would send them,
// followed by the end of the connection: it must return (a Conn or an error), never panic
// nor hang.
func FuzzUpgrade(f *testing.F) {
	f.Add([]byte(upgradeRequest("/")))
	f.Add([]byte(upgradeRequest("/") + string(clientFrame(2, true, []byte("data")))))
	f.Add([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	f.Add([]byte("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\n" + upgradeRequest("/")))
	f.Add([]byte("\r\n\r\n\x00\r\nQUIT\n\x21\x11\x00\x0c"))
	opts := transport.ListenOptions{}
	l := &Listener{cfg: DefaultConfig(), opts: opts, tg: target{suffix: "/ws"}}
	f.Fuzz(func(t *testing.T, in []byte) {
		client, server := net.Pipe()
		go func() {
			client.Write(in)
			client.Close()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		c, err := l.Upgrade(ctx, server)
		if err == nil {
			buf := make([]byte, 64)
			for {
				if _, err := c.Read(buf); err != nil {
					break
				}
			}
			c.(*Conn).ws.CloseNow()
		}
		server.Close()
	})
}
