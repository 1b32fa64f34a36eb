package node

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/identify"
	"github.com/tendril-p2p/tendril/portmap"
	"github.com/tendril-p2p/tendril/reach"
	"github.com/tendril-p2p/tendril/secio"
)

// fakePMP is a NAT-PMP gateway on a loopback port: external address ext, every mapping
// granted as asked for lease seconds; it records the mapping requests.
type fakePMP struct {
	c   *net.UDPConn
	ext [4]byte

	mu       sync.Mutex
	requests []pmpRequest
	done     chan struct{}
}

type pmpRequest struct {
	internal, external uint16
	lifetime           uint32 // 0: delete
}

func newFakePMP(t *testing.T, ext netip.Addr) *fakePMP {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	g := &fakePMP{c: c, ext: ext.As4(), done: make(chan struct{})}
	go g.serve()
	t.Cleanup(func() { c.Close(); <-g.done })
	return g
}

func (g *fakePMP) port() int { return g.c.LocalAddr().(*net.UDPAddr).Port }

func (g *fakePMP) serve() {
	defer close(g.done)
	buf := make([]byte, 64)
	for {
		n, from, err := g.c.ReadFromUDP(buf)
		if err != nil {
			return
		}
		switch {
		case n == 2 && buf[1] == 0:
			out := []byte{0, 128, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}
			copy(out[8:], g.ext[:])
			g.c.WriteToUDP(out, from)
		case n == 12 && buf[1] == 2:
			r := pmpRequest{binary.BigEndian.Uint16(buf[4:]), binary.BigEndian.Uint16(buf[6:]), binary.BigEndian.Uint32(buf[8:])}
			g.mu.Lock()
			g.requests = append(g.requests, r)
			g.mu.Unlock()
			out := make([]byte, 16)
			out[1] = 130
			binary.BigEndian.PutUint32(out[4:], 1)
			binary.BigEndian.PutUint16(out[8:], r.internal)
			ext := r.external
			if ext == 0 {
				ext = r.internal
			}
			if r.lifetime == 0 {
				ext = 0
			}
			binary.BigEndian.PutUint16(out[10:], ext)
			binary.BigEndian.PutUint32(out[12:], r.lifetime)
			g.c.WriteToUDP(out, from)
		}
	}
}

func (g *fakePMP) log() []pmpRequest {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]pmpRequest(nil), g.requests...)
}

// listenPort returns the TCP port of the node's first listener.
func listenPort(t *testing.T, n *Node) int {
	t.Helper()
	port, ok := mappable(n.Service().Addrs()[0].Transport)
	if !ok {
		t.Fatalf("listen address %s is not mappable", n.Service().Addrs()[0])
	}
	return port
}

