package memory

import (
	"fmt"
	"io"
	"testing"
)

// BenchmarkConn measures one unshaped connection's throughput (the fast path of plain
// in-memory tests): a writer and a reader goroutine, writes and reads of each size.
func BenchmarkConn(b *testing.B) {
	for _, size := range []int{128, 4 << 10, 64 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			w, r := pair(b, Link{})
			done := make(chan error)
			go func() {
				buf := make([]byte, size)
				_, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{r}, buf)
				done <- err
			}()
			p := make([]byte, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := w.Write(p); err != nil {
					b.Fatal(err)
				}
			}
			w.CloseWrite()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkPingPong measures a round trip of a small message over an unshaped
// connection: the cost of waking the peer and being woken.
func BenchmarkPingPong(b *testing.B) {
	c, peer := pair(b, Link{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 8)
		for {
			if _, err := io.ReadFull(peer, buf); err != nil {
				return
			}
			if _, err := peer.Write(buf); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 8)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		c.Write(buf)
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	c.Close()
	<-done
}
