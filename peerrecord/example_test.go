package peerrecord_test

import (
	"fmt"

	ma "github.com/multiformats/go-multiaddr"
	"github.com/tendril-p2p/tendril/peerrecord"
	"github.com/tendril-p2p/tendril/secio"
)

func Example() {
	key, _ := secio.GenerateKey()
	addr, _ := ma.NewMultiaddr("/ip4/198.51.100.7/tcp/4001")
	rec, err := peerrecord.New(key, 1, []ma.Multiaddr{addr})
	if err != nil {
		panic(err)
	}
	// rec.Bytes() travels; anyone can check it against its owner.
	got, err := peerrecord.Parse(rec.Bytes())
	fmt.Println(err, got.Peer() == key.PeerID(), got.Addrs()[0])
	// Output: <nil> true /ip4/198.51.100.7/tcp/4001
}
