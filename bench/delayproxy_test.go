package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The proxy's tests run on a loaded 2-core machine: a chunk must never leave early (that is
// exact), but may leave late by a lot, so upper bounds are generous and no test asks for speed.

// proxyTo starts a TCP server running handle for every connection and a delay proxy in front
// of it; everything is closed when the test ends.
func proxyTo(t testing.TB, cfg proxyConfig, handle func(*net.TCPConn)) *delayProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				handle(c.(*net.TCPConn))
			})
		}
	})
	cfg.Target = ln.Addr().String()
	p, err := startDelayProxy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Close()
		ln.Close()
		wg.Wait()
	})
	return p
}

func dialProxy(t testing.TB, p *delayProxy) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// stampNow puts the current time in b.
func stampNow(b []byte) { binary.BigEndian.PutUint64(b, uint64(time.Now().UnixNano())) }

func sinceStamp(b []byte) time.Duration {
	return time.Duration(time.Now().UnixNano() - int64(binary.BigEndian.Uint64(b)))
}

// TestDelayProxyDelay measures each direction's delay on its own: both ends run in this
// process, so a timestamp written by one end is read against the same clock by the other.
func TestDelayProxyDelay(t *testing.T) {
	const delay = 40 * time.Millisecond
	up := make(chan time.Duration, 16)
	p := proxyTo(t, proxyConfig{Delay: delay}, func(c *net.TCPConn) {
		var msg [8]byte
		for {
			if _, err := io.ReadFull(c, msg[:]); err != nil {
				return
			}
			up <- sinceStamp(msg[:])
			stampNow(msg[:])
			if _, err := c.Write(msg[:]); err != nil {
				return
			}
		}
	})
	c := dialProxy(t, p)
	var ups, downs []time.Duration
	var msg [8]byte
	for range 5 {
		stampNow(msg[:])
		if _, err := c.Write(msg[:]); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, msg[:]); err != nil {
			t.Fatal(err)
		}
		downs = append(downs, sinceStamp(msg[:]))
		ups = append(ups, <-up)
	}
	for name, ds := range map[string][]time.Duration{"client to server": ups, "server to client": downs} {
		least := ds[0]
		for _, d := range ds {
			if d < delay {
				t.Errorf("%s: a message took %v, less than the delay %v", name, d, delay)
			}
			least = min(least, d)
		}
		// The fastest of five should be close; the slack is for a loaded machine.
		if least > delay+100*time.Millisecond {
			t.Errorf("%s: the fastest of %v took %v, want about %v", name, ds, least, delay)
		}
	}
	// Every delivery but the first (due when the connection opens at the far end) waited
	// for its deadline, so each was a timed wake-up.
	if l := p.Lateness(); l.N < 9 || l.Sum < 0 || l.Max < 0 {
		t.Errorf("lateness %+v after 9 timed deliveries", l)
	}
}

// TestDelayProxyConnect: a connection costs a round trip before the client's first byte can
// cross, as TCP's handshake does on a real path, so a request answered at once takes two.
func TestDelayProxyConnect(t *testing.T) {
	const delay = 20 * time.Millisecond
	accepted := make(chan time.Time, 1)
	p := proxyTo(t, proxyConfig{Delay: delay}, func(c *net.TCPConn) {
		accepted <- time.Now()
		_, _ = io.Copy(c, c)
	})
	start := time.Now()
	c := dialProxy(t, p)
	if _, err := c.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	e := time.Since(start)
	if a := (<-accepted).Sub(start); a < 3*delay {
		t.Errorf("the server accepted after %v, before the client's ACK would arrive (%v)", a, 3*delay)
	}
	if e < 4*delay {
		t.Errorf("connect and one round trip took %v, less than two round trips (%v)", e, 4*delay)
	}
	if e > 4*delay+150*time.Millisecond {
		t.Errorf("connect and one round trip took %v, want about %v", e, 4*delay)
	}
}

// TestDelayProxyRate sends through a 1 MB/s bottleneck faster than it drains: the transfer
// takes at least its link time, and the proxy's queue fills to its bound but not beyond.
func TestDelayProxyRate(t *testing.T) {
	const (
		rate  = 8_000_000 // bits/s: 1 MB/s
		size  = 300_000
		queue = 32 << 10
		delay = 5 * time.Millisecond
	)
	done := make(chan int64, 1)
	p := proxyTo(t, proxyConfig{Delay: delay, Rate: rate, Queue: queue, SocketBuffer: 32 << 10}, func(c *net.TCPConn) {
		n, _ := io.Copy(io.Discard, c)
		done <- n
	})
	c := dialProxy(t, p)
	start := time.Now()
	if _, err := c.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if n := <-done; n != size {
		t.Fatalf("server received %d bytes of %d", n, size)
	}
	elapsed := time.Since(start)
	want := linkTime(size, rate) + delay
	if elapsed < want {
		t.Errorf("%d bytes at %d bit/s took %v, less than the link time %v", size, rate, elapsed, want)
	}
	if elapsed > 4*want {
		t.Errorf("%d bytes at %d bit/s took %v, want about %v", size, rate, elapsed, want)
	}
	if b := p.peakBacklog.Load(); b > queue || b < queue/2 {
		t.Errorf("bottleneck queue peaked at %d bytes, want at most %d and near it", b, queue)
	}
}

