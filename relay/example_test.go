package relay_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/relay"
	"github.com/tendril-p2p/tendril/transport"
	"github.com/tendril-p2p/tendril/transport/memory"
)

// A private node reserves a slot on a relay; a dialer that knows only the relay's address
// reaches it through the relay, with the handshake run end to end.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	network := memory.NewNetwork(memory.NetworkConfig{})
	echo := tendril.Protocol{Name: "/echo", Versions: []string{"1"}, RequestHandler: tendril.RequestHandlerFunc(
		func(_ *tendril.Context, req []byte) ([]byte, error) { return req, nil })}
	node := func() *tendril.Service {
		svc, err := tendril.New(tendril.Config{Protocols: []tendril.Protocol{echo},
			Transports: []transport.Transport{network.NewTransport()}})
		if err != nil {
			panic(err)
		}
		return svc
	}
	pub, private, dialer := node(), node(), node()
	defer pub.Close()
	defer private.Close()
	defer dialer.Close()
	relayAddr, err := pub.Listen(ctx, tendril.MustParseAddr("/memory/0"))
	if err != nil {
		panic(err)
	}

	r, err := relay.NewRelay(pub, relay.RelayConfig{})
	if err != nil {
		panic(err)
	}
	defer r.Close()
	client, err := relay.NewClient(private, relay.ClientConfig{})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	res, err := client.Reserve(ctx, relayAddr)
	if err != nil {
		panic(err)
	}

	// The circuit address travels as text: RELAY/p2p/ID/p2p-circuit/p2p/TARGET.
	circ, err := relay.ParseCircuit(res.Addr().String())
	if err != nil {
		panic(err)
	}
	sess, err := relay.Dial(ctx, dialer, circ)
	if err != nil {
		panic(err)
	}
	reply, err := sess.Request(ctx, "/echo", []byte("hello through the relay"))
	fmt.Println(string(reply), err)
	fmt.Println("peer verified:", sess.Peer() == private.ID(), "relayed:", relay.IsRelayed(sess.RemoteAddr()))
	// Output:
	// hello through the relay <nil>
	// peer verified: true relayed: true
}
