package testutil

import (
	"net"
	"testing"
)

// TCPPair returns the two ends of a loopback TCP connection. The caller closes them (tests
// that hand them to a session let the session close them).
func TCPPair(t testing.TB) (net.Conn, net.Conn) {
	t.Helper()
	a, b, err := DialTCPPair()
	if err != nil {
		t.Fatal(err)
	}
	return a, b
}

// DialTCPPair is TCPPair returning its error, for callers without a test to fail
// (golang.org/x/net/nettest's MakePipe).
func DialTCPPair() (net.Conn, net.Conn, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	type accepted struct {
		c   net.Conn
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		c, err := ln.Accept()
		ch <- accepted{c, err}
	}()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		ln.Close() // ends the Accept
		if r := <-ch; r.c != nil {
			r.c.Close()
		}
		return nil, nil, err
	}
	r := <-ch
	if r.err != nil {
		a.Close()
		return nil, nil, r.err
	}
	return a, r.c, nil
}
