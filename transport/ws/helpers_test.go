//go:build !js

package ws

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"runtime"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/transport"
)

// upgraded is what a test listener's accept loop got for one connection.
type upgraded struct {
	raw  net.Conn // as Accept returned it
	conn net.Conn // as Upgrade returned it, nil on error
	err  error
}

// serve accepts on ln and upgrades each connection on its own goroutine within timeout,
// as the Service does, closing the raw connection when Upgrade fails. The results arrive
// on the channel; the loop ends when ln is closed (by t.Cleanup).
func serve(t testing.TB, ln transport.Listener, timeout time.Duration) <-chan upgraded {
	t.Helper()
	ch := make(chan upgraded, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				defer cancel()
				up, err := ln.Upgrade(ctx, c)
				if err != nil {
					c.Close()
				}
				ch <- upgraded{raw: c, conn: up, err: err}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ch
}

// listen makes a listener of tr on addr, closed by t.Cleanup.
func listen(t testing.TB, tr *Transport, addr string, opts transport.ListenOptions) transport.Listener {
	t.Helper()
	ln, err := tr.Listen(context.Background(), ma.StringCast(addr), opts)
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// pair returns the two ends of a WebSocket connection dialled by client to a listener of
// server on addr; t.Cleanup closes both.
func pair(t testing.TB, client, server *Transport, addr string) (dialled, accepted net.Conn) {
	t.Helper()
	ln := listen(t, server, addr, transport.ListenOptions{})
	ch := serve(t, ln, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d, err := client.Dial(ctx, ln.Multiaddr())
	if err != nil {
		t.Fatal(err)
	}
	u := <-ch
	if u.err != nil {
		d.Close()
		t.Fatal(u.err)
	}
	t.Cleanup(func() {
		closeBoth(d, u.conn)
	})
	return d, u.conn
}

// closeBoth closes a and b at once, since each Close waits for the other side's close
// frame, which comes from a Read or a Close on the other side.
func closeBoth(a, b net.Conn) {
	done := make(chan struct{})
	go func() {
		a.Close()
		close(done)
	}()
	b.Close()
	<-done
}

// clientTLS returns a client TLS configuration trusting pool.
func clientTLS(pool *x509.CertPool) *tls.Config {
	return &tls.Config{RootCAs: pool}
}

// The raw side of tests that speak HTTP and WebSocket frames byte by byte, to send what
// no well-behaved client would.

// testKey is RFC 6455's sample Sec-WebSocket-Key.
const testKey = "dGhlIHNhbXBsZSBub25jZQ=="

// upgradeRequest returns an upgrade request for path offering the tendril subprotocol,
// with extra header lines ("Name: value") added.
func upgradeRequest(path string, extra ...string) string {
	s := "GET " + path + " HTTP/1.1\r\nHost: test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " + testKey + "\r\nSec-WebSocket-Protocol: tendril\r\n"
	for _, h := range extra {
		s += h + "\r\n"
	}
	return s + "\r\n"
}

// rawDial connects to the TCP address of a listener.
func rawDial(t testing.TB, ln transport.Listener) net.Conn {
	t.Helper()
	_, hostport, _, _ := transport.HostPort(ln.Multiaddr())
	c, err := net.Dial("tcp", hostport)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rawUpgrade connects to ln and upgrades by hand, sending prefix before the request; it
// returns the connection and a reader of what follows the 101 answer.
func rawUpgrade(t testing.TB, ln transport.Listener, prefix string, extra ...string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c := rawDial(t, ln)
	if _, err := io.WriteString(c, prefix+upgradeRequest("/", extra...)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("answer %s, want 101", resp.Status)
	}
	return c, br
}

// clientFrame returns a masked frame (as a client sends) with opcode and payload.
func clientFrame(opcode byte, fin bool, payload []byte) []byte {
	b0 := opcode
	if fin {
		b0 |= 0x80
	}
	f := []byte{b0}
	switch n := len(payload); {
	case n < 126:
		f = append(f, 0x80|byte(n))
	case n < 1<<16:
		f = append(f, 0x80|126)
		f = binary.BigEndian.AppendUint16(f, uint16(n))
	default:
		f = append(f, 0x80|127)
		f = binary.BigEndian.AppendUint64(f, uint64(n))
	}
	key := [4]byte{0x12, 0x34, 0x56, 0x78}
	f = append(f, key[:]...)
	for i, b := range payload {
		f = append(f, b^key[i%4])
	}
	return f
}

// readServerFrame reads one unmasked frame and returns its opcode and payload.
func readServerFrame(br *bufio.Reader) (byte, []byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return 0, nil, err
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(br, b[:]); err != nil {
			return 0, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(br, b[:]); err != nil {
			return 0, nil, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	p := make([]byte, n)
	_, err := io.ReadFull(br, p)
	return h[0] & 0x0f, p, err
}

// readCloseCode reads frames until a close frame and returns its status code.
func readCloseCode(t testing.TB, br *bufio.Reader) int {
	t.Helper()
	for {
		op, p, err := readServerFrame(br)
		if err != nil {
			t.Fatalf("reading frames for a close frame: %v", err)
		}
		if op == 8 {
			if len(p) < 2 {
				return 1005
			}
			return int(binary.BigEndian.Uint16(p))
		}
	}
}

// next waits for the accept loop's next result.
func next(t testing.TB, ch <-chan upgraded) upgraded {
	t.Helper()
	select {
	case u := <-ch:
		return u
	case <-time.After(10 * time.Second):
		t.Fatal("no connection upgraded or refused within 10s")
		return upgraded{}
	}
}

// tcpPair returns the two ends of a loopback TCP connection. (internal/testutil has one,
// but it imports this package.)
func tcpPair(t testing.TB) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	a, err := ln.Accept()
	if err != nil {
		d.Close()
		t.Fatal(err)
	}
	return d, a
}

// settledMemStats returns the memory statistics after two full collections, the second
// freeing what the first left in sync.Pool's victim caches.
func settledMemStats() runtime.MemStats {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms
}
