package proxyhdr

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// tcpPair returns both ends of a loopback TCP connection, closed at the test's end.
func tcpPair(t *testing.T) (client, server *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

// accept writes stream from the client end and runs Accept on the server end, trusted,
// under a read deadline as the caller is told to set.
func accept(t *testing.T, stream []byte) (client *net.TCPConn, server *net.TCPConn, c net.Conn) {
	t.Helper()
	client, server = tcpPair(t)
	if _, err := client.Write(stream); err != nil {
		t.Fatal(err)
	}
	server.SetReadDeadline(time.Now().Add(5 * time.Second))
	c, err := Accept(server, true)
	if err != nil {
		t.Fatalf("Accept: %v", err)
	}
	server.SetReadDeadline(time.Time{})
	return client, server, c
}

// readHandshake reads len(handshake) bytes from c and compares them.
func readHandshake(t *testing.T, c net.Conn) {
	t.Helper()
	got := make([]byte, len(handshake))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("reading the handshake: %v", err)
	}
	if !bytes.Equal(got, handshake) {
		t.Errorf("handshake %q, want %q", got, handshake)
	}
}

func fd(t *testing.T, sc syscall.Conn) uintptr {
	t.Helper()
	raw, err := sc.SyscallConn()
	if err != nil {
		t.Fatalf("SyscallConn: %v", err)
	}
	var fd uintptr
	if err := raw.Control(func(f uintptr) { fd = f }); err != nil {
		t.Fatal(err)
	}
	return fd
}

func TestAcceptHeader(t *testing.T) {
	for _, tc := range []struct {
		name string
		hdr  []byte
		src  string
	}{
		{"v1 TCP4", []byte("PROXY TCP4 192.0.2.1 198.51.100.2 4711 443\r\n"), "192.0.2.1:4711"},
		{"v1 TCP6", []byte("PROXY TCP6 2001:db8::1 2001:db8::2 4711 443\r\n"), "[2001:db8::1]:4711"},
		{"v2 TCP4", v2(0x21, famTCP4, inet4, tlv(1, []byte("h2"))), "192.0.2.1:4711"},
		{"v2 TCP6", withCRC(v2(0x21, famTCP6, inet6)), "[2001:db8::1]:4711"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, server, c := accept(t, append(append([]byte{}, tc.hdr...), handshake...))
			ra, ok := c.RemoteAddr().(*net.TCPAddr)
			if !ok || ra.AddrPort() != ap(tc.src) {
				t.Errorf("RemoteAddr %v (%T), want %s", c.RemoteAddr(), c.RemoteAddr(), tc.src)
			}
			if c.LocalAddr().String() != server.LocalAddr().String() {
				t.Errorf("LocalAddr %v, want the socket's %v", c.LocalAddr(), server.LocalAddr())
			}
			readHandshake(t, c)
			// Nothing to hold back: the socket is the connection's from the start.
			if got, want := fd(t, c.(syscall.Conn)), fd(t, server); got != want {
				t.Errorf("SyscallConn reaches fd %d, want the socket's %d", got, want)
			}
		})
	}
}

// TestAcceptLocal checks that a header without a client address leaves the connection
// itself, its address and everything else untouched.
func TestAcceptLocal(t *testing.T) {
	for _, hdr := range [][]byte{v2(0x20, famUnspec), []byte("PROXY UNKNOWN\r\n"), v2(0x21, famUnixS, unixAddrs)} {
		_, server, c := accept(t, append(append([]byte{}, hdr...), handshake...))
		if c != net.Conn(server) {
			t.Errorf("%q: Accept returned %T, want the connection itself", hdr, c)
		}
		readHandshake(t, c)
	}
}

// TestAcceptNoHeader checks a trusted connection that starts with the handshake: its
// first byte, read to find out, comes back first, and SyscallConn waits until it has.
func TestAcceptNoHeader(t *testing.T) {
	client, server, c := accept(t, handshake)
	if _, ok := c.(*prefixConn); !ok {
		t.Fatalf("Accept returned %T, want a *prefixConn", c)
	}
	if c.RemoteAddr().String() != client.LocalAddr().String() {
		t.Errorf("RemoteAddr %v, want the client's %v", c.RemoteAddr(), client.LocalAddr())
	}
	sc := c.(syscall.Conn)
	if _, err := sc.SyscallConn(); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("SyscallConn with the prefix pending: %v, want errors.ErrUnsupported", err)
	}
	if n, err := c.Read(nil); n != 0 || err != nil {
		t.Errorf("empty Read: %d, %v", n, err)
	}
	var first [4]byte
	if n, err := c.Read(first[:]); n != 1 || err != nil || first[0] != handshake[0] {
		t.Fatalf("first Read = %d, %v, %q; want the prefix alone", n, err, first[:n])
	}
	if got, want := fd(t, sc), fd(t, server); got != want {
		t.Errorf("SyscallConn after the prefix reaches fd %d, want %d", got, want)
	}
	rest := make([]byte, len(handshake)-1)
	if _, err := io.ReadFull(c, rest); err != nil || !bytes.Equal(rest, handshake[1:]) {
		t.Errorf("rest %q, %v; want %q", rest, err, handshake[1:])
	}
}

