package mux

import (
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"testing"

	"github.com/hashicorp/yamux"
	"github.com/tendril-p2p/tendril/internal/testutil"
)

// benchConns opens a stream pair either through this package (coalesced) or
// through plain yamux over the same kind of TCP connection, for comparison.
func benchStreams(b *testing.B, plain bool) (client, server net.Conn, cleanup func()) {
	a, c := testutil.TCPPair(b)
	if plain {
		ycfg := yamux.DefaultConfig()
		ycfg.EnableKeepAlive = false
		ycfg.MaxStreamWindowSize = 16 << 20
		ycfg.LogOutput = io.Discard
		ys, _ := yamux.Client(a, ycfg)
		ss, _ := yamux.Server(c, ycfg)
		st, err := ys.OpenStream()
		if err != nil {
			b.Fatal(err)
		}
		st.Write([]byte{0})
		acc, err := ss.AcceptStream()
		if err != nil {
			b.Fatal(err)
		}
		acc.Read(make([]byte, 1))
		return st, acc, func() { ys.Close(); ss.Close() }
	}
	cfg := &Config{KeepAliveInterval: -1}
	cs, _ := Client(a, cfg)
	ss, _ := Server(c, cfg)
	st, err := cs.OpenStream(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	st.Write([]byte{0})
	acc, err := ss.AcceptStream(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	acc.Read(make([]byte, 1))
	return st, acc, func() { cs.Close(); ss.Close() }
}

func impls() []struct {
	name  string
	plain bool
} {
	return []struct {
		name  string
		plain bool
	}{{"impl=mux", false}, {"impl=yamux", true}}
}

// BenchmarkThroughput measures one-stream bulk transfer over loopback TCP.
func BenchmarkThroughput(b *testing.B) {
	for _, impl := range impls() {
		b.Run(impl.name, func(b *testing.B) {
			client, server, cleanup := benchStreams(b, impl.plain)
			defer cleanup()
			const chunk = 64 << 10
			buf := make([]byte, chunk)
			done := make(chan struct{})
			go func() {
				defer close(done)
				io.CopyN(io.Discard, server, int64(b.N)*chunk)
			}()
			b.SetBytes(chunk)
			b.ResetTimer()
			for range b.N {
				if _, err := client.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
			<-done
		})
	}
}

// BenchmarkRoundTrip64 measures 64-byte request/response round trips on one
// stream over loopback TCP.
func BenchmarkRoundTrip64(b *testing.B) {
	for _, impl := range impls() {
		b.Run(impl.name, func(b *testing.B) {
			client, server, cleanup := benchStreams(b, impl.plain)
			defer cleanup()
			go func() {
				buf := make([]byte, 64)
				for {
					if _, err := io.ReadFull(server, buf); err != nil {
						return
					}
					if _, err := server.Write(buf); err != nil {
						return
					}
				}
			}()
			buf := make([]byte, 64)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := client.Write(buf); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(client, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkIdleSession reports the heap and goroutines of idle session pairs
// (both ends, over net.Pipe, one stream opened and closed).
func BenchmarkIdleSession(b *testing.B) {
	for range b.N {
		const n = 200
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		g0 := runtime.NumGoroutine()
		var sessions []*Session
		for range n {
			a, c := net.Pipe()
			cs, _ := Client(a, nil)
			ss, _ := Server(c, nil)
			sessions = append(sessions, cs, ss)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/pair")
		b.ReportMetric(float64(runtime.NumGoroutine()-g0)/n, "goroutines/pair")
		for _, s := range sessions {
			s.Close()
		}
	}
}

func ExampleSession() {
	a, b := net.Pipe()
	client, _ := Client(a, nil)
	server, _ := Server(b, nil)
	defer client.Close()
	defer server.Close()

	go func() {
		st, err := server.AcceptStream(context.Background())
		if err != nil {
			return
		}
		io.Copy(st, st) // echo until the client half-closes
		st.Close()
	}()

	st, _ := client.OpenStream(context.Background())
	st.Write([]byte("hello"))
	st.CloseWrite()
	reply, _ := io.ReadAll(st)
	fmt.Printf("%s\n", reply)
	// Output: hello
}

// BenchmarkStreamOpenClose measures a stream's life over loopback TCP: open,
// one byte each way, close on both sides.
func BenchmarkStreamOpenClose(b *testing.B) {
	a, c := testutil.TCPPair(b)
	cfg := &Config{KeepAliveInterval: -1}
	cs, _ := Client(a, cfg)
	ss, _ := Server(c, cfg)
	defer cs.Close()
	defer ss.Close()
	go func() {
		buf := make([]byte, 1)
		for {
			st, err := ss.AcceptStream(context.Background())
			if err != nil {
				return
			}
			if _, err := io.ReadFull(st, buf); err == nil {
				st.Write(buf)
			}
			st.Close()
		}
	}()
	buf := make([]byte, 1)
	b.ReportAllocs()
	for b.Loop() {
		st, err := cs.OpenStream(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		st.Write(buf)
		if _, err := io.ReadFull(st, buf); err != nil {
			b.Fatal(err)
		}
		st.Close()
	}
}
