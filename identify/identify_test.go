package identify

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"
	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/peerrecord"
	"github.com/tendril-p2p/tendril/transport/memory"
)

func hasProto(ps []ProtoVersions, name string, versions ...string) bool {
	return slices.ContainsFunc(ps, func(p ProtoVersions) bool {
		return p.Name == name && (versions == nil || slices.Equal(p.Versions, versions))
	})
}

// TestIdentifyBothWays: on a session, each side learns the other's verified record, the
// address the other sees it at (what the other's session reports as RemoteAddr), its
// protocols and its agent.
func TestIdentifyBothWays(t *testing.T) {
	network := memory.NewNetwork(memory.NetworkConfig{})
	a := newIdentified(t, network, Config{Agent: "a/1"}, chatProto())
	b := newIdentified(t, network, Config{Agent: "b/1"})
	dial(t, a.node, b.node)

	var ab, ba Info
	waitFor(t, 5*time.Second, "both sides identified", func() bool {
		var ok1, ok2 bool
		ab, ok1 = a.id.Info(b.svc.ID())
		ba, ok2 = b.id.Info(a.svc.ID())
		return ok1 && ok2
	})
	for _, c := range []struct {
		name     string
		got      Info
		of, from *identified
		agent    string
	}{{"a's view of b", ab, b, a, "b/1"}, {"b's view of a", ba, a, b, "a/1"}} {
		if c.got.Peer != c.of.svc.ID() || c.got.Record.Peer() != c.of.svc.ID() {
			t.Errorf("%s: peer %s, record of %s", c.name, c.got.Peer, c.got.Record.Peer())
		}
		if rec, err := peerrecord.Parse(c.got.Record.Bytes()); err != nil || rec.Peer() != c.of.svc.ID() {
			t.Errorf("%s: record does not verify: %v", c.name, err)
		}
		if addrs := c.got.Record.Addrs(); len(addrs) != 1 || !addrs[0].Equal(c.of.addr.Transport) {
			t.Errorf("%s: record addresses %v, want [%s]", c.name, addrs, c.of.addr.Transport)
		}
		// What the peer observes is what its own session says of us.
		seen := c.of.svc.Session(c.from.svc.ID()).RemoteAddr().Transport
		if !c.got.Observed.Equal(seen) {
			t.Errorf("%s: observed %s, the peer's session says %s", c.name, c.got.Observed, seen)
		}
		if c.got.Agent != c.agent {
			t.Errorf("%s: agent %q, want %q", c.name, c.got.Agent, c.agent)
		}
		if hasProto(c.got.Protocols, ProtocolName) {
			t.Errorf("%s: identify lists itself", c.name)
		}
	}
	if !hasProto(ba.Protocols, "/chat", "1.0", "1.1") || len(ab.Protocols) != 0 {
		t.Errorf("protocols: a's %v, b's %v", ba.Protocols, ab.Protocols)
	}
	obs := a.id.ObservedAddrs()
	if len(obs) != 1 || !obs[0].Addr.Equal(ab.Observed) || obs[0].Groups != 1 || obs[0].Peers != 1 {
		t.Errorf("a's observed addresses: %+v", obs)
	}
	if s := a.id.Stats(); s.Verified != 1 || s.Accepted != 1 || s.Sent != 1 {
		t.Errorf("a's stats: %+v", s)
	}
}

