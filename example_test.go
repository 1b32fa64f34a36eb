package tendril_test

import (
	"context"
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
	_, err = tendril.ParseAddr("/ip4/192.0.2.7/udp/4001")
	fmt.Println(err != nil)
	// Output:
	// /ip4/192.0.2.7/tcp/4001 true
	// true
}