func TestAcceptUntrusted(t *testing.T) {
	client, server := tcpPair(t)
	stream := append([]byte("PROXY TCP4 192.0.2.1 198.51.100.2 4711 443\r\n"), handshake...)
	if _, err := client.Write(stream); err != nil {
		t.Fatal(err)
	}
	c, err := Accept(server, false)
	if err != nil || c != net.Conn(server) {
		t.Fatalf("Accept = %T, %v; want the connection itself", c, err)
	}
	got := make([]byte, len(stream))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, stream) {
		t.Errorf("read %q, %v; want the whole stream, header included", got, err)
	}
}

func TestAcceptMalformed(t *testing.T) {
	client, server := tcpPair(t)
	client.Write([]byte("PROXY TCP4 192.0.2.1 198.51.100.2 04711 443\r\n"))
	server.SetReadDeadline(time.Now().Add(5 * time.Second))
	if c, err := Accept(server, true); !errors.Is(err, ErrMalformed) || c != nil {
		t.Errorf("Accept = %v, %v; want nil, ErrMalformed", c, err)
	}
}

// TestAcceptDeadline checks that the caller's read deadline bounds a header that stops
// coming, and that the error says so.
func TestAcceptDeadline(t *testing.T) {
	for _, stream := range []string{"", "PRO", "PROXY TCP4 192.0.2.1", string(v2(0x21, famTCP4, inet4)[:20])} {
		client, server := tcpPair(t)
		client.Write([]byte(stream))
		server.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		start := time.Now()
		_, err := Accept(server, true)
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("%q: Accept: %v, want os.ErrDeadlineExceeded", stream, err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("%q: Accept took %v", stream, d)
		}
	}
}

// TestForwarding checks that both wrappers pass on the methods tendril uses on TCP
// connections: CloseWrite (the peer reads EOF), SetLinger (Close resets).
func TestForwarding(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream []byte
	}{
		{"header", append(v2(0x21, famTCP4, inet4), handshake...)},
		{"no header", handshake},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, _, c := accept(t, tc.stream)
			readHandshake(t, c)
			if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
				t.Fatalf("CloseWrite: %v", err)
			}
			client.SetReadDeadline(time.Now().Add(5 * time.Second))
			if n, err := client.Read(make([]byte, 1)); n != 0 || err != io.EOF {
				t.Errorf("client read after CloseWrite: %d, %v; want io.EOF", n, err)
			}
			if _, err := c.Write([]byte("x")); err == nil {
				t.Error("Write after CloseWrite succeeded")
			}

			client2, _, c2 := accept(t, tc.stream)
			if err := c2.(interface{ SetLinger(int) error }).SetLinger(0); err != nil {
				t.Fatalf("SetLinger: %v", err)
			}
			c2.Close()
			client2.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := client2.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("client read after Close with linger 0: %v, want ECONNRESET", err)
			}
		})
	}
}

// TestForwardingUnsupported checks the wrappers over a connection without the methods.
func TestForwardingUnsupported(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	conns := []net.Conn{&addrConn{Conn: a}, &prefixConn{Conn: a}}
	conns[1].(*prefixConn).next.Store(uint32(maxPrefix)) // nothing pending
	for _, c := range conns {
		if err := c.(interface{ CloseWrite() error }).CloseWrite(); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%T CloseWrite: %v", c, err)
		}
		if err := c.(interface{ SetLinger(int) error }).SetLinger(0); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%T SetLinger: %v", c, err)
		}
		if _, err := c.(syscall.Conn).SyscallConn(); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%T SyscallConn: %v", c, err)
		}
	}
}

// TestPrefixConcurrentReads reads a full prefix from a goroutine per byte, all started
// at once, many times over: each byte goes to exactly one reader.
func TestPrefixConcurrentReads(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	for range 2000 {
		c := &prefixConn{Conn: a}
		for i := range c.buf {
			c.buf[i] = byte(i)
		}
		var seen [maxPrefix]atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range maxPrefix {
			wg.Go(func() {
				<-start
				var p [1]byte
				if n, err := c.Read(p[:]); n != 1 || err != nil {
					t.Errorf("Read: %d, %v", n, err)
					return
				}
				seen[p[0]].Add(1)
			})
		}
		close(start)
		wg.Wait()
		for i := range seen {
			if n := seen[i].Load(); n != 1 {
				t.Fatalf("byte %d read %d times", i, n)
			}
		}
	}
}

// TestConnSizes pins the wrappers' sizes: they live as long as their connections.
func TestConnSizes(t *testing.T) {
	if s := unsafe.Sizeof(addrConn{}); s > 24 {
		t.Errorf("addrConn is %d bytes, want at most 24", s)
	}
	if s := unsafe.Sizeof(prefixConn{}); s > 32 {
		t.Errorf("prefixConn is %d bytes, want at most 32", s)
	}
}
