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
	var obs []observation
	i.mu.Lock()
	for _, p := range i.peers {
		if p.info.Record != nil && len(p.info.Observed) > 0 {
			obs = append(obs, observation{p.info.Observed, p.group})
		}
	}
	i.mu.Unlock()
	return tally(obs)
}

// observation is one peer's report of this node's address, and the peer's own group.
type observation struct {
	addr  ma.Multiaddr
	group addrbook.Group
}

// tally counts the peers and distinct groups behind each address and orders them: most
// groups first, then most peers, then by address; at most MaxObservedAddrs.
func tally(obs []observation) []ObservedAddr {
	type count struct {
		ObservedAddr
		groups map[addrbook.Group]struct{}
	}
	byAddr := make(map[string]*count)
	for _, o := range obs {
		k := string(o.addr.Bytes())
		c := byAddr[k]
		if c == nil {
			c = &count{ObservedAddr: ObservedAddr{Addr: o.addr}, groups: make(map[addrbook.Group]struct{})}
			byAddr[k] = c
		}
		c.Peers++
		c.groups[o.group] = struct{}{}
	}
	out := make([]ObservedAddr, 0, len(byAddr))
	for _, c := range byAddr {
		c.Groups = len(c.groups)
		out = append(out, c.ObservedAddr)
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
