package node

// Through NATs (issue 29): reachability and port mapping, wired to identify.
//
// Reachability (package reach) runs by default: peers dial this node back at its
// candidate addresses, and it tells each address Public or Private once two address groups
// agree. Port mapping (package portmap) runs only when Config.PortMap asks: one Mapper per
// IPv4 TCP listen port that is not on a public IP. Each mapping the gateway grants becomes
// a reach candidate (AddCandidate of /ip4/EXT/tcp/EXTPORT), replaced when it changes and
// removed when it is lost or at Close; a mapping is never advertised on the gateway's word.
// identify advertises every address reach confirmed Public (a mapping, a port forwarded by
// hand, a 1:1 NAT) besides the listen addresses, re-signing the record when one is
// confirmed or lost.

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/identify"
	"github.com/tendril-p2p/tendril/portmap"
	"github.com/tendril-p2p/tendril/reach"
	"github.com/tendril-p2p/tendril/secio"
)

// MaxObserversListed bounds the observers AddrReachability.ObservedBy lists per address.
const MaxObserversListed = 8

// natState is the Node's reachability and port mapping.
type natState struct {
	reach atomic.Pointer[reach.Reach] // nil: off, or not made yet (identify asks from New on)
	group func(ma.Multiaddr) addrbook.Group

	mu      sync.Mutex    // guards mappers and their cur, cand and err
	mappers []*portMapper // one per mapped listen port, from Start

	follow sync.WaitGroup // followReach, until reach's Events close
}

// portMapper is one listen port's Mapper and what it holds.
type portMapper struct {
	m      *portmap.Mapper
	listen ma.Multiaddr    // the listen address whose port it maps
	cur    portmap.Mapping // guarded by natState.mu: the mapping held (zero: none)
	cand   ma.Multiaddr    // guarded by natState.mu: the reach candidate made of cur
}

// newNAT validates the configuration and starts reachability on the Service (unless
// Config.DisableReach). It runs at the end of New, after identify.
func (n *Node) newNAT() error {
	if n.cfg.PortMap {
		pc := n.cfg.PortMapConfig
		pc.InternalPort = 1 // set per port at Start
		if err := pc.Validate(); err != nil {
			return fmt.Errorf("%w: PortMapConfig: %w", ErrInvalidConfig, err)
		}
	}
	n.nat.group = n.cfg.Reach.Group
	if n.nat.group == nil {
		n.nat.group = addrbook.GroupOf
	}
	if n.cfg.DisableReach {
		return nil
	}
	rc := n.cfg.Reach
	if rc.Logger == nil {
		rc.Logger = n.cfg.Logger
	}
	r, err := reach.New(n.svc, n.id, rc)
	if err != nil {
		return err
	}
	n.nat.reach.Store(r)
	return nil
}

// startNAT follows reachability and starts a Mapper per mappable listen port (if
// Config.PortMap). Mapping failures are the Mappers' to retry: Reachability reports them.
func (n *Node) startNAT(ctx context.Context) error {
	if r := n.nat.reach.Load(); r != nil {
		n.nat.follow.Add(1)
		go n.followReach(r)
	}
	if !n.cfg.PortMap {
		return nil
	}
	ports := map[int]bool{}
	for _, a := range n.svc.Addrs() {
		port, ok := mappable(a.Transport)
		if !ok || ports[port] {
			continue
		}
		ports[port] = true
		pm := &portMapper{listen: a.Transport}
		cfg := n.cfg.PortMapConfig
		cfg.InternalPort, cfg.Protocol = port, "tcp"
		cfg.OnChange = func(mp portmap.Mapping) { n.mappingChanged(pm, mp) }
		if cfg.Logger == nil {
			cfg.Logger = n.cfg.Logger
		}
		m, err := portmap.New(cfg)
		if err != nil {
			return fmt.Errorf("node: port mapping %d: %w", port, err)
		}
		pm.m = m
		n.nat.mu.Lock()
		n.nat.mappers = append(n.nat.mappers, pm)
		n.nat.mu.Unlock()
		if err := m.Start(ctx); err != nil {
			return fmt.Errorf("node: port mapping %d: %w", port, err)
		}
	}
	if len(ports) == 0 {
		n.log.Warn("port mapping: no IPv4 TCP listener on an unspecified or private address to map")
	}
	return nil
}

