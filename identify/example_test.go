package identify_test

import (
	"context"
	"fmt"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/identify"
	"github.com/tendril-p2p/tendril/peerrecord"
	"github.com/tendril-p2p/tendril/secio"
	"github.com/tendril-p2p/tendril/transport"
	"github.com/tendril-p2p/tendril/transport/memory"
)

func Example() {
	network := memory.NewNetwork(memory.NetworkConfig{})
	// node starts a Service on the in-memory network with identify beside it; learned
	// reports each update identify accepts from a peer.
	node := func(agent string, protos ...tendril.Protocol) (*tendril.Service, *identify.Identify, chan identify.Info) {
		key, _ := secio.GenerateKey()
		svc, err := tendril.New(tendril.Config{
			PrivateKey: key,
			Protocols:  protos,
			Transports: []transport.Transport{network.NewTransport()},
		})
		if err != nil {
			panic(err)
		}
		learned := make(chan identify.Info, 1)
		id, err := identify.New(svc, identify.Config{
			PrivateKey: key, // the Service's key signs the node's record
			Agent:      agent,
			OnIdentify: func(info identify.Info) {
				select {
				case learned <- info:
				default: // keep the first
				}
			},
		})
		if err != nil {
			panic(err)
		}
		return svc, id, learned
	}
	chat := tendril.Protocol{Name: "/chat", Versions: []string{"1.0"}, Handler: tendril.HandlerFuncs{}}
	alice, aliceID, _ := node("alice/1", chat)
	bob, bobID, bobLearned := node("bob/1")
	defer alice.Close()
	defer bob.Close()
	defer aliceID.Close()
	defer bobID.Close()

	addr, _ := alice.Listen(context.Background(), tendril.MustParseAddr("/memory/0"))
	if _, err := bob.Dial(context.Background(), addr); err != nil {
		panic(err)
	}
	info := <-bobLearned
	// The record is signed by alice's key: anyone bob passes it to can check it.
	rec, err := peerrecord.Parse(info.Record.Bytes())
	fmt.Println(info.Agent, info.Protocols, err == nil && rec.Peer() == alice.ID())
	fmt.Println("alice listens at", info.Record.Addrs()[0])
	// Output:
	// alice/1 [{/chat [1.0]}] true
	// alice listens at /memory/49152
}
