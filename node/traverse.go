package node

// Getting through NATs beyond reachability and port mapping (nat.go): serving as a relay,
// holding reservations on relays while this node is not known to be public, dialling
// circuit addresses, and upgrading relayed sessions by hole punching.

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/autorelay"
	"github.com/tendril-p2p/tendril/holepunch"
	"github.com/tendril-p2p/tendril/reach"
	"github.com/tendril-p2p/tendril/relay"
	"github.com/tendril-p2p/tendril/secio"
)

// traversal is the Node's relay and hole-punching parts; each is nil when turned off.
type traversal struct {
	relay  *relay.Relay
	client *relay.Client
	auto   atomic.Pointer[autorelay.AutoRelay] // read by advertised, which identify calls from New on
	punch  *holepunch.Puncher
}

// newTraversal starts the relay service (Config.Relay), the relay client with autorelay
// (unless DisableAutoRelay) and hole punching (unless DisableHolePunch). It runs at the
// end of New, after reachability.
func (n *Node) newTraversal() error {
	t := &n.trav
	if n.cfg.Relay {
		rc := n.cfg.RelayConfig
		if rc.Logger == nil {
			rc.Logger = n.cfg.Logger
		}
		r, err := relay.NewRelay(n.svc, rc)
		if err != nil {
			return fmt.Errorf("node: relay: %w", err)
		}
		t.relay = r
	}
	if !n.cfg.DisableAutoRelay {
		cc := n.cfg.RelayClient
		if cc.Logger == nil {
			cc.Logger = n.cfg.Logger
		}
		cl, err := relay.NewClient(n.svc, cc)
		if err != nil {
			n.closeTraversal()
			return fmt.Errorf("node: relay client: %w", err)
		}
		t.client = cl
		ac := n.cfg.AutoRelay
		if ac.Needed == nil {
			ac.Needed = n.needsRelay
		}
		if ac.OnChange == nil {
			ac.OnChange = func([]ma.Multiaddr) { n.id.Update() }
		}
		if ac.Logger == nil {
			ac.Logger = n.cfg.Logger
		}
		a, err := autorelay.New(n.svc, n.id, cl, ac)
		if err != nil {
			n.closeTraversal()
			return fmt.Errorf("node: %w", err)
		}
		t.auto.Store(a)
	}
	if !n.cfg.DisableHolePunch {
		hc := n.cfg.HolePunch
		if hc.Addrs == nil {
			hc.Addrs = n.punchAddrs
		}
		if hc.Allow == nil && n.cfg.Public != nil {
			hc.Allow = n.cfg.Public
		}
		if hc.Logger == nil {
			hc.Logger = n.cfg.Logger
		}
		p, err := holepunch.New(n.svc, n.id, hc)
		if err != nil {
			n.closeTraversal()
			return fmt.Errorf("node: %w", err)
		}
		t.punch = p
	}
	return nil
}

// closeTraversal stops what newTraversal started, hole punching first.
func (n *Node) closeTraversal() {
	t := &n.trav
	if t.punch != nil {
		t.punch.Close()
	}
	if a := t.auto.Load(); a != nil {
		a.Close()
	}
	if t.client != nil {
		t.client.Close()
	}
	if t.relay != nil {
		t.relay.Close()
	}
}

// needsRelay is autorelay's default Needed: this node holds reservations unless reach
// has found it public (and always with DisableReach, as nothing can tell it is public).
func (n *Node) needsRelay() bool {
	r := n.nat.reach.Load()
	return r == nil || r.Reachability() != reach.Public
}

// circuitAddrs returns the circuit addresses of the reservations held.
func (n *Node) circuitAddrs() []ma.Multiaddr {
	if a := n.trav.auto.Load(); a != nil {
		return a.Addrs()
	}
	return nil
}

// punchAddrs is what a hole punch tells the other end to dial: reach's candidates (a
// mapped address, each observed IP with each listen port, public listen addresses), the
// confirmed ones first.
func (n *Node) punchAddrs() []ma.Multiaddr {
	r := n.nat.reach.Load()
	if r == nil {
		return nil // holepunch's default (the same candidates) is not used: see Config.HolePunch
	}
	st := r.Status()
	slices.SortStableFunc(st, func(a, b reach.AddrState) int {
		return boolRank(b.State == reach.Public) - boolRank(a.State == reach.Public)
	})
	out := make([]ma.Multiaddr, 0, len(st))
	for _, s := range st {
		if s.State != reach.Private || s.Source&reach.SourceObserved != 0 {
			out = append(out, s.Addr) // a NAT's filter makes an observed address "private" until punched
		}
	}
	return out
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// dial is the connection manager's Dial: circuit addresses through their relays.
func (n *Node) dial(ctx context.Context, a tendril.Addr) (*tendril.Session, error) {
	return autorelay.Dial(ctx, n.svc, a)
}

// Relay returns the relay this node serves (Config.Relay), or nil.
func (n *Node) Relay() *relay.Relay { return n.trav.relay }

// AutoRelay returns the reservations keeper, or nil with DisableAutoRelay.
func (n *Node) AutoRelay() *autorelay.AutoRelay { return n.trav.auto.Load() }

// HolePunch returns the hole puncher, or nil with DisableHolePunch.
func (n *Node) HolePunch() *holepunch.Puncher { return n.trav.punch }

// PeerConnection says how this node is connected to peer: "direct", "punched" (direct,
// by a hole punch), "relayed" (with why a punch failed, if one did), or "" if it is not.
func (n *Node) PeerConnection(peer secio.PeerID) string {
	s := n.svc.Session(peer)
	if s == nil {
		return ""
	}
	if p := n.trav.punch; p != nil {
		if r, ok := p.PeerReport(peer); ok {
			return r.String()
		}
	}
	if s.Relayed() {
		return "relayed"
	}
	return "direct"
}