func waitUntil(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: not %s", limit, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// With PortMap, the listen port is mapped on the gateway, the mapping becomes a reach
// candidate and is in the report with its lease; Close deletes it from the gateway and
// the candidate goes.
func TestPortMapCandidate(t *testing.T) {
	gw := newFakePMP(t, netip.MustParseAddr("203.0.113.7"))
	n, err := New(Config{
		// Unspecified, as a node behind a NAT listens: a loopback listener is not mapped.
		Listen:  []tendril.Addr{tendril.MustParseAddr("/ip4/0.0.0.0/tcp/0")},
		PortMap: true,
		PortMapConfig: portmap.Config{
			Gateway: netip.MustParseAddr("127.0.0.1"), NATPMPPort: gw.port(),
			Methods: []portmap.Method{portmap.NATPMP}, Lease: time.Hour,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		n.Close()
		t.Fatal(err)
	}
	port := listenPort(t, n)
	want := ma.StringCast("/ip4/203.0.113.7/tcp/" + strconv.Itoa(port))
	waitUntil(t, "mapped", 5*time.Second, func() bool {
		for _, st := range n.Reach().Status() {
			if st.Addr.Equal(want) && st.Source&reach.SourceMapped != 0 {
				return true
			}
		}
		return false
	})
	rep := n.Reachability()
	if len(rep.Mappings) != 1 || rep.Mappings[0].Port != port || rep.Mappings[0].Mapping.External != netip.AddrPortFrom(netip.MustParseAddr("203.0.113.7"), uint16(port)) {
		t.Fatalf("report's mappings %+v", rep.Mappings)
	}
	if left := time.Until(rep.Mappings[0].Mapping.Expires); left < 59*time.Minute || left > time.Hour {
		t.Errorf("lease %v left, want about an hour", left)
	}
	var addr *AddrReachability
	for i := range rep.Addrs {
		if rep.Addrs[i].Addr.Equal(want) {
			addr = &rep.Addrs[i]
		}
	}
	if addr == nil || addr.Mapping.IsZero() || addr.Mapping.Method != portmap.NATPMP {
		t.Fatalf("report %+v: want %s with its mapping", rep.Addrs, want)
	}
	s := rep.String()
	for _, part := range []string{want.String() + ": unknown (mapped)", "mapping nat-pmp, lease 1h0m0s left", "port " + strconv.Itoa(port) + ": nat-pmp tcp"} {
		if !strings.Contains(s, part) {
			t.Errorf("report lacks %q:\n%s", part, s)
		}
	}
	t.Logf("report:\n%s", s)

	n.Close()
	reqs := gw.log()
	if len(reqs) < 2 || reqs[len(reqs)-1].lifetime != 0 || reqs[len(reqs)-1].internal != uint16(port) {
		t.Fatalf("gateway saw %+v, want the mapping then its deletion", reqs)
	}
	if rep := n.Reachability(); len(rep.Mappings) != 1 || !rep.Mappings[0].Mapping.IsZero() {
		t.Errorf("after Close the report's mappings are %+v", rep.Mappings)
	}
}

// A mapping that changes its external address or port replaces its candidate; a lost
// one removes it.
func TestMappingChanged(t *testing.T) {
	n, err := New(Config{Listen: []tendril.Addr{tendril.MustParseAddr("/ip4/0.0.0.0/tcp/0/ws")}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	pm := &portMapper{listen: n.Service().Addrs()[0].Transport}
	mapped := func() []string {
		var out []string
		for _, st := range n.Reach().Status() {
			if st.Source&reach.SourceMapped != 0 {
				out = append(out, st.Addr.String())
			}
		}
		return out
	}
	expect := func(want ...string) {
		t.Helper()
		waitUntil(t, "candidates "+strings.Join(want, " "), 5*time.Second, func() bool {
			return strings.Join(mapped(), " ") == strings.Join(want, " ")
		})
	}
	mp := portmap.Mapping{Method: portmap.UPnP, Protocol: "tcp", InternalPort: 4001,
		External: netip.MustParseAddrPort("203.0.113.7:4001"), Gateway: netip.MustParseAddr("192.168.1.1")}
	n.mappingChanged(pm, mp)
	expect("/ip4/203.0.113.7/tcp/4001/ws")
	mp.Expires = time.Now().Add(time.Hour) // a renewal is no change
	n.mappingChanged(pm, mp)
	expect("/ip4/203.0.113.7/tcp/4001/ws")
	mp.External = netip.MustParseAddrPort("203.0.113.8:4002")
	n.mappingChanged(pm, mp)
	expect("/ip4/203.0.113.8/tcp/4002/ws")
	n.mappingChanged(pm, portmap.Mapping{})
	expect()
}

// testGroup groups loopback addresses by /16, so that servers on 127.1.0.1 and 127.2.0.1
// count as two operators (addrbook puts every loopback address in one group).
func testGroup(m ma.Multiaddr) addrbook.Group {
	ip, ok := ipOf(m)
	if !ok {
		return addrbook.GroupOf(m)
	}
	p, _ := ip.Prefix(16)
	return addrbook.Group("test:" + p.String())
}

// An address reach confirms (here the loopback address peers see the node at, while it
// listens on the unspecified address) is advertised in the node's record and pushed to
// its peers, and the report tells who observed it and when it was last reached.
func TestAdvertisesConfirmed(t *testing.T) {
	var servers []*identify.Identify
	for _, ip := range []string{"127.1.0.1", "127.2.0.1"} {
		key, _ := secio.GenerateKey()
		svc, err := tendril.New(tendril.Config{PrivateKey: key})
		if err != nil {
			t.Fatal(err)
		}
		defer svc.Close()
		if _, err := svc.Listen(context.Background(), tendril.MustParseAddr("/ip4/"+ip+"/tcp/0")); err != nil {
			t.Fatal(err)
		}
		id, err := identify.New(svc, identify.Config{PrivateKey: key})
		if err != nil {
			t.Fatal(err)
		}
		defer id.Close()
		r, err := reach.New(svc, id, reach.Config{Group: testGroup})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		servers = append(servers, id)
	}
	n, err := New(Config{
		Listen: []tendril.Addr{tendril.MustParseAddr("/ip4/0.0.0.0/tcp/0")},
		Reach:  reach.Config{Group: testGroup},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		var addr tendril.Addr
		for _, a := range s.Record().Addrs() {
			addr = tendril.Addr{Transport: a}
		}
		if _, err := n.Service().Dial(context.Background(), addr); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "public", 5*time.Second, func() bool { return n.Reach().Reachability() == reach.Public })
	var confirmed ma.Multiaddr
	for _, st := range n.Reach().Status() {
		if st.State == reach.Public {
			confirmed = st.Addr
		}
	}
	if containsAddr(identify.DefaultAddrs(n.Service()), confirmed) {
		t.Skipf("%s is among this machine's interface addresses: nothing to tell apart", confirmed)
	}
	waitUntil(t, "the confirmed address in the record", 5*time.Second, func() bool {
		return containsAddr(n.Identify().Record().Addrs(), confirmed)
	})
	waitUntil(t, "the record pushed to the servers", 5*time.Second, func() bool {
		for _, s := range servers {
			info, ok := s.Info(n.ID())
			if !ok || !containsAddr(info.Record.Addrs(), confirmed) {
				return false
			}
		}
		return true
	})
	rep := n.Reachability()
	if rep.State != reach.Public || len(rep.Addrs) == 0 {
		t.Fatalf("report %v", rep)
	}
	a := rep.Addrs[0]
	if !a.Addr.Equal(confirmed) || len(a.ObservedBy) != 2 || a.ObserverGroups != 2 || a.LastReached.IsZero() || a.Confirmations != 2 {
		t.Fatalf("report's address %+v: want %s observed by both servers and reached", a, confirmed)
	}
	t.Logf("report:\n%s", rep)
}

// The report's format, on fixed values.
func TestReachabilityString(t *testing.T) {
	at := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	key, _ := secio.GenerateKey()
	peer := key.PeerID()
	mp := portmap.Mapping{Method: portmap.UPnP, Protocol: "tcp", InternalPort: 4001,
		External: netip.MustParseAddrPort("100.128.1.1:4001"), Gateway: netip.MustParseAddr("10.1.0.1"),
		Expires: at.Add(time.Hour)}
	r := Reachability{
		At:    at,
		State: reach.Public,
		Addrs: []AddrReachability{{
			AddrState: reach.AddrState{Addr: ma.StringCast("/ip4/100.128.1.1/tcp/4001"), State: reach.Public,
				Source: reach.SourceMapped | reach.SourceObserved, Confirmations: 2, LastChecked: at.Add(-2 * time.Second),
				LastReached: at.Add(-2 * time.Second), Observers: 1},
			ObserverPeers: 1, ObserverGroups: 1,
			ObservedBy: []Observer{{Peer: peer, Group: "ip4:100.128.2.0/24", Addr: ma.StringCast("/ip4/100.128.1.1/tcp/40312")}},
			Mapping:    mp,
		}, {
			AddrState: reach.AddrState{Addr: ma.StringCast("/ip4/100.128.1.1/tcp/4002"), Source: reach.SourceObserved},
		}},
		Mappings: []PortMapping{{Port: 4001, Mapping: mp}, {Port: 4002, Err: errors.New("portmap: no gateway")}},
	}
	want := "reachability: public\n" +
		"  /ip4/100.128.1.1/tcp/4001: public (mapped+observed), 2 confirmed, 0 failed, checked 2s ago, reached 2s ago; observed by 1 peers in 1 groups: " +
		shortID(peer) + " (ip4:100.128.2.0/24) at /ip4/100.128.1.1/tcp/40312; mapping upnp, lease 1h0m0s left\n" +
		"  /ip4/100.128.1.1/tcp/4002: unknown (observed), 0 confirmed, 0 failed, checked never, reached never\n" +
		"  port 4001: upnp tcp 4001 -> 100.128.1.1:4001 via 10.1.0.1, lease 1h0m0s left\n" +
		"  port 4002: no mapping; last error: portmap: no gateway"
	if got := r.String(); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
}

// DisableReach: no reach, an Unknown report, PortMap validated at New.
func TestNATConfig(t *testing.T) {
	n, err := New(Config{DisableReach: true})
	if err != nil {
		t.Fatal(err)
	}
	if n.Reach() != nil || n.Reachability().State != reach.Unknown {
		t.Errorf("DisableReach: reach %v, report %v", n.Reach(), n.Reachability())
	}
	n.Close()
	_, err = New(Config{PortMap: true, PortMapConfig: portmap.Config{Lease: time.Millisecond}})
	if !errors.Is(err, ErrInvalidConfig) || !errors.Is(err, portmap.ErrInvalidConfig) {
		t.Fatalf("a bad PortMapConfig: %v", err)
	}
	_, err = New(Config{Reach: reach.Config{Confirmations: -1}})
	if !errors.Is(err, reach.ErrInvalidConfig) {
		t.Fatalf("a bad Reach config: %v", err)
	}
	for _, c := range []struct {
		addr string
		ok   bool
	}{
		{"/ip4/0.0.0.0/tcp/4001", true}, {"/ip4/192.168.1.5/tcp/4001/ws", true}, {"/ip4/127.0.0.1/tcp/4001", false},
		{"/ip4/198.51.100.1/tcp/4001", false}, {"/ip6/::/tcp/4001", false}, {"/memory/1", false},
	} {
		if _, ok := mappable(ma.StringCast(c.addr)); ok != c.ok {
			t.Errorf("mappable(%s) = %v", c.addr, ok)
		}
	}
}
