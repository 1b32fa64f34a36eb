//go:build !js

package ws

import (
	"context"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/tendril-p2p/tendril/mux"
	"github.com/tendril-p2p/tendril/secio"
)

// Loopback benchmarks of a Conn beside plain TCP, in one run:
//
//	go test -run '^$' -bench . -count 6 ./transport/ws/ | benchstat -
//
// "up" is the dialler writing (masked frames, coder/websocket's client side), "down" the
// listener writing.

// benchPair returns a connected pair over kind ("tcp", "ws" or "wss") as writer, reader
// for direction dir ("up": the dialler writes; "down": the listener does).
func benchPair(b *testing.B, kind, dir string) (w, r net.Conn) {
	b.Helper()
	var d, a net.Conn
	switch kind {
	case "tcp":
		d, a = tcpPair(b)
		b.Cleanup(func() { d.Close(); a.Close() })
	case "ws":
		tr := New(nil)
		d, a = pair(b, tr, tr, "/ip4/127.0.0.1/tcp/0/ws")
	case "wss":
		srv, pool, err := SelfSigned()
		if err != nil {
			b.Fatal(err)
		}
		st := New(&Config{TLS: srv})
		ct := New(&Config{ClientTLS: clientTLS(pool)})
		d, a = pair(b, ct, st, "/ip4/127.0.0.1/tcp/0/wss")
	}
	if dir == "down" {
		return a, d
	}
	return d, a
}

func BenchmarkConn(b *testing.B) {
	for _, kind := range []string{"tcp", "ws", "wss"} {
		for _, dir := range []string{"up", "down"} {
			if kind == "tcp" && dir == "down" {
				continue
			}
			b.Run(fmt.Sprintf("bulk16K/%s-%s", kind, dir), func(b *testing.B) {
				w, r := benchPair(b, kind, dir)
				benchBulk(b, w, r, 16<<10)
			})
		}
	}
	for _, kind := range []string{"tcp", "ws", "wss"} {
		b.Run("pingpong64/"+kind, func(b *testing.B) {
			w, r := benchPair(b, kind, "up")
			benchPingPong(b, w, r, 64)
		})
	}
}

func benchBulk(b *testing.B, w, r net.Conn, chunk int) {
	buf := make([]byte, chunk)
	done := make(chan error, 1)
	go func() {
		_, err := io.CopyBuffer(io.Discard, io.LimitReader(r, int64(b.N)*int64(chunk)), make([]byte, 64<<10))
		done <- err
	}()
	b.SetBytes(int64(chunk))
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPUTime()
	for range b.N {
		if _, err := w.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(processCPUTime()-cpu)/float64(b.N), "cpu-ns/op")
}

func benchPingPong(b *testing.B, c, s net.Conn, size int) {
	go func() {
		buf := make([]byte, size)
		for {
			if _, err := io.ReadFull(s, buf); err != nil {
				return
			}
			if _, err := s.Write(buf); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, size)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPUTime()
	for range b.N {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(processCPUTime()-cpu)/float64(b.N), "cpu-ns/op")
}

// BenchmarkStack runs tendril's stack (secio, then the mux, one stream) over a Conn and
// over TCP: one stream's bulk throughput in 64 KiB writes, and 64-byte round trips.
func BenchmarkStack(b *testing.B) {
	for _, kind := range []string{"tcp", "ws", "wss"} {
		for _, dir := range []string{"up", "down"} {
			if kind == "tcp" && dir == "down" {
				continue
			}
			b.Run(fmt.Sprintf("bulk64K/%s-%s", kind, dir), func(b *testing.B) {
				w, r := stackPair(b, kind, dir)
				benchBulk(b, w, r, 64<<10)
			})
		}
	}
	for _, kind := range []string{"tcp", "ws", "wss"} {
		b.Run("pingpong64/"+kind, func(b *testing.B) {
			w, r := stackPair(b, kind, "up")
			benchPingPong(b, w, r, 64)
		})
	}
}

// stackPair runs secio and the mux on a benchPair and returns a stream pair, writer first.
func stackPair(b *testing.B, kind, dir string) (w, r net.Conn) {
	b.Helper()
	cw, cr := benchPair(b, kind, dir)
	ka, err := secio.GenerateKey()
	if err != nil {
		b.Fatal(err)
	}
	kb, _ := secio.GenerateKey()
	type result struct {
		c   *secio.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := secio.Server(context.Background(), cr, &secio.Config{PrivateKey: kb})
		ch <- result{c, err}
	}()
	sw, err := secio.Client(context.Background(), cw, &secio.Config{PrivateKey: ka})
	if err != nil {
		b.Fatal(err)
	}
	res := <-ch
	if res.err != nil {
		b.Fatal(res.err)
	}
	mcfg := &mux.Config{KeepAliveInterval: -1}
	ms, err := mux.Client(sw, mcfg)
	if err != nil {
		b.Fatal(err)
	}
	ss, err := mux.Server(res.c, mcfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		done := make(chan struct{})
		go func() { ms.Close(); close(done) }()
		ss.Close()
		<-done
	})
	st, err := ms.OpenStream(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := st.Write([]byte{0}); err != nil {
		b.Fatal(err)
	}
	acc, err := ss.AcceptStream(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.ReadFull(acc, make([]byte, 1)); err != nil {
		b.Fatal(err)
	}
	return st, acc
}
