//go:build !js

package ws

import (
	"context"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/transport"
)

// BenchmarkIdleConn reports the heap and goroutines of idle connection pairs (both ends,
// after a byte each way), over /ws and, for comparison, plain TCP; the listener is made
// before the measurement starts:
//
//	go test -run '^$' -bench IdleConn -benchtime 1x ./transport/ws/
func BenchmarkIdleConn(b *testing.B) {
	for _, kind := range []string{"tcp", "ws"} {
		b.Run(kind, func(b *testing.B) {
			const n = 200
			var ln transport.Listener
			var tcpLn net.Listener
			var ch <-chan upgraded
			tr := New(nil)
			if kind == "ws" {
				ln = listen(b, tr, "/ip4/127.0.0.1/tcp/0/ws", transport.ListenOptions{})
				ch = serve(b, ln, 5*time.Second)
			} else {
				var err error
				if tcpLn, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
					b.Fatal(err)
				}
				defer tcpLn.Close()
			}
			for range b.N {
				conns := make([]net.Conn, 0, 2*n)
				before := settledMemStats()
				g0 := runtime.NumGoroutine()
				for range n {
					var d, a net.Conn
					var err error
					if kind == "ws" {
						if d, err = tr.Dial(context.Background(), ln.Multiaddr()); err != nil {
							b.Fatal(err)
						}
						u := next(b, ch)
						if u.err != nil {
							b.Fatal(u.err)
						}
						a = u.conn
					} else {
						if d, err = net.Dial("tcp", tcpLn.Addr().String()); err != nil {
							b.Fatal(err)
						}
						if a, err = tcpLn.Accept(); err != nil {
							b.Fatal(err)
						}
					}
					exchange(b, d, a, "x")
					exchange(b, a, d, "y")
					conns = append(conns, d, a)
				}
				after := settledMemStats()
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/pair")
				b.ReportMetric(float64(runtime.NumGoroutine()-g0)/n, "goroutines/pair")
				for i := 0; i < len(conns); i += 2 {
					closeBoth(conns[i], conns[i+1])
				}
			}
		})
	}
}
