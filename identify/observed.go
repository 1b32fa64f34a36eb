package identify

import (
	"cmp"
	"slices"

	ma "github.com/multiformats/go-multiaddr"
	"github.com/tendril-p2p/tendril/addrbook"
)

// MaxObservedAddrs bounds the list ObservedAddrs returns.
const MaxObservedAddrs = 32

// ObservedAddr is an address of this node as connected peers see it.
type ObservedAddr struct {
	Addr ma.Multiaddr
	// Groups is how many distinct address groups (addrbook.GroupOf of each observer's own
	// address) the observers are in: the measure to trust, since one operator can run
	// many peers but in few groups.
	Groups int
	// Peers is how many connected peers reported it.
	Peers int
}

// ObservedAddrs returns the addresses this node is seen at by the peers connected now,
// as each last said: most groups first, then most peers, at most MaxObservedAddrs. An
// observation lasts as long as its observer's identify stream, so the list is bounded by
// the sessions and follows them. Reachability checks build on it: an address seen from
// several groups is likely this node's public mapping.
func (i *Identify) ObservedAddrs() []ObservedAddr {
	type tally struct {
		ObservedAddr
		groups map[addrbook.Group]struct{}
	}
	byAddr := make(map[string]*tally)
	i.mu.Lock()
	for _, p := range i.peers {
		if p.info.Record == nil || len(p.info.Observed) == 0 {
			continue
		}
		k := string(p.info.Observed.Bytes())
		t := byAddr[k]
		if t == nil {
			t = &tally{ObservedAddr: ObservedAddr{Addr: p.info.Observed}, groups: make(map[addrbook.Group]struct{})}
			byAddr[k] = t
		}
		t.Peers++
		t.groups[p.group] = struct{}{}
	}
	i.mu.Unlock()
	out := make([]ObservedAddr, 0, len(byAddr))
	for _, t := range byAddr {
		t.Groups = len(t.groups)
		out = append(out, t.ObservedAddr)
	}
	slices.SortFunc(out, func(a, b ObservedAddr) int {
		if c := cmp.Compare(b.Groups, a.Groups); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Peers, a.Peers); c != 0 {
			return c
		}
		return a.Addr.Compare(b.Addr)
	})
	return out[:min(len(out), MaxObservedAddrs)]
}
