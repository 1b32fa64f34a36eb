package memory_test

import (
	"context"
	"fmt"
	"io"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/transport"
	"github.com/tendril-p2p/tendril/transport/memory"
)

// Two hosts 10 ms apart, one listening and echoing, the other dialling it.
func ExampleNetwork() {
	network := memory.NewNetwork(memory.NetworkConfig{
		Link: memory.Link{Delay: 10 * time.Millisecond, Rate: 10_000_000},
	})
	server, client := network.NewTransport(), network.NewTransport()
	ctx := context.Background()

	l, err := server.Listen(ctx, ma.StringCast("/memory/0"), transport.ListenOptions{})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c) // echo until the client half-closes
	}()

	start := time.Now()
	c, err := client.Dial(ctx, l.Multiaddr()) // one round trip
	if err != nil {
		panic(err)
	}
	defer c.Close()
	c.Write([]byte("hello"))
	c.(*memory.Conn).CloseWrite()
	reply, _ := io.ReadAll(c) // another
	fmt.Printf("listening on %s, dialled from %s\n", l.Multiaddr(), c.LocalAddr())
	fmt.Printf("echo %q after two round trips: %v\n", reply, time.Since(start) >= 40*time.Millisecond)
	// Output:
	// listening on /memory/49152, dialled from /memory/49153
	// echo "hello" after two round trips: true
}