// mappable returns the port of an IPv4 TCP listen address that a NAT gateway could
// forward: on the unspecified address or a private one (on a public IP there is no NAT
// to cross; loopback and link-local are not reached from outside at all).
func mappable(a ma.Multiaddr) (int, bool) {
	if len(a) < 2 || a[0].Protocol().Code != ma.P_IP4 || a[1].Protocol().Code != ma.P_TCP {
		return 0, false
	}
	ip, ok := netip.AddrFromSlice(a[0].RawValue())
	if !ok || !(ip.IsUnspecified() || ip.IsPrivate()) {
		return 0, false
	}
	port, err := strconv.Atoi(a[1].Value())
	if err != nil || port < 1 || port > 65535 {
		return 0, false
	}
	return port, true
}

// mappingCandidate is the address a mapping makes listen reachable at: the external
// address and port in place of listen's IP and port, the rest (/ws, ...) kept. nil for
// the zero Mapping.
func mappingCandidate(listen ma.Multiaddr, mp portmap.Mapping) ma.Multiaddr {
	if mp.IsZero() || len(listen) < 2 {
		return nil
	}
	ip, err := ma.NewComponent("ip4", mp.External.Addr().String())
	if err != nil {
		return nil
	}
	port, err := ma.NewComponent("tcp", strconv.Itoa(int(mp.External.Port())))
	if err != nil {
		return nil
	}
	return append(ma.Multiaddr{*ip, *port}, listen[2:]...)
}

// mappingChanged is a Mapper's OnChange: the mapping's address replaces the previous one
// among reach's candidates (AddCandidate voids what dial-backs said of that address
// before, so it is checked afresh). Calls are serialized per Mapper.
func (n *Node) mappingChanged(pm *portMapper, mp portmap.Mapping) {
	cand := mappingCandidate(pm.listen, mp)
	n.nat.mu.Lock()
	prev := pm.cur
	prevCand := pm.cand
	pm.cur, pm.cand = mp, cand
	n.nat.mu.Unlock()
	if mp.IsZero() {
		n.log.Info("port mapping gone", "was", prev.String())
	} else {
		n.log.Info("port mapped", "mapping", mp.String(), "candidate", cand)
	}
	r := n.nat.reach.Load()
	if r == nil {
		return
	}
	same := prevCand != nil && cand != nil && prevCand.Equal(cand)
	if prevCand != nil && !same {
		r.RemoveCandidate(prevCand)
	}
	if cand != nil && !same {
		if err := r.AddCandidate(cand); err != nil && !errors.Is(err, reach.ErrClosed) {
			n.log.Warn("port mapping: not a reach candidate", "addr", cand, "err", err)
		}
	}
}

// followReach reads reach's events until Close: it logs them and has identify read the
// confirmed addresses again, so that the record peers get lists an address once it is
// confirmed and no longer once it is not.
func (n *Node) followReach(r *reach.Reach) {
	defer n.nat.follow.Done()
	for ev := range r.Events() {
		if ev.Addr == nil {
			n.log.Info("reachability", "state", ev.State, "was", ev.Prev)
			continue
		}
		n.log.Debug("reachability of an address", "event", ev.String())
		if ev.State == reach.Public || ev.Prev == reach.Public {
			n.id.Update()
		}
	}
}

// advertised is identify's Config.Addrs: the addresses reach confirmed Public first
// (what a stranger can dial), then identify.DefaultAddrs (the listen addresses). identify
// keeps the first peerrecord.MaxAddrs and drops duplicates.
func (n *Node) advertised() []ma.Multiaddr {
	var out []ma.Multiaddr
	if r := n.nat.reach.Load(); r != nil {
		for _, st := range r.Status() {
			if st.State == reach.Public {
				out = append(out, st.Addr)
			}
		}
	}
	out = append(out, identify.DefaultAddrs(n.svc)...)
	return append(out, n.circuitAddrs()...)
}

