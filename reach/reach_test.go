package reach

import (
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/secio"
	"github.com/tendril-p2p/tendril/transport"
)

// A public node and a node behind a NAT, each connected to two servers in different
// groups: the first learns it is public, the second private, both within seconds.
func TestTwoPeersConverge(t *testing.T) {
	s1 := newNode(t, nodeOpts{ip: "127.1.0.1"})
	s2 := newNode(t, nodeOpts{ip: "127.2.0.1"})
	a := newNode(t, nodeOpts{ip: "127.0.0.1"})
	b := newNode(t, nodeOpts{ip: "127.0.0.1", gate: refuseInbound{}})

	start := time.Now()
	a.dial(t, s1)
	a.dial(t, s2)
	b.dial(t, s1)
	b.dial(t, s2)
	ta := waitState(t, a.r, Public, 5*time.Second)
	tb := waitState(t, b.r, Private, 5*time.Second)
	t.Logf("public after %v, private after %v (from the first dial: %v)", ta, tb, time.Since(start))

	st := a.r.Status()
	if len(st) == 0 || st[0].State != Public || st[0].Confirmations < 2 || !st[0].Addr.Equal(a.addr.Transport) {
		t.Fatalf("a's status %+v, want its listen address public from 2 groups", st)
	}
	st = b.r.Status()
	if len(st) == 0 || st[0].State != Private || st[0].Failures < 2 {
		t.Fatalf("b's status %+v, want its address private from 2 groups", st)
	}
	var sawPublic bool
	for ev := range drain(a.r) {
		if ev.Addr == nil && ev.State == Public {
			sawPublic = true
		}
	}
	if !sawPublic {
		t.Fatal("no event for a's reachability")
	}
}

// One server decides nothing: with a single group, every address stays Unknown.
func TestOneGroupDecidesNothing(t *testing.T) {
	s1 := newNode(t, nodeOpts{ip: "127.1.0.1"})
	s2 := newNode(t, nodeOpts{ip: "127.1.0.2"}) // the same /16: one group
	a := newNode(t, nodeOpts{ip: "127.0.0.1"})
	a.dial(t, s1)
	a.dial(t, s2)
	waitFor(t, "both servers' answers", func() bool { return a.r.Stats().Answered >= 1 })
	time.Sleep(300 * time.Millisecond)
	if got := a.r.Reachability(); got != Unknown {
		t.Fatalf("reachability %s from one group, want unknown; status %+v", got, a.r.Status())
	}
}

// drain returns the events already queued.
func drain(r *Reach) chan Event {
	out := make(chan Event, cap(r.events))
	for {
		select {
		case ev := <-r.events:
			out <- ev
		default:
			close(out)
			return out
		}
	}
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A NAT that drops unsolicited connections: the candidate's port at the observed IP
// accepts and never answers (a blackhole), so every dial-back runs to DialBackTimeout.
// The node learns it is private one DialBackTimeout after its servers identified it.
func TestPrivateBehindBlackhole(t *testing.T) {
	s1 := newNode(t, nodeOpts{ip: "127.1.0.1"})
	s2 := newNode(t, nodeOpts{ip: "127.2.0.1"})
	b := newNode(t, nodeOpts{ip: "127.3.0.1"})
	_, hostport, _, _ := transport.HostPort(b.addr.Transport)
	_, port, _ := net.SplitHostPort(hostport)
	hole, err := net.Listen("tcp", "127.0.0.1:"+port) // where the servers see b, at b's port
	if err != nil {
		t.Skipf("the blackhole's port is taken: %v", err)
	}
	var held []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := hole.Accept()
			if err != nil {
				return
			}
			held = append(held, c) // accepted, never answered
		}
	}()
	t.Cleanup(func() {
		hole.Close()
		<-done
		for _, c := range held {
			c.Close()
		}
	})
	start := time.Now()
	b.dial(t, s1)
	b.dial(t, s2)
	took := waitState(t, b.r, Private, 2*DefaultDialBackTimeout)
	t.Logf("private after %v (DialBackTimeout %v)", time.Since(start), DefaultDialBackTimeout)
	if took < DefaultDialBackTimeout-time.Second/2 {
		t.Fatalf("private after %v: before any dial-back could time out", took)
	}
}

// switchInbound refuses inbound connections until opened, as a NAT does before a port
// mapping forwards the listen port.
type switchInbound struct{ open atomic.Bool }

func (g *switchInbound) GateAddr(dir tendril.Direction, _ netip.AddrPort) error {
	if dir == tendril.Inbound && !g.open.Load() {
		return errNAT
	}
	return nil
}
func (*switchInbound) GatePeer(tendril.Direction, secio.PeerID, netip.AddrPort) error { return nil }

// A node found private at its observed address gets a port mapping there (the NAT opens,
// AddCandidate names the address): the old failures are voided and it is public at once,
// not after RecheckInterval; when the mapping is removed again (RemoveCandidate) the
// successes are voided in turn and it is private again. LastReached tells the last
// dial-back that got through.
func TestMappingVoidsAnswers(t *testing.T) {
	s1 := newNode(t, nodeOpts{ip: "127.1.0.1"})
	s2 := newNode(t, nodeOpts{ip: "127.2.0.1"})
	nat := &switchInbound{}
	b := newNode(t, nodeOpts{ip: "127.0.0.1", gate: nat})
	b.dial(t, s1)
	b.dial(t, s2)
	waitState(t, b.r, Private, 5*time.Second)

	nat.open.Store(true)
	if err := b.r.AddCandidate(b.addr.Transport); err != nil {
		t.Fatal(err)
	}
	took := waitState(t, b.r, Public, 5*time.Second)
	t.Logf("public %v after the mapping", took)
	st := b.r.Status()
	if len(st) != 1 || st[0].Source != SourceMapped|SourceObserved || st[0].Failures != 0 || st[0].LastReached.IsZero() {
		t.Fatalf("status %+v, want the mapped address reached, its failures voided", st)
	}

	nat.open.Store(false)
	b.r.RemoveCandidate(b.addr.Transport)
	if got := b.r.Reachability(); got != Unknown {
		t.Fatalf("reachability %s right after the mapping was removed, want unknown", got)
	}
	waitState(t, b.r, Private, 10*time.Second)
	if st := b.r.Status(); len(st) != 1 || st[0].Source != SourceObserved || st[0].Confirmations != 0 || st[0].LastReached.IsZero() {
		t.Fatalf("status %+v, want the observed address private, its successes voided, LastReached kept", st)
	}
}
