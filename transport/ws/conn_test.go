//go:build !js

package ws

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/transport"
)

// transports returns a client and a server Transport for addr's kind (TLS with a
// self-signed certificate for /wss and /tls/ws), with cfg's other fields.
func transports(t testing.TB, addr string, cfg Config) (client, server *Transport) {
	t.Helper()
	cc, sc := cfg, cfg
	if strings.Contains(addr, "wss") || strings.Contains(addr, "/tls/") {
		srv, pool, err := SelfSigned()
		if err != nil {
			t.Fatal(err)
		}
		sc.TLS, cc.ClientTLS = srv, clientTLS(pool)
	}
	return New(&cc), New(&sc)
}

var roundTripAddrs = []string{
	"/ip4/127.0.0.1/tcp/0/ws",
	"/ip6/::1/tcp/0/ws",
	"/ip4/127.0.0.1/tcp/0/wss",
	"/ip6/::1/tcp/0/wss",
	"/ip4/127.0.0.1/tcp/0/tls/ws",
}

func TestRoundTrip(t *testing.T) {
	for _, addr := range roundTripAddrs {
		t.Run(addr, func(t *testing.T) {
			client, server := transports(t, addr, Config{})
			d, a := pair(t, client, server, addr)
			suffix := addr[strings.Index(addr, "/tcp/0")+len("/tcp/0"):]
			for _, c := range []net.Conn{d, a} {
				for _, m := range []ma.Multiaddr{c.(*Conn).LocalMultiaddr(), c.(*Conn).RemoteMultiaddr(), transport.RemoteMultiaddr(c)} {
					if !strings.HasSuffix(m.String(), suffix) || !strings.HasPrefix(m.String(), addr[:4]) {
						t.Errorf("multiaddr %s, want %s...%s", m, addr[:4], suffix)
					}
				}
			}
			if d.LocalAddr().String() != a.RemoteAddr().String() || d.RemoteAddr().String() != a.LocalAddr().String() {
				t.Errorf("dialled %v -> %v, accepted %v <- %v", d.LocalAddr(), d.RemoteAddr(), a.LocalAddr(), a.RemoteAddr())
			}
			if _, ok := a.RemoteAddr().(*net.TCPAddr); !ok {
				t.Errorf("RemoteAddr is a %T, want *net.TCPAddr", a.RemoteAddr())
			}
			exchange(t, d, a, "ping")
			exchange(t, a, d, "pong")
		})
	}
}

// TestDialByName dials /dns4/localhost and /dns/localhost, over /ws and /wss (whose
// certificate names localhost).
func TestDialByName(t *testing.T) {
	for _, kind := range []string{"ws", "wss"} {
		t.Run(kind, func(t *testing.T) {
			client, server := transports(t, kind, Config{})
			ln := listen(t, server, "/ip4/127.0.0.1/tcp/0/"+kind, transport.ListenOptions{})
			ch := serve(t, ln, 5*time.Second)
			port, _ := ln.Multiaddr().ValueForProtocol(ma.P_TCP)
			for _, host := range []string{"/dns4/localhost", "/dns/localhost"} {
				d, err := client.Dial(context.Background(), ma.StringCast(host+"/tcp/"+port+"/"+kind))
				if err != nil {
					t.Fatal(err)
				}
				u := next(t, ch)
				if u.err != nil {
					t.Fatal(u.err)
				}
				exchange(t, d, u.conn, host)
				closeBoth(d, u.conn)
			}
		})
	}
}

// exchange writes msg on w and checks that r reads it.
func exchange(t testing.TB, w, r net.Conn, msg string) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		_, err := io.WriteString(w, msg)
		errc <- err
	}()
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(r, got); err != nil {
		t.Fatalf("read: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("write: %v", err)
	}
	if string(got) != msg {
		t.Fatalf("read %q, want %q", got, msg)
	}
}

// TestLargeTransfer sends 8 MiB each way at once in writes of random sizes, some longer
// than MaxMessage, and compares checksums; with MaxMessage at its smallest too, so that
// most writes are split.
func TestLargeTransfer(t *testing.T) {
	for _, addr := range []string{"/ip4/127.0.0.1/tcp/0/ws", "/ip4/127.0.0.1/tcp/0/wss"} {
		for _, maxMsg := range []int{0, MinMessage} {
			t.Run(fmt.Sprintf("%s/MaxMessage=%d", addr, maxMsg), func(t *testing.T) {
				client, server := transports(t, addr, Config{MaxMessage: maxMsg})
				d, a := pair(t, client, server, addr)
				const size = 8 << 20
				var wg sync.WaitGroup
				for i, c := range []net.Conn{d, a} {
					peer := []net.Conn{a, d}[i]
					sums := make(chan [32]byte, 1)
					wg.Add(2)
					go func() {
						defer wg.Done()
						sum, err := writeRandom(c, size, uint64(i))
						if err != nil {
							t.Error(err)
						}
						sums <- sum
					}()
					go func() {
						defer wg.Done()
						got, n, err := readSum(peer, size)
						if sum := <-sums; err != nil || n != size || got != sum {
							t.Errorf("direction %d: read %d bytes (err %v), checksums match: %v", i, n, err, got == sum)
						}
					}()
				}
				wg.Wait()
			})
		}
	}
}

