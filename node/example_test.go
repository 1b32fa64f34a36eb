package node_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/node"
	"github.com/tendril-p2p/tendril/transport"
	"github.com/tendril-p2p/tendril/transport/memory"
)

// Three nodes in one process: the second and third know only the first, and find each
// other through it (identify and peer exchange), then the connection managers connect them.
func Example() {
	network := memory.NewNetwork(memory.NetworkConfig{})
	start := func(listen string, bootstrap ...tendril.Addr) *node.Node {
		n, err := node.New(node.Config{
			Service:   tendril.Config{Transports: []transport.Transport{network.NewTransport()}},
			Listen:    []tendril.Addr{tendril.MustParseAddr(listen)},
			Bootstrap: bootstrap,
		})
		if err != nil {
			panic(err)
		}
		if err := n.Start(context.Background()); err != nil {
			panic(err)
		}
		return n
	}
	first := start("/memory/1")
	defer first.Close()
	boot := first.Service().Addrs()[0]
	second := start("/memory/2", boot)
	defer second.Close()
	third := start("/memory/3", boot)
	defer third.Close()

	deadline := time.Now().Add(10 * time.Second)
	for second.Service().Session(third.ID()) == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("second and third connected:", second.Service().Session(third.ID()) != nil)
	// Output: second and third connected: true
}