// closeNAT removes the mappings from the gateway (all at once, each within its
// RequestTimeout), then stops reachability and waits for followReach.
func (n *Node) closeNAT() {
	n.nat.mu.Lock()
	mappers := slices.Clone(n.nat.mappers)
	n.nat.mu.Unlock()
	timeout := n.cfg.PortMapConfig.RequestTimeout
	if timeout <= 0 {
		timeout = portmap.DefaultRequestTimeout
	}
	var wg sync.WaitGroup
	for _, pm := range mappers {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			if err := pm.m.Close(ctx); err != nil {
				n.log.Warn("port mapping left on the gateway", "err", err)
			}
		})
	}
	wg.Wait()
	if r := n.nat.reach.Load(); r != nil {
		r.Close()
	}
	n.nat.follow.Wait()
}

// Reach returns the node's reachability checks, or nil if Config.DisableReach. The Node
// reads its Events (to re-sign its record when an address is confirmed or lost): use
// Reachability, or Reach().Status and Reach().Reachability, for the state.
func (n *Node) Reach() *reach.Reach { return n.nat.reach.Load() }

// Reachability is the node's reachability report: what dial-backs said of each candidate
// address, who observes the node there, and the port mappings held. String formats it.
type Reachability struct {
	// At is when the report was made.
	At time.Time
	// State is the node's reachability: Public if any address is, else Private if any is,
	// else Unknown (also when reachability is off: Config.DisableReach).
	State reach.State
	// Addrs are the candidate addresses, likeliest first (reach.Reach.Status).
	Addrs []AddrReachability
	// Mappings are the port mappers, one per mapped listen port (none without
	// Config.PortMap).
	Mappings []PortMapping
}

// AddrReachability is what is known of one candidate address.
type AddrReachability struct {
	// AddrState is reach's: the address, its state, where it came from (mapped, observed,
	// listen), how many groups confirmed or failed it, when it was last checked and last
	// reached by a dial-back, and how many groups observe this node at its IP.
	reach.AddrState
	// ObserverPeers and ObserverGroups count the connected peers that observe this node
	// at the address's IP (identify), and their address groups (Config.Reach.Group;
	// AddrState.Observers counts identify's groups, addrbook.GroupOf).
	ObserverPeers, ObserverGroups int
	// ObservedBy lists those peers, at most MaxObserversListed, by peer ID.
	ObservedBy []Observer
	// Mapping is the port mapping the address is the external end of (zero if none): its
	// method, gateway and lease (Expires).
	Mapping portmap.Mapping
}

// Observer is a connected peer that observes this node at an address.
type Observer struct {
	Peer secio.PeerID
	// Group is the peer's address group (Config.Reach.Group of its address): observers in
	// one group count once.
	Group addrbook.Group
	// Addr is where it sees this node: the IP, and the port the connection comes from.
	Addr ma.Multiaddr
}

// PortMapping is one listen port's mapper.
type PortMapping struct {
	// Port is the listen port mapped.
	Port int
	// Mapping is the mapping held (zero if none), with its lease (Expires).
	Mapping portmap.Mapping
	// Err is why the last attempt failed (portmap.Mapper.Err), nil if it succeeded.
	Err error
}

// Reachability returns the node's reachability report.
func (n *Node) Reachability() Reachability {
	rep := Reachability{At: time.Now()}
	n.nat.mu.Lock()
	mappers := slices.Clone(n.nat.mappers)
	held := make([]portmap.Mapping, len(mappers))
	cands := make([]ma.Multiaddr, len(mappers))
	for i, pm := range mappers {
		held[i], cands[i] = pm.cur, pm.cand
	}
	n.nat.mu.Unlock()
	mapped := make(map[string]portmap.Mapping)
	for i, pm := range mappers {
		// The Mapper's Current has the lease as last renewed (OnChange reports no
		// renewal); held is what the candidate was made of.
		mp := held[i]
		if cur := pm.m.Current(); cur.External == mp.External && cur.Method == mp.Method {
			mp = cur
		}
		port, _ := mappable(pm.listen)
		rep.Mappings = append(rep.Mappings, PortMapping{Port: port, Mapping: mp, Err: pm.m.Err()})
		if cands[i] != nil {
			mapped[string(cands[i].Bytes())] = mp
		}
	}
	r := n.nat.reach.Load()
	if r == nil {
		return rep
	}
	rep.State = r.Reachability()
	obs := n.observers()
	for _, st := range r.Status() {
		a := AddrReachability{AddrState: st, Mapping: mapped[string(st.Addr.Bytes())]}
		if ip, ok := ipOf(st.Addr); ok {
			groups := make(map[addrbook.Group]bool)
			for _, o := range obs {
				if oip, _ := ipOf(o.Addr); oip != ip {
					continue
				}
				a.ObserverPeers++
				groups[o.Group] = true
				if len(a.ObservedBy) < MaxObserversListed {
					a.ObservedBy = append(a.ObservedBy, o)
				}
			}
			a.ObserverGroups = len(groups)
		}
		rep.Addrs = append(rep.Addrs, a)
	}
	return rep
}