// writeRandom writes size pseudo-random bytes to c in writes of random sizes and returns
// their SHA-256.
func writeRandom(c net.Conn, size int, seed uint64) ([32]byte, error) {
	rng := rand.New(rand.NewPCG(seed, seed))
	h := sha256.New()
	buf := make([]byte, 200<<10)
	for sent := 0; sent < size; {
		n := min(size-sent, 1+rng.IntN(len(buf)))
		for i := range buf[:n] {
			buf[i] = byte(rng.Uint32())
		}
		h.Write(buf[:n])
		if _, err := c.Write(buf[:n]); err != nil {
			return [32]byte{}, err
		}
		sent += n
	}
	return [32]byte(h.Sum(nil)), nil
}

func readSum(c net.Conn, size int) ([32]byte, int64, error) {
	h := sha256.New()
	n, err := io.CopyN(h, c, int64(size))
	return [32]byte(h.Sum(nil)), n, err
}

func TestReadDeadline(t *testing.T) {
	for _, addr := range []string{"/ip4/127.0.0.1/tcp/0/ws", "/ip4/127.0.0.1/tcp/0/wss"} {
		t.Run(addr, func(t *testing.T) {
			client, server := transports(t, addr, Config{})
			d, a := pair(t, client, server, addr)
			for _, c := range []net.Conn{d, a} {
				peer := d
				if c == d {
					peer = a
				}
				// In the past: at once, and the connection reads on afterwards.
				c.SetReadDeadline(time.Now().Add(-time.Second))
				if _, err := c.Read(make([]byte, 10)); !isTimeoutErr(err) {
					t.Fatalf("read past its deadline: %v, want a timeout", err)
				}
				// In the future, while the read is blocked.
				start := time.Now()
				c.SetReadDeadline(start.Add(100 * time.Millisecond))
				if _, err := c.Read(make([]byte, 10)); !isTimeoutErr(err) {
					t.Fatalf("read past its deadline: %v, want a timeout", err)
				}
				if el := time.Since(start); el < 90*time.Millisecond || el > 2*time.Second {
					t.Errorf("read timed out after %v, want about 100ms", el)
				}
				// Moved into the past by another goroutine, as the mux does.
				go func() {
					time.Sleep(20 * time.Millisecond)
					c.SetReadDeadline(time.Unix(1, 0))
				}()
				c.SetReadDeadline(time.Time{})
				if _, err := c.Read(make([]byte, 10)); !isTimeoutErr(err) {
					t.Fatalf("read whose deadline was moved into the past: %v, want a timeout", err)
				}
				c.SetReadDeadline(time.Time{})
				exchange(t, peer, c, "still there")
			}
		})
	}
}

func isTimeoutErr(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) && errors.As(err, &ne) && ne.Timeout()
}

// TestWriteDeadline: a write deadline in the past fails a Write at once, with nothing
// sent; one that interrupts a Write blocked by a peer that does not read leaves, over
// /ws, a connection that delivers everything accepted, in order, once the peer reads; over
// /wss, every later Write fails, as crypto/tls's do.
func TestWriteDeadline(t *testing.T) {
	for _, addr := range []string{"/ip4/127.0.0.1/tcp/0/ws", "/ip4/127.0.0.1/tcp/0/wss"} {
		t.Run(addr, func(t *testing.T) {
			client, server := transports(t, addr, Config{})
			d, a := pair(t, client, server, addr)
			for _, c := range []net.Conn{d, a} {
				peer := d
				if c == d {
					peer = a
				}
				c.SetWriteDeadline(time.Unix(1, 0))
				if n, err := c.Write([]byte("lost")); n != 0 || !isTimeoutErr(err) {
					t.Fatalf("write past its deadline: %d, %v; want 0 and a timeout", n, err)
				}
				c.SetWriteDeadline(time.Time{})
				exchange(t, c, peer, "after a deadline in the past")

				// Fill the connection until a deadline interrupts a Write.
				h := sha256.New()
				chunk := bytes.Repeat([]byte("0123456789abcdef"), 4<<10) // 64 KiB
				total := 0
				c.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
				for {
					n, err := c.Write(chunk)
					h.Write(chunk[:n])
					total += n
					if err != nil {
						if !isTimeoutErr(err) {
							t.Fatalf("write interrupted by its deadline: %v, want a timeout", err)
						}
						break
					}
				}
				// Writes that time out again take a message only once what was cut off has
				// gone out: what is held back stays within one message.
				for range 40 {
					c.SetWriteDeadline(time.Now().Add(5 * time.Millisecond))
					n, err := c.Write(chunk)
					h.Write(chunk[:n])
					total += n
					if err != nil && !isTimeoutErr(err) {
						t.Fatalf("write while the last one's rest is stuck: %v, want a timeout", err)
					}
				}
				if w := c.(*Conn).wire; w.pend != nil && len(*w.pend) > len(chunk)+14+2*131 {
					t.Fatalf("%d bytes held back, more than a message", len(*w.pend))
				}
				c.SetWriteDeadline(time.Time{})
				if strings.HasPrefix(addr[strings.Index(addr, "/tcp/0")+6:], "/wss") {
					if _, err := c.Write([]byte("x")); err == nil {
						t.Fatal("a Write after one that timed out over TLS succeeded")
					}
					return // the connection cannot be used to write again
				}
				// The peer reads everything accepted, then what follows.
				tail := []byte("the end")
				h.Write(tail)
				errc := make(chan error, 1)
				go func() {
					_, err := c.Write(tail)
					errc <- err
				}()
				got, n, err := readSum(peer, total+len(tail))
				if err != nil || got != [32]byte(h.Sum(nil)) {
					t.Fatalf("read %d of %d bytes after the write timeout (err %v), checksums match: %v", n, total+len(tail), err, got == [32]byte(h.Sum(nil)))
				}
				if err := <-errc; err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
