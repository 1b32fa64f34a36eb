package identify

import (
	"fmt"
	"testing"

	ma "github.com/multiformats/go-multiaddr"
	"github.com/tendril-p2p/tendril/addrbook"
)

// TestTally: an address reported by many peers of one group ranks below one reported from
// more groups, so that one operator's Sybils cannot outvote the rest; the list is capped.
func TestTally(t *testing.T) {
	public := ma.StringCast("/ip4/203.0.113.5/tcp/4001")
	claimed := ma.StringCast("/ip4/198.51.100.99/tcp/4001")
	var obs []observation
	for range 20 { // 20 Sybils in one /16
		obs = append(obs, observation{claimed, addrbook.GroupOf(ma.StringCast("/ip4/192.0.2.1/tcp/1"))})
	}
	for _, g := range []string{"/ip4/8.8.1.1/tcp/1", "/ip4/9.9.1.1/tcp/1", "/ip4/1.1.1.1/tcp/1"} {
		obs = append(obs, observation{public, addrbook.GroupOf(ma.StringCast(g))})
	}
	got := tally(obs)
	if len(got) != 2 || !got[0].Addr.Equal(public) || got[0].Groups != 3 || got[0].Peers != 3 ||
		!got[1].Addr.Equal(claimed) || got[1].Groups != 1 || got[1].Peers != 20 {
		t.Fatalf("tally: %+v", got)
	}
	obs = nil
	for k := range 2 * MaxObservedAddrs {
		obs = append(obs, observation{ma.StringCast(fmt.Sprintf("/ip4/203.0.113.5/tcp/%d", k+1)), addrbook.GroupMemory})
	}
	if got := tally(obs); len(got) != MaxObservedAddrs {
		t.Fatalf("%d addresses, want at most %d", len(got), MaxObservedAddrs)
	}
}