// TestPushOnChange: a protocol added and a listener started reach the connected peer
// within a second or two, and a burst of changes goes out as a few messages carrying the
// last state.
func TestPushOnChange(t *testing.T) {
	network := memory.NewNetwork(memory.NetworkConfig{})
	a := newIdentified(t, network, Config{})
	b := newIdentified(t, network, Config{})
	dial(t, a.node, b.node)
	waitFor(t, 5*time.Second, "a identified b", func() bool { _, ok := a.id.Info(b.svc.ID()); return ok })
	first, _ := a.id.Info(b.svc.ID())

	if err := b.svc.AddProtocol(tendril.Protocol{Name: "/new", Versions: []string{"3"}, Handler: tendril.HandlerFuncs{}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, "the new protocol pushed", func() bool {
		info, _ := a.id.Info(b.svc.ID())
		return hasProto(info.Protocols, "/new", "3")
	})
	if info, _ := a.id.Info(b.svc.ID()); info.Record != first.Record {
		t.Error("a protocol change re-signed the record")
	}

	added, err := b.svc.Listen(context.Background(), tendril.MustParseAddr("/memory/0"))
	if err != nil {
		t.Fatal(err)
	}
	var got Info
	waitFor(t, 2*time.Second, "the new address pushed", func() bool {
		got, _ = a.id.Info(b.svc.ID())
		return slices.ContainsFunc(got.Record.Addrs(), added.Transport.Equal)
	})
	if got.Record.Seq() <= first.Record.Seq() || len(got.Record.Addrs()) != 2 {
		t.Errorf("new record seq %d (was %d), addrs %v", got.Record.Seq(), first.Record.Seq(), got.Record.Addrs())
	}

	// A burst: 40 protocols added at once.
	sent := b.id.Stats().Sent
	for k := range 40 {
		if err := b.svc.AddProtocol(tendril.Protocol{Name: fmt.Sprintf("/burst/%d", k), Versions: []string{"1"}, Handler: tendril.HandlerFuncs{}}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 2*time.Second, "the burst's last state", func() bool {
		info, _ := a.id.Info(b.svc.ID())
		return hasProto(info.Protocols, "/burst/39")
	})
	if n := b.id.Stats().Sent - sent; n > 2 {
		t.Errorf("a burst of 40 changes sent %d messages", n)
	}
	if s := a.id.Stats(); s.Dropped != 0 || s.Rejected != 0 {
		t.Errorf("an honest peer's pushes were dropped or rejected: %+v", s)
	}
}

// TestForgetOnDisconnect: what a peer said is forgotten with its identify stream, whether
// the peer closes only the stream or the whole session.
func TestForgetOnDisconnect(t *testing.T) {
	network := memory.NewNetwork(memory.NetworkConfig{})
	a := newIdentified(t, network, Config{})
	b := newIdentified(t, network, Config{})
	c := newIdentified(t, network, Config{})
	dial(t, a.node, b.node)
	sess := dial(t, a.node, c.node)
	waitFor(t, 5*time.Second, "a identified b and c", func() bool {
		_, ok1 := a.id.Info(b.svc.ID())
		_, ok2 := a.id.Info(c.svc.ID())
		return ok1 && ok2
	})
	forgot := func(n int) func() bool {
		return func() bool {
			a.id.mu.Lock()
			defer a.id.mu.Unlock()
			return len(a.id.peers) == n
		}
	}
	b.id.Close() // b's identify stream closes; its session stays
	waitFor(t, 5*time.Second, "a forgot b", forgot(1))
	if a.svc.Session(b.svc.ID()) == nil {
		t.Fatal("b's session closed with its identify stream")
	}
	sess.Close()
	waitFor(t, 5*time.Second, "a forgot c", forgot(0))
	for _, n := range []*identified{b, c} {
		if _, ok := a.id.Info(n.svc.ID()); ok {
			t.Error("Info of a peer whose identify stream ended")
		}
	}
	if obs := a.id.ObservedAddrs(); len(obs) != 0 {
		t.Errorf("observed addresses of peers gone: %v", obs)
	}
}

// TestPushPaced: a node whose addresses change every 50 ms pushes no faster than its push
// bucket, so that the peer (same settings) drops none of its updates, and the last state
// arrives.
func TestPushPaced(t *testing.T) {
	network := memory.NewNetwork(memory.NetworkConfig{})
	cfg := Config{UpdateInterval: 400 * time.Millisecond} // pushes: 4 at once, then one per 500 ms
	a := newIdentified(t, network, cfg)
	var port atomic.Int32
	port.Store(1000)
	cfg.Addrs = func() []ma.Multiaddr {
		return []ma.Multiaddr{ma.StringCast(fmt.Sprintf("/ip4/198.51.100.1/tcp/%d", port.Load()))}
	}
	b := newIdentified(t, network, cfg)
	dial(t, a.node, b.node)
	waitFor(t, 5*time.Second, "a identified b", func() bool { _, ok := a.id.Info(b.svc.ID()); return ok })
	start := time.Now()
	for range 40 {
		port.Add(1)
		b.id.Update()
		time.Sleep(50 * time.Millisecond)
	}
	last := fmt.Sprintf("/ip4/198.51.100.1/tcp/%d", port.Load())
	waitFor(t, 3*time.Second, "the last address", func() bool {
		info, _ := a.id.Info(b.svc.ID())
		return info.Record.Addrs()[0].String() == last
	})
	elapsed := time.Since(start)
	r := b.id.pushRate
	if max := uint64(r.Burst) + uint64(elapsed/r.Interval) + 1; b.id.Stats().Sent > max {
		t.Errorf("%d messages sent in %v, pace allows %d", b.id.Stats().Sent, elapsed, max)
	}
	if s := a.id.Stats(); s.Dropped != 0 {
		t.Errorf("the peer dropped %d updates", s.Dropped)
	}
}

// TestCloseUnregisters: Close removes the protocol and ends identify's goroutine (goleak
// checks the latter); a second Identify on the same Service is refused while the first runs.
func TestCloseUnregisters(t *testing.T) {
	network := memory.NewNetwork(memory.NetworkConfig{})
	a := newIdentified(t, network, Config{})
	if _, err := New(a.svc, Config{PrivateKey: a.key}); !errors.Is(err, tendril.ErrInvalidProtocol) {
		t.Fatalf("second New: %v", err)
	}
	a.id.Close()
	for _, p := range a.svc.Protocols() {
		if p.Name == ProtocolName {
			t.Fatal("identify still registered after Close")
		}
	}
	other := newNode(t, network)
	if _, err := New(a.svc, Config{PrivateKey: other.key}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New with another key: %v", err)
	}
	if _, err := New(a.svc, Config{}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New without a key: %v", err)
	}
}

// TestSignedAddrsFromConfig: Config.Addrs decides what the record says, and Update
// re-reads it.
func TestSignedAddrsFromConfig(t *testing.T) {
	network := memory.NewNetwork(memory.NetworkConfig{})
	public := ma.StringCast("/ip4/198.51.100.1/tcp/4001")
	var adv = []ma.Multiaddr{public}
	var advMu = make(chan struct{}, 1)
	advMu <- struct{}{}
	get := func() []ma.Multiaddr {
		<-advMu
		defer func() { advMu <- struct{}{} }()
		return slices.Clone(adv)
	}
	a := newIdentified(t, network, Config{})
	b := newIdentified(t, network, Config{Addrs: get})
	dial(t, a.node, b.node)
	waitFor(t, 5*time.Second, "a identified b", func() bool {
		info, ok := a.id.Info(b.svc.ID())
		return ok && len(info.Record.Addrs()) == 1 && info.Record.Addrs()[0].Equal(public)
	})
	<-advMu
	adv = append(adv, ma.StringCast("/ip4/198.51.100.2/tcp/4001"))
	advMu <- struct{}{}
	b.id.Update()
	if n := len(b.id.Record().Addrs()); n != 2 {
		t.Fatalf("Record after Update lists %d addresses, want 2 at once", n)
	}
	waitFor(t, 2*time.Second, "the update pushed", func() bool {
		info, _ := a.id.Info(b.svc.ID())
		return len(info.Record.Addrs()) == 2
	})
}

// TestPushCoalesced: changes within PushDelay of the first go out as one message with the
// last state.
func TestPushCoalesced(t *testing.T) {
	network := memory.NewNetwork(memory.NetworkConfig{})
	a := newIdentified(t, network, Config{})
	var port atomic.Int32
	port.Store(1000)
	b := newIdentified(t, network, Config{PushDelay: 500 * time.Millisecond, Addrs: func() []ma.Multiaddr {
		return []ma.Multiaddr{ma.StringCast(fmt.Sprintf("/ip4/198.51.100.1/tcp/%d", port.Load()))}
	}})
	dial(t, a.node, b.node)
	waitFor(t, 5*time.Second, "a identified b", func() bool { _, ok := a.id.Info(b.svc.ID()); return ok })
	sent := b.id.Stats().Sent
	for range 10 {
		port.Add(1)
		b.id.Update()
		time.Sleep(20 * time.Millisecond)
	}
	waitFor(t, 2*time.Second, "the last address", func() bool {
		info, _ := a.id.Info(b.svc.ID())
		return info.Record.Addrs()[0].String() == "/ip4/198.51.100.1/tcp/1010"
	})
	time.Sleep(100 * time.Millisecond)
	if n := b.id.Stats().Sent - sent; n != 1 {
		t.Errorf("10 changes in 200 ms sent %d messages, want 1", n)
	}
}

// TestPublicPeersGetPublicRecord: a peer seen at a public address is sent the record of
// this node's public addresses only, signed one sequence number below the full record;
// a peer on the LAN (here: the in-memory transport, not public) gets every address.
func TestPublicPeersGetPublicRecord(t *testing.T) {
	network := memory.NewNetwork(memory.NetworkConfig{})
	addrs := []ma.Multiaddr{ma.StringCast("/ip4/11.1.1.1/tcp/4001"), ma.StringCast("/ip4/10.0.0.1/tcp/4001")}
	for _, tc := range []struct {
		name        string
		memoryIsPub bool
		want        []string
	}{
		{"lan peer", false, []string{"/ip4/10.0.0.1/tcp/4001", "/ip4/11.1.1.1/tcp/4001"}},
		{"public peer", true, []string{"/ip4/11.1.1.1/tcp/4001"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newIdentified(t, network, Config{})
			b := newIdentified(t, network, Config{
				Addrs: func() []ma.Multiaddr { return addrs },
				Public: func(m ma.Multiaddr) bool {
					_, err := m.ValueForProtocol(ma.P_MEMORY)
					return (err == nil && tc.memoryIsPub) || addrbook.IsPublic(m)
				},
			})
			dial(t, a.node, b.node)
			var info Info
			waitFor(t, 5*time.Second, "a identified b", func() bool { var ok bool; info, ok = a.id.Info(b.svc.ID()); return ok })
			var got []string
			for _, m := range info.Record.Addrs() {
				got = append(got, m.String())
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("record sent: %v, want %v", got, tc.want)
			}
			if full := b.id.Record(); tc.memoryIsPub && !full.Supersedes(info.Record) {
				t.Fatalf("the full record (seq %d) does not supersede the public one (seq %d)", full.Seq(), info.Record.Seq())
			}
		})
	}
}
