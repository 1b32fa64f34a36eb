package connmgr

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/secio"
)

// t0 is the fixed clock the plain-function tests start from.
var t0 = time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)

// peerN returns a distinct, valid peer ID for n.
func peerN(n int) secio.PeerID {
	b := make([]byte, secio.PeerIDSize)
	b[0], b[1] = secio.MultihashBLAKE3, secio.PeerIDDigestSize
	binary.BigEndian.PutUint64(b[2:], uint64(n)+1)
	b[30] = 0xcc
	id, err := secio.PeerIDFromBytes(b)
	if err != nil {
		panic(err)
	}
	return id
}

// ip4 returns /ip4/a.b.c.d/tcp/4001: with a in 11..99, a routable address of group
// a.b.0.0/16 (never dialled: the tests that use it dial nothing).
func ip4(a, b, c, d int) ma.Multiaddr {
	return ma.StringCast(fmt.Sprintf("/ip4/%d.%d.%d.%d/tcp/4001", a, b, c, d))
}

func newBook(t testing.TB, cfg *addrbook.Config) *addrbook.Book {
	t.Helper()
	b, err := addrbook.New(cfg, [32]byte{7})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
