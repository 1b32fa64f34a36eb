package addrbook_test

import (
	"crypto/rand"
	"fmt"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/hash/blake3"
	"github.com/tendril-p2p/tendril/secio"
)

func Example() {
	// The bucket secret: random, kept beside the node's key so positions survive a
	// restart.
	var key [32]byte
	rand.Read(key[:])
	book, err := addrbook.New(nil, key)
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	// A peer ID as a session reports it (here made from a digest for the example).
	digest := blake3.Sum256([]byte("example peer"))
	peer, err := secio.PeerIDFromBytes(append([]byte{secio.MultihashBLAKE3, secio.PeerIDDigestSize}, digest[:]...))
	if err != nil {
		panic(err)
	}
	addr := ma.StringCast("/ip4/1.2.3.4/tcp/4001")

	// The peer's signed identify record lists the address.
	book.Add(now, peer, []ma.Multiaddr{addr}, addrbook.Source{Kind: addrbook.SourceIdentify})

	// The dialler asks whom to dial, and reports how it went.
	for _, c := range book.Select(now, 8, nil) {
		book.Attempt(now, c.Peer, c.Addr)
		book.Good(now.Add(time.Second), c.Peer, c.Addr)
	}
	for _, e := range book.Addrs(now, peer) {
		fmt.Println(e.Addr, e.Group, e.Source.Kind, "tried:", e.Tried)
	}
	// Output:
	// /ip4/1.2.3.4/tcp/4001 ip4:1.2.0.0/16 identify tried: true
}