// observers returns what each connected peer last said it sees this node at, by peer ID.
func (n *Node) observers() []Observer {
	var out []Observer
	for _, s := range n.svc.Sessions() {
		info, ok := n.id.Info(s.Peer())
		if !ok || info.Observed == nil {
			continue
		}
		out = append(out, Observer{Peer: s.Peer(), Group: n.nat.group(s.RemoteAddr().Transport), Addr: info.Observed})
	}
	slices.SortFunc(out, func(a, b Observer) int { return strings.Compare(a.Peer.String(), b.Peer.String()) })
	return out
}

// ipOf returns the IP an /ip4 or /ip6 multiaddr starts with.
func ipOf(a ma.Multiaddr) (netip.Addr, bool) {
	if len(a) == 0 || (a[0].Protocol().Code != ma.P_IP4 && a[0].Protocol().Code != ma.P_IP6) {
		return netip.Addr{}, false
	}
	ip, ok := netip.AddrFromSlice(a[0].RawValue())
	return ip.Unmap(), ok
}

// String formats the report, one line for the node, then one per address, then one per
// port mapper:
//
//	reachability: public
//	  /ip4/100.128.1.1/tcp/4001: public (mapped+observed), 2 confirmed, 0 failed, checked 2.1s ago, reached 2.1s ago; observed by 2 peers in 2 groups: gVxMxtB7BRo5 (ip4:100.128.2.0/24) at /ip4/100.128.1.1/tcp/40312, ...; mapping upnp, lease 59m58s left
//	  port 4001: upnp tcp 4001 -> 100.128.1.1:4001 via 10.1.0.1, lease 59m58s left
//
// Peers are shown by the first 12 characters of their ID, times relative to At ("never"
// if zero); a mapper whose last attempt failed ends with "last error: ...".
func (r Reachability) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "reachability: %s", r.State)
	for _, a := range r.Addrs {
		fmt.Fprintf(&b, "\n  %s: %s (%s), %d confirmed, %d failed, checked %s, reached %s",
			a.Addr, a.State, a.Source, a.Confirmations, a.Failures, r.ago(a.LastChecked), r.ago(a.LastReached))
		if len(a.ObservedBy) > 0 {
			fmt.Fprintf(&b, "; observed by %d peers in %d groups:", a.ObserverPeers, a.ObserverGroups)
			for i, o := range a.ObservedBy {
				if i > 0 {
					b.WriteString(",")
				}
				fmt.Fprintf(&b, " %s (%s) at %s", shortID(o.Peer), o.Group, o.Addr)
			}
		}
		if !a.Mapping.IsZero() {
			fmt.Fprintf(&b, "; mapping %s, %s", a.Mapping.Method, r.lease(a.Mapping))
		}
	}
	for _, m := range r.Mappings {
		fmt.Fprintf(&b, "\n  port %d: %s", m.Port, m.Mapping)
		if !m.Mapping.IsZero() {
			fmt.Fprintf(&b, ", %s", r.lease(m.Mapping))
		}
		if m.Err != nil {
			fmt.Fprintf(&b, "; last error: %v", m.Err)
		}
	}
	return b.String()
}

func (r Reachability) ago(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return r.At.Sub(t).Round(100*time.Millisecond).String() + " ago"
}

func (r Reachability) lease(m portmap.Mapping) string {
	if m.Expires.IsZero() {
		return "permanent lease"
	}
	return "lease " + m.Expires.Sub(r.At).Round(time.Second).String() + " left"
}

// shortID is the first characters of a peer ID, enough to tell peers apart in a report.
func shortID(id secio.PeerID) string {
	s := id.String()
	return s[:min(len(s), 12)]
}
