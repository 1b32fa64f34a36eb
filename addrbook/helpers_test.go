package addrbook

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/secio"
)

// t0 is the fixed clock every test starts from.
var t0 = time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)

var testKey = [32]byte{1, 2, 3, 4, 5, 6, 7, 8}

// peerN returns a distinct, valid peer ID for n.
func peerN(n int) secio.PeerID {
	b := make([]byte, secio.PeerIDSize)
	b[0], b[1] = secio.MultihashBLAKE3, secio.PeerIDDigestSize
	binary.BigEndian.PutUint64(b[2:], uint64(n)+1)
	b[30] = 0xaa
	id, err := secio.PeerIDFromBytes(b)
	if err != nil {
		panic(err)
	}
	return id
}

func addr(s string) ma.Multiaddr { return ma.StringCast(s) }

// ip4 returns /ip4/a.b.c.d/tcp/4001 for a routable a.b (a in 11..200 avoids the
// special ranges).
func ip4(a, b, c, d int) ma.Multiaddr {
	return addr(fmt.Sprintf("/ip4/%d.%d.%d.%d/tcp/4001", a, b, c, d))
}

func newBook(t testing.TB, cfg *Config) *Book {
	t.Helper()
	b, err := New(cfg, testKey)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// groups returns the set of groups the book holds addresses of.
func groups(b *Book) map[Group]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := make(map[Group]int)
	for _, list := range b.peers {
		for _, e := range list {
			g[e.group]++
		}
	}
	return g
}

// checkInvariants verifies the book's bookkeeping: every entry in exactly one slot, the
// counts right, every bound held.
func checkInvariants(t testing.TB, b *Book) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	inTables := 0
	for ti, tab := range []*table{&b.newT, &b.triedT} {
		for pos, e := range tab.slots {
			if e == nil {
				continue
			}
			inTables++
			if e.pos != pos || e.tried != (ti == 1) {
				t.Fatalf("entry %v at slot %d of table %d records pos %d tried %v", e.addr, pos, ti, e.pos, e.tried)
			}
		}
	}
	listed := 0
	for p, list := range b.peers {
		if len(list) == 0 || len(list) > b.cfg.MaxAddrsPerPeer {
			t.Fatalf("peer %v has %d addresses", p, len(list))
		}
		listed += len(list)
	}
	if inTables != b.n || listed != b.n {
		t.Fatalf("%d entries in tables, %d in peer lists, count %d", inTables, listed, b.n)
	}
	if len(b.peers) > b.cfg.MaxPeers {
		t.Fatalf("%d peers > MaxPeers %d", len(b.peers), b.cfg.MaxPeers)
	}
}