// TestDelayProxySharedLink: connections through one proxy share its bottleneck, so two
// transfers at once take as long as both bytes counts on one link.
func TestDelayProxySharedLink(t *testing.T) {
	const (
		rate = 8_000_000 // bits/s: 1 MB/s
		size = 150_000   // per connection
	)
	done := make(chan int64, 2)
	p := proxyTo(t, proxyConfig{Delay: time.Millisecond, Rate: rate, Queue: 32 << 10}, func(c *net.TCPConn) {
		n, _ := io.Copy(io.Discard, c)
		done <- n
	})
	start := time.Now()
	var wg sync.WaitGroup
	for range 2 {
		c := dialProxy(t, p)
		wg.Go(func() {
			if _, err := c.Write(make([]byte, size)); err == nil {
				_ = c.CloseWrite()
			}
		})
	}
	wg.Wait()
	for range 2 {
		if n := <-done; n != size {
			t.Fatalf("server received %d bytes of %d", n, size)
		}
	}
	if e, want := time.Since(start), linkTime(2*size, rate); e < want {
		t.Errorf("two connections moved %d bytes each in %v, less than their link time together (%v)", size, e, want)
	}
}

// TestDelayProxyHalfClose: end-of-stream travels each way after the data and the delay, and
// the other direction stays open until it ends too.
func TestDelayProxyHalfClose(t *testing.T) {
	const delay = 20 * time.Millisecond
	p := proxyTo(t, proxyConfig{Delay: delay}, func(c *net.TCPConn) {
		got, err := io.ReadAll(c)
		if err != nil || string(got) != "ping" {
			return
		}
		if _, err := c.Write([]byte("pong")); err != nil {
			return
		}
		_ = c.CloseWrite()
	})
	c := dialProxy(t, p)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "pong" {
		t.Fatalf("read %q, want the server's answer to a half-closed request", got)
	}
	if e := time.Since(start); e < 2*delay {
		t.Errorf("the answer and its end came back after %v, less than a round trip (%v)", e, 2*delay)
	}
}

// TestDelayProxyReset: a reset travels as a reset, after the delay.
func TestDelayProxyReset(t *testing.T) {
	const delay = 20 * time.Millisecond
	p := proxyTo(t, proxyConfig{Delay: delay}, func(c *net.TCPConn) {
		var b [1]byte
		if _, err := c.Read(b[:]); err == nil {
			resetClose(c)
		}
	})
	c := dialProxy(t, p)
	start := time.Now()
	if _, err := c.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Read(make([]byte, 1))
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after the server's reset: %v, want ECONNRESET", err)
	}
	if e := time.Since(start); e < 2*delay {
		t.Errorf("the reset came back after %v, less than a round trip (%v)", e, 2*delay)
	}
}

// TestDelayProxyClose: closing the proxy ends its connections at once (goleak, in TestMain,
// checks that its goroutines end).
func TestDelayProxyClose(t *testing.T) {
	p := proxyTo(t, proxyConfig{Delay: time.Hour}, func(c *net.TCPConn) { _, _ = io.Copy(io.Discard, c) })
	c := dialProxy(t, p)
	if _, err := c.Write([]byte("held for an hour")); err != nil {
		t.Fatal(err)
	}
	// Wait until the proxy holds the bytes, then close it under them.
	for deadline := time.Now().Add(5 * time.Second); p.peakInFlight.Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the proxy never read the bytes")
		}
		time.Sleep(time.Millisecond)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, syscall.ETIMEDOUT) || isTimeout(err) {
		t.Fatalf("read after the proxy closed: %v, want end of stream or reset", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestDelayProxyBoundedInFlight: a receiver that does not read makes the proxy hold at most
// MaxInFlight; the rest waits in the sender's socket.
func TestDelayProxyBoundedInFlight(t *testing.T) {
	const limit = 256 << 10
	release := make(chan struct{})
	p := proxyTo(t, proxyConfig{Delay: time.Millisecond, MaxInFlight: limit, SocketBuffer: 32 << 10}, func(c *net.TCPConn) {
		_ = c.SetReadBuffer(32 << 10)
		<-release
	})
	c := dialProxy(t, p)
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = c.SetWriteDeadline(time.Now().Add(400 * time.Millisecond))
		buf := bytes.Repeat([]byte{'x'}, 64<<10)
		for {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	})
	wg.Wait()
	close(release)
	if n := p.peakInFlight.Load(); n > limit || n < limit/2 {
		t.Errorf("the proxy held at most %d bytes for a receiver that does not read, want at most %d and near it", n, limit)
	}
}

// BenchmarkDelayProxy moves a plain TCP stream through the proxy, so that its own ceiling
// is known: it must stay far above what the transports reach through it.
func BenchmarkDelayProxy(b *testing.B) {
	for _, delay := range []time.Duration{0, 25 * time.Millisecond} {
		b.Run(fmt.Sprintf("rtt=%v", 2*delay), func(b *testing.B) {
			done := make(chan int64, 1)
			p := proxyTo(b, proxyConfig{Delay: delay}, func(c *net.TCPConn) {
				n, _ := io.Copy(io.Discard, c)
				done <- n
			})
			c := dialProxy(b, p)
			buf := make([]byte, 64<<10)
			b.SetBytes(int64(len(buf)))
			b.ResetTimer()
			for range b.N {
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
			_ = c.CloseWrite()
			if n := <-done; n != int64(b.N*len(buf)) {
				b.Fatalf("received %d of %d bytes", n, b.N*len(buf))
			}
		})
	}
}
