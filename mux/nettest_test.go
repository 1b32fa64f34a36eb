package mux

import (
	"context"
	"net"
	"testing"

	"golang.org/x/net/nettest"
)

// TestNettest runs the net.Conn conformance tests of golang.org/x/net/nettest (I/O,
// ping-pong, deadlines in the past, present and future, Close during I/O, concurrent
// methods) on a stream, each way round, over every transport the mux runs on. Its
// PresentTimeout sets a deadline to now while a Read and a Write are blocked with none
// set: the case a stream used to sleep through.
func TestNettest(t *testing.T) {
	transports(t, func(t *testing.T, newPair func() (net.Conn, net.Conn)) {
		for _, opener := range []string{"client", "server"} {
			t.Run(opener+"-opens", func(t *testing.T) {
				nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
					a, b := newPair()
					c, s := sessionPair(t, a, b, nil, nil)
					if opener == "server" {
						c, s = s, c
					}
					opened, err := c.OpenStream(context.Background())
					if err != nil {
						return nil, nil, nil, err
					}
					c.queueStream(opened, true) // announce it, as a first Read would
					accepted, err := s.AcceptStream(context.Background())
					if err != nil {
						return nil, nil, nil, err
					}
					return opened, accepted, func() {
						opened.Close()
						accepted.Close()
						c.Close()
						s.Close()
					}, nil
				})
			})
		}
	})
}
