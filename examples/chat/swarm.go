//go:build !js

package main

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/connmgr"
	tnode "github.com/tendril-p2p/tendril/node"
	"github.com/tendril-p2p/tendril/secio"
)

// newSwarmNode builds the chat peer as a tendril node: the chat protocol on a Service
// with identify, peer exchange, an address book (-book), mDNS (-mdns) and a manager that
// keeps -target outbound sessions, so that the peer finds others beyond those it dials.
func newSwarmNode(n *node, key *secio.PrivateKey, o *options) (*tnode.Node, error) {
	var boot []tendril.Addr
	for _, b := range o.bootstrap {
		a, err := tendril.ParseAddr(b)
		if err != nil {
			return nil, fmt.Errorf("-bootstrap %s: %w", b, err)
		}
		boot = append(boot, a)
	}
	cfg := tnode.Config{
		Service:   tendril.Config{PrivateKey: key, Protocols: []tendril.Protocol{chatProtocol(n)}},
		Bootstrap: boot,
		BookFile:  o.book,
		MDNS:      o.mdns,
		Agent:     "tendril-chat/1.2",
		Connect:   connmgr.Config{Target: o.target},
		Relay:     o.relay,
	}
	if len(o.punchNets) > 0 {
		nets := o.punchNets
		cfg.HolePunch.Allow = func(a ma.Multiaddr) bool {
			if addrbook.IsPublic(a) {
				return true
			}
			ip, err := netip.ParseAddr(a[0].Value())
			return err == nil && slices.ContainsFunc(nets, func(p netip.Prefix) bool { return p.Contains(ip) })
		}
	}
	nd, err := tnode.New(cfg)
	if err != nil {
		return nil, err
	}
	n.svc = nd.Service()
	return nd, nil
}

// printPeers answers /peers: the connected peers, how each is connected and what it runs,
// then what the address book holds and, for the peers it knows but is not connected to,
// why not.
func printPeers(n *node, nd *tnode.Node) {
	svc := nd.Service()
	sessions := svc.Sessions()
	slices.SortFunc(sessions, func(a, b *tendril.Session) int { return a.Peer().Compare(b.Peer()) })
	var b strings.Builder
	fmt.Fprintf(&b, "%d connected:", len(sessions))
	for _, s := range sessions {
		agent := "?"
		if info, ok := nd.Identify().Info(s.Peer()); ok {
			agent = info.Agent
		}
		fmt.Fprintf(&b, "\n  %s %s %s, rtt %v, %s, up %v; %s", short(s.Peer().String()), s.Direction(),
			s.RemoteAddr().Transport, s.RTT().Round(100*time.Microsecond), agent,
			time.Since(s.OpenedAt()).Round(time.Second), nd.PeerConnection(s.Peer()))
	}
	var observed []string
	for _, o := range nd.Identify().ObservedAddrs() {
		observed = append(observed, o.Addr.String())
	}
	fmt.Fprintf(&b, "\nseen by peers at: %s", strings.Join(observed, " "))
	fmt.Fprintf(&b, "\n%s", nd.Reachability())
	if a := nd.AutoRelay(); a != nil {
		var circuits []string
		for _, c := range a.Addrs() {
			circuits = append(circuits, c.String())
		}
		fmt.Fprintf(&b, "\nreachable through relays at: %s", strings.Join(circuits, " "))
	}
	addrs, peers := nd.Book().Len()
	fmt.Fprintf(&b, "\naddress book: %d addresses of %d peers", addrs, peers)
	shown := 0
	for _, e := range nd.Book().Select(time.Now(), 64, func(p secio.PeerID) bool { return svc.Session(p) != nil }) {
		if shown == 5 {
			break
		}
		st := nd.Manager().Status(e.Peer)
		fmt.Fprintf(&b, "\n  not connected to %s (%s): %s", short(e.Peer.String()), e.Addr, st.Reason)
		shown++
	}
	n.printf("%s", b.String())
}
