package memory

import (
	"net"
	"testing"

	"golang.org/x/net/nettest"
)

// TestNettest runs the net.Conn conformance tests of golang.org/x/net/nettest (I/O,
// ping-pong, deadlines in the past, present and future, Close during I/O, concurrent
// methods) over each kind of link.
func TestNettest(t *testing.T) {
	for _, tc := range links {
		t.Run(tc.name, func(t *testing.T) {
			nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
				n := NewNetwork(NetworkConfig{Link: tc.link})
				a, b := n.NewTransport(), n.NewTransport()
				l := listen(t, b)
				c1, err = a.Dial(t.Context(), l.Multiaddr())
				if err != nil {
					return nil, nil, nil, err
				}
				c2, err = l.Accept()
				if err != nil {
					return nil, nil, nil, err
				}
				l.Close()
				return c1, c2, func() { c1.Close(); c2.Close() }, nil
			})
		})
	}
}
