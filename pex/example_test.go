package pex_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/peerrecord"
	"github.com/tendril-p2p/tendril/pex"
	"github.com/tendril-p2p/tendril/secio"
	"github.com/tendril-p2p/tendril/transport"
	"github.com/tendril-p2p/tendril/transport/memory"
)

// A node that knows only a bootstrap peer asks it for others.
func Example() {
	network := memory.NewNetwork(memory.NetworkConfig{})
	ctx := context.Background()
	type node struct {
		svc  *tendril.Service
		key  *secio.PrivateKey
		addr tendril.Addr
		book *addrbook.Book
		pex  *pex.PEX
	}
	start := func() *node {
		key, _ := secio.GenerateKey()
		svc, err := tendril.New(tendril.Config{PrivateKey: key, Transports: []transport.Transport{network.NewTransport()}})
		if err != nil {
			panic(err)
		}
		addr, _ := svc.Listen(ctx, tendril.MustParseAddr("/memory/0"))
		var bucketKey [32]byte
		rand.Read(bucketKey[:])
		book, _ := addrbook.New(nil, bucketKey)
		// NoAutoAsk: this example asks by hand; a node would leave the loop on.
		p, err := pex.New(svc, book, pex.Config{NoAutoAsk: true})
		if err != nil {
			panic(err)
		}
		return &node{svc, key, addr, book, p}
	}
	newcomer, bootstrap, other := start(), start(), start()
	for _, n := range []*node{newcomer, bootstrap, other} {
		defer n.svc.Close()
		defer n.pex.Close()
	}

	// The bootstrap node holds the other's signed record, as identify gives it.
	rec, _ := peerrecord.New(other.key, 1, []ma.Multiaddr{other.addr.Transport})
	bootstrap.book.AddRecord(time.Now(), rec, addrbook.Source{Kind: addrbook.SourceIdentify})

	sess, err := newcomer.svc.Dial(ctx, bootstrap.addr)
	if err != nil {
		panic(err)
	}
	added, err := newcomer.pex.Ask(ctx, sess)
	fmt.Println("added:", added, err)
	for _, e := range newcomer.book.Select(time.Now(), 8, nil) {
		fmt.Println("learnt the other node:", e.Peer == other.svc.ID(), "via", e.Source.Kind)
	}
	// Output:
	// added: 1 <nil>
	// learnt the other node: true via peer
}
