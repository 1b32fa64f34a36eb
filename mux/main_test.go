package mux

import (
	"encoding/binary"
	"net"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// transports runs f over net.Pipe and over loopback TCP.
func transports(t *testing.T, f func(t *testing.T, newPair func() (net.Conn, net.Conn))) {
	t.Run("pipe", func(t *testing.T) { f(t, func() (net.Conn, net.Conn) { return net.Pipe() }) })
	t.Run("tcp", func(t *testing.T) { f(t, func() (net.Conn, net.Conn) { return tcpPair(t) }) })
}

func tcpPair(t testing.TB) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		ch <- c
	}()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := <-ch
	if b == nil {
		t.Fatal("accept failed")
	}
	return a, b
}

// sessionPair starts a client over a and a server over b; both are closed at
// the end of the test.
func sessionPair(t testing.TB, a, b net.Conn, ccfg, scfg *Config) (*Session, *Session) {
	t.Helper()
	c, err := Client(a, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Server(b, scfg)
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		s.Close()
	})
	return c, s
}

// hdr encodes a frame header, for tests that play a peer by hand.
func hdr(typ uint8, flags uint16, id, length uint32) []byte {
	h := []byte{protoVersion, typ}
	h = binary.BigEndian.AppendUint16(h, flags)
	h = binary.BigEndian.AppendUint32(h, id)
	return binary.BigEndian.AppendUint32(h, length)
}
