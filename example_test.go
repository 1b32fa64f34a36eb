package tendril_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/tendril-p2p/tendril"
)

// Two nodes on loopback: one echoes a protocol's messages back, the other sends a message
// and prints the answer.
func Example() {
	ctx := context.Background()
	echo := tendril.HandlerFuncs{OnReceived: func(c *tendril.Context, msg []byte) {
		c.Send(append([]byte("echo: "), msg...))
	}}
	server, err := tendril.New(tendril.Config{
		Protocols: []tendril.Protocol{{Name: "/echo", Versions: []string{"1.0", "1.1"}, Handler: echo}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer server.Close()
	addr, err := server.Listen(ctx, tendril.MustParseAddr("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		log.Fatal(err)
	}

	replies := make(chan string, 1)
	client, err := tendril.New(tendril.Config{
		Protocols: []tendril.Protocol{{Name: "/echo", Versions: []string{"1.0"}, Handler: tendril.HandlerFuncs{
			OnConnected: func(c *tendril.Context, version string) { fmt.Println("negotiated /echo", version) },
			OnReceived:  func(c *tendril.Context, msg []byte) { replies <- string(msg) },
		}}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	sess, err := client.Dial(ctx, addr) // addr carries /p2p/<server ID>: verified in the handshake
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("authenticated:", sess.Peer() == server.ID(), "secure:", sess.Secure())
	if err := sess.OpenProtocol(ctx, "/echo"); err != nil {
		log.Fatal(err)
	}
	if err := sess.Send("/echo", []byte("hello")); err != nil {
		log.Fatal(err)
	}
	fmt.Println(<-replies)
	// Output:
	// authenticated: true secure: true
	// negotiated /echo 1.0
	// echo: hello
}

func ExampleParseAddr() {
	a, err := tendril.ParseAddr("/ip4/192.0.2.7/tcp/4001")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(a.Transport, a.Peer.IsZero())
	ws := tendril.MustParseAddr("/dns/example.com/tcp/443/wss")
	fmt.Println(ws)
	_, err = tendril.ParseAddr("/ip4/192.0.2.7/tcp/4001/p2p/not-a-peer-id")
	fmt.Println(errors.Is(err, tendril.ErrInvalidAddr))
	// Output:
	// /ip4/192.0.2.7/tcp/4001 true
	// /dns/example.com/tcp/443/wss
	// true
}

// Counters of a session and of a Service: one message each way on one stream. Stats are
// cheap to read; exporting them (to Prometheus, say) is the application's job: see
// examples/prometheus.
func ExampleService_Stats() {
	ctx := context.Background()
	got := make(chan []byte, 1)
	echo := tendril.HandlerFuncs{OnReceived: func(c *tendril.Context, msg []byte) { c.Send(msg) }}
	server, err := tendril.New(tendril.Config{Protocols: []tendril.Protocol{{Name: "/echo", Versions: []string{"1.0"}, Handler: echo}}})
	if err != nil {
		log.Fatal(err)
	}
	defer server.Close()
	addr, err := server.Listen(ctx, tendril.MustParseAddr("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		log.Fatal(err)
	}
	client, err := tendril.New(tendril.Config{Protocols: []tendril.Protocol{{Name: "/echo", Versions: []string{"1.0"},
		Handler: tendril.HandlerFuncs{OnReceived: func(c *tendril.Context, msg []byte) { got <- msg }}, OpenOnConnect: true}}})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	sess, err := client.Dial(ctx, addr)
	if err != nil {
		log.Fatal(err)
	}
	if err := sess.Send("/echo", []byte("ping")); err != nil {
		log.Fatal(err)
	}
	<-got

	st := sess.Stats()
	fmt.Printf("session: %d message(s) sent, %d received, %d stream(s) opened, %d open, bytes both ways: %v\n",
		st.MessagesSent, st.MessagesReceived, st.StreamsOpened, st.StreamsOpen, st.BytesSent > 0 && st.BytesReceived > 0)
	cs := client.Stats()
	fmt.Printf("client: %d outbound session(s) open, %d in all, %d handshake(s) completed, %d failed\n",
		cs.OutboundOpen, cs.OutboundTotal, cs.HandshakesCompleted, cs.HandshakesFailed.Total())
	// Output:
	// session: 1 message(s) sent, 1 received, 1 stream(s) opened, 1 open, bytes both ways: true
	// client: 1 outbound session(s) open, 1 in all, 1 handshake(s) completed, 0 failed
}

// A key-value lookup over request/response: the server answers each request with a
// RequestHandler, and the client, which only requests, registers the protocol with no handler.
func ExampleSession_Request() {
	ctx := context.Background()
	capitals := map[string]string{"France": "Paris", "Japan": "Tokyo"}
	lookup := tendril.RequestHandlerFunc(func(_ *tendril.Context, req []byte) ([]byte, error) {
		city, ok := capitals[string(req)]
		if !ok {
			return nil, fmt.Errorf("no capital known for %q", req)
		}
		return []byte(city), nil
	})
	server, err := tendril.New(tendril.Config{
		Protocols: []tendril.Protocol{{Name: "/capital", Versions: []string{"1"}, RequestHandler: lookup}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer server.Close()
	addr, err := server.Listen(ctx, tendril.MustParseAddr("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		log.Fatal(err)
	}
	client, err := tendril.New(tendril.Config{
		Protocols: []tendril.Protocol{{Name: "/capital", Versions: []string{"1"}}}, // requests only
	})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	sess, err := client.Dial(ctx, addr)
	if err != nil {
		log.Fatal(err)
	}
	for _, country := range []string{"Japan", "Atlantis"} {
		reply, err := sess.Request(ctx, "/capital", []byte(country))
		var failed *tendril.RequestError
		switch {
		case errors.As(err, &failed):
			fmt.Println("refused:", failed.Reason)
		case err != nil:
			log.Fatal(err)
		default:
			fmt.Println(country, "->", string(reply))
		}
	}
	// Output:
	// Japan -> Tokyo
	// refused: no capital known for "Atlantis"
}
