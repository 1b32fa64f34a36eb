package tendril

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"slices"
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

// BenchmarkRequest: 64-byte requests and replies from 8 goroutines on one session, with
// Session.Request (a stream per request) and, beside it, the hand-written version an
// application wrote before it existed: request IDs over one message stream, a map of pending
// requests and routing in OnReceived. Reports requests/s and the 99th percentile latency.
//
//	go test -run '^$' -bench Request -count 6 .
func BenchmarkRequest(b *testing.B) {
	const goroutines = 8
	run := func(b *testing.B, do func([]byte) ([]byte, error)) {
		lat := make([][]time.Duration, goroutines)
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				req := make([]byte, 64)
				for i := g; i < b.N; i += goroutines {
					t0 := time.Now()
					reply, err := do(req)
					if err != nil || len(reply) != len(req) {
						b.Errorf("request: %d bytes, %v", len(reply), err)
						return
					}
					lat[g] = append(lat[g], time.Since(t0))
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		b.StopTimer()
		var all []time.Duration
		for _, l := range lat {
			all = append(all, l...)
		}
		if len(all) == 0 {
			return
		}
		slices.Sort(all)
		b.ReportMetric(float64(len(all))/elapsed.Seconds(), "requests/s")
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
	}
	b.Run("impl=Request", func(b *testing.B) {
		echo := Protocol{Name: "/echo", Versions: []string{"1"}, RequestHandler: RequestHandlerFunc(
			func(_ *Context, req []byte) ([]byte, error) { return req, nil })}
		server := newService(b, Config{Protocols: []Protocol{echo}})
		client := newService(b, Config{Protocols: []Protocol{{Name: "/echo", Versions: []string{"1"}}}})
		sess := dial(b, client, listen(b, server))
		run(b, func(req []byte) ([]byte, error) { return sess.Request(context.Background(), "/echo", req) })
	})
	b.Run("impl=hand-written", func(b *testing.B) {
		// What an application wrote before Request: an 8-byte ID in front of each message,
		// a pending map, and OnReceived routing the replies.
		var (
			mu      sync.Mutex
			pending = map[uint64]chan []byte{}
			nextID  uint64
		)
		server := newService(b, Config{Protocols: []Protocol{{Name: "/rr", Versions: []string{"1"},
			Handler: HandlerFuncs{OnReceived: func(c *Context, m []byte) { _ = c.SendContext(context.Background(), m) }}}}})
		client := newService(b, Config{Protocols: []Protocol{{Name: "/rr", Versions: []string{"1"},
			Handler: HandlerFuncs{OnReceived: func(_ *Context, m []byte) {
				id := binary.BigEndian.Uint64(m)
				mu.Lock()
				ch := pending[id]
				delete(pending, id)
				mu.Unlock()
				if ch != nil {
					ch <- m[8:]
				}
			}}}}})
		sess := dialOpen(b, client, listen(b, server), "/rr")
		run(b, func(req []byte) ([]byte, error) {
			ch := make(chan []byte, 1)
			mu.Lock()
			nextID++
			id := nextID
			pending[id] = ch
			mu.Unlock()
			msg := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(req)), id)
			if err := sess.SendContext(context.Background(), "/rr", append(msg, req...)); err != nil {
				return nil, err
			}
			select {
			case r := <-ch:
				return r, nil
			case <-time.After(10 * time.Second):
				return nil, errors.New("no reply")
			}
		})
	})
}
