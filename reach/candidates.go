package reach

import (
	"strings"

	ma "github.com/multiformats/go-multiaddr"
	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/identify"
)

// Source says where a candidate address came from.
type Source uint8

// The sources of candidates, in the order they are preferred.
const (
	SourceMapped   Source = 1 << iota // given to AddCandidate: a port mapping, the operator
	SourceObserved                    // a peer's observed IP with this node's listen port
	SourceListen                      // a listen address on a public IP
)

// String names the sources set in s.
func (s Source) String() string {
	out := ""
	for _, n := range []struct {
		bit  Source
		name string
	}{{SourceMapped, "mapped"}, {SourceObserved, "observed"}, {SourceListen, "listen"}} {
		if s&n.bit != 0 {
			if out != "" {
				out += "+"
			}
			out += n.name
		}
	}
	return out
}

// candidate is an address to have dialled back, where it came from, and how many groups
// observed its IP (0 for addresses not observed).
type candidate struct {
	addr      ma.Multiaddr
	source    Source
	observers int
}

// candidates returns the addresses worth a dial-back, at most limit, the likeliest first:
//
//  1. mapped: what AddCandidate was given (a port mapping knows the external address);
//  2. each IP peers observe this node at, with the port of each listen address of the
//     same shape (/ip4/X/tcp/OBSERVEDPORT and a listener on /ip4/L/tcp/P give
//     /ip4/X/tcp/P), IPs seen from more groups first. This is what a NAT that forwards
//     the listen port, or preserves it, or no NAT at all, makes reachable; the observed
//     port itself is the outgoing connection's, which nothing listens on, so it is not a
//     candidate unless it is a listen port. A node with a single peer therefore has its
//     candidates at once, where waiting for several observers of one address (go-libp2p's
//     four) left small swarms without any (go-libp2p#1877);
//  3. listen addresses on public IPs.
//
// An address from several sources is listed once, at its first place, with every source.
func candidates(observed []identify.ObservedAddr, listen, mapped []ma.Multiaddr, limit int) []candidate {
	var out []candidate
	add := func(a ma.Multiaddr, src Source, observers int) {
		for i := range out {
			if out[i].addr.Equal(a) {
				out[i].source |= src
				out[i].observers = max(out[i].observers, observers)
				return
			}
		}
		if len(out) < limit {
			out = append(out, candidate{addr: a, source: src, observers: observers})
		}
	}
	for _, a := range mapped {
		add(a, SourceMapped, 0)
	}
	for _, o := range observed { // identify orders them by groups
		for _, l := range listen {
			if a := withPort(o.Addr, l); a != nil {
				add(a, SourceObserved, o.Groups)
			}
		}
	}
	for _, l := range listen {
		if publicIP(l) {
			add(l, SourceListen, 0)
		}
	}
	return out
}

// withPort returns observed with listen's port: both must be /ip4 or /ip6 (the same),
// then /tcp/PORT, then the same rest (nothing, /ws, ...). nil if they differ in shape.
func withPort(observed, listen ma.Multiaddr) ma.Multiaddr {
	if len(observed) < 2 || len(listen) < 2 || len(observed) != len(listen) {
		return nil
	}
	code := observed[0].Protocol().Code
	if (code != ma.P_IP4 && code != ma.P_IP6) || listen[0].Protocol().Code != code {
		return nil
	}
	if observed[1].Protocol().Code != ma.P_TCP || listen[1].Protocol().Code != ma.P_TCP {
		return nil
	}
	if !observed[2:].Equal(listen[2:]) {
		return nil
	}
	out := make(ma.Multiaddr, 0, len(observed))
	out = append(out, observed[0], listen[1])
	return append(out, observed[2:]...)
}

// publicIP reports whether a is on a routable IP address (addrbook's notion: not
// loopback, private, link-local, shared or documentation).
func publicIP(a ma.Multiaddr) bool {
	if _, ok := ipOf(a); !ok {
		return false
	}
	g := string(addrbook.GroupOf(a))
	return strings.HasPrefix(g, "ip4:") || strings.HasPrefix(g, "ip6:")
}

// Candidates returns the addresses at which this node may be reachable directly, at most
// limit, the likeliest first: each mapped address (a port mapping's), then each IP that
// peers observe this node at (identify.ObservedAddrs) with the port of each listen address
// of the same shape, then listen addresses on public IPs. It is what Reach has dialled
// back, and what a hole punch tells the other end to dial (package holepunch).
func Candidates(observed []identify.ObservedAddr, listen, mapped []ma.Multiaddr, limit int) []ma.Multiaddr {
	cs := candidates(observed, listen, mapped, limit)
	out := make([]ma.Multiaddr, len(cs))
	for i, c := range cs {
		out[i] = c.addr
	}
	return out
}
