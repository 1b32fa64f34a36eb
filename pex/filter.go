package pex

import (
	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/peerrecord"
	"github.com/tendril-p2p/tendril/secio"
)

// IsPublic reports whether a is an address on the public Internet: a routable IP address
// or a DNS name other than localhost (addrbook.GroupOf's ip4, ip6 and dns groups). Loopback,
// private, link-local, unspecified, shared and documentation ranges, in-process (/memory)
// and other transports are not.
func IsPublic(a ma.Multiaddr) bool { return addrbook.IsPublic(a) }

// ownAddrs is the set of this node's listen addresses, by binary form.
type ownAddrs map[string]struct{}

func (o ownAddrs) has(a ma.Multiaddr) bool {
	_, ok := o[string(a.Bytes())]
	return ok
}

// admit returns the addresses of rec, received from a peer, that may enter the book:
// none of a record of this node (self), and of another's neither this node's own
// addresses (a peer claiming them would have this node dial itself, or others dial it in
// that peer's name) nor, from a public answerer, addresses that are not public (of no
// use to this node, and a way to have it probe its own network).
func admit(rec *peerrecord.Record, self secio.PeerID, own ownAddrs, fromPublic bool) []ma.Multiaddr {
	if rec.Peer() == self {
		return nil
	}
	var keep []ma.Multiaddr
	for _, a := range rec.Addrs() {
		if own.has(a) || (fromPublic && !IsPublic(a)) {
			continue
		}
		keep = append(keep, a)
	}
	return keep
}
