package tendril

import (
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/internal/testutil"
)

// Whole-stack benchmarks over loopback TCP: secio + mux + protocol + Service.
//
//	go test -run '^$' -bench . -count 6 . | benchstat -

// benchPair returns a client Service with a session to a server Service that speaks
// /sink (raw: counts bytes to EOF and writes back one byte) and /echo (messages echoed).
func benchPair(b *testing.B) (*Service, *Service, *Session, chan []byte) {
	b.Helper()
	sink := StreamHandlerFunc(func(_ *Context, _ string, st net.Conn) {
		if _, err := io.Copy(io.Discard, st); err == nil {
			st.Write([]byte{1})
		}
	})
	replies := make(chan []byte, 1)
	server := newService(b, Config{Protocols: []Protocol{
		{Name: "/sink", Versions: []string{"1"}, StreamHandler: sink},
		{Name: "/echo", Versions: []string{"1"}, Handler: HandlerFuncs{OnReceived: func(c *Context, m []byte) { c.Send(m) }}},
	}})
	client := newService(b, Config{Protocols: []Protocol{
		{Name: "/sink", Versions: []string{"1"}, StreamHandler: sink},
		{Name: "/echo", Versions: []string{"1"}, Handler: HandlerFuncs{OnReceived: func(_ *Context, m []byte) { replies <- m }}},
	}})
	sess, err := client.Dial(context.Background(), listen(b, server))
	if err != nil {
		b.Fatal(err)
	}
	return client, server, sess, replies
}

func BenchmarkThroughput(b *testing.B) {
	for _, streams := range []int{1, 8} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) {
			_, _, sess, _ := benchPair(b)
			const chunk = 64 << 10
			buf := make([]byte, chunk)
			b.SetBytes(chunk)
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			per := b.N / streams
			for i := range streams {
				n := per
				if i == 0 {
					n += b.N % streams
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					st, _, err := sess.OpenStream(context.Background(), "/sink")
					if err != nil {
						b.Error(err)
						return
					}
					defer st.Close()
					for range n {
						if _, err := st.Write(buf); err != nil {
							b.Error(err)
							return
						}
					}
					st.(interface{ CloseWrite() error }).CloseWrite()
					var ack [1]byte
					if _, err := io.ReadFull(st, ack[:]); err != nil {
						b.Error(err)
					}
				}()
			}
			wg.Wait()
		})
	}
}

func BenchmarkRoundTrip64(b *testing.B) {
	_, _, sess, replies := benchPair(b)
	if err := sess.OpenProtocol(context.Background(), "/echo"); err != nil {
		b.Fatal(err)
	}
	msg := make([]byte, 64)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := sess.Send("/echo", msg); err != nil {
			b.Fatal(err)
		}
		<-replies
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "roundtrips/s")
}

// BenchmarkConnect measures a whole connection: TCP dial, handshake, mux, protocol
// negotiation and one 64-byte round trip, then a close.
func BenchmarkConnect(b *testing.B) {
	replies := make(chan []byte, 1)
	echo := Protocol{Name: "/echo", Versions: []string{"1"}, Handler: HandlerFuncs{OnReceived: func(c *Context, m []byte) { c.Send(m) }}}
	server := newService(b, Config{Protocols: []Protocol{echo}, MaxConnections: 1 << 16})
	addr, err := server.Listen(context.Background(), loopbackAddr)
	if err != nil {
		b.Fatal(err)
	}
	client := newService(b, Config{MaxConnections: 1 << 16, Protocols: []Protocol{{Name: "/echo", Versions: []string{"1"},
		Handler: HandlerFuncs{OnReceived: func(_ *Context, m []byte) { replies <- m }}}}})
	msg := make([]byte, 64)
	b.ResetTimer()
	for range b.N {
		sess, err := client.Dial(context.Background(), addr)
		if err != nil {
			b.Fatal(err)
		}
		if err := sess.OpenProtocol(context.Background(), "/echo"); err != nil {
			b.Fatal(err)
		}
		if err := sess.Send("/echo", msg); err != nil {
			b.Fatal(err)
		}
		<-replies
		sess.abort(nil) // abrupt, as a benchmark loop would; graceful close is measured elsewhere
		<-sess.Done()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "conns/s")
}

// BenchmarkIdleConnection reports the heap, goroutine stacks and goroutines that one idle
// connection holds, both ends counted, with one message protocol open.
func BenchmarkIdleConnection(b *testing.B) {
	const conns = 200
	for range b.N {
		echo := Protocol{Name: "/echo", Versions: []string{"1"}, Handler: HandlerFuncs{}}
		server := newService(b, Config{Protocols: []Protocol{echo}, MaxConnections: 2 * conns})
		addr, err := server.Listen(context.Background(), loopbackAddr)
		if err != nil {
			b.Fatal(err)
		}
		client := newService(b, Config{Protocols: []Protocol{echo}, MaxConnections: 2 * conns})
		// Distinct client identities, so that each connection is its own session.
		clients := []*Service{client}
		for range conns - 1 {
			clients = append(clients, newService(b, Config{Protocols: []Protocol{echo}}))
		}
		time.Sleep(50 * time.Millisecond)
		before, stack0, g0 := heapInUse()
		for _, c := range clients {
			sess, err := c.Dial(context.Background(), addr)
			if err != nil {
				b.Fatal(err)
			}
			if err := sess.OpenProtocol(context.Background(), "/echo"); err != nil {
				b.Fatal(err)
			}
		}
		time.Sleep(100 * time.Millisecond)
		after, stack1, g1 := heapInUse()
		b.ReportMetric(float64(after-before)/conns, "heap-B/conn")
		b.ReportMetric(float64(stack1-stack0)/conns, "stack-B/conn")
		b.ReportMetric(float64(g1-g0)/conns, "goroutines/conn")
		for _, c := range clients {
			c.Close()
		}
		server.Close()
	}
}

func heapInUse() (heap, stack uint64, goroutines int) {
	ms := testutil.SettledMemStats()
	return ms.HeapInuse, ms.StackInuse, runtime.NumGoroutine()
}

// BenchmarkStreamRoundTrip64 measures 64-byte round trips on a raw stream (OpenStream), with
// one version (negotiated lazily) and with two (negotiated before OpenStream returns).
func BenchmarkStreamRoundTrip64(b *testing.B) {
	for _, vs := range [][]string{{"1"}, {"1", "2"}} {
		b.Run(fmt.Sprintf("versions=%d", len(vs)), func(b *testing.B) {
			echo := StreamHandlerFunc(func(_ *Context, _ string, st net.Conn) {
				buf := make([]byte, 64)
				for {
					if _, err := io.ReadFull(st, buf); err != nil {
						return
					}
					st.Write(buf)
				}
			})
			cfg := Config{Protocols: []Protocol{{Name: "/e", Versions: vs, StreamHandler: echo}}}
			srv := newService(b, cfg)
			cli := newService(b, cfg)
			sess, err := cli.Dial(context.Background(), listen(b, srv))
			if err != nil {
				b.Fatal(err)
			}
			st, _, err := sess.OpenStream(context.Background(), "/e")
			if err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, 64)
			b.ResetTimer()
			for range b.N {
				if _, err := st.Write(buf); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(st, buf); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "roundtrips/s")
		})
	}
}
