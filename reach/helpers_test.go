package reach

import (
	"context"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"
	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/identify"
	"github.com/tendril-p2p/tendril/secio"
	"github.com/tendril-p2p/tendril/transport"
	"github.com/tendril-p2p/tendril/transport/tcp"
	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testGroup groups loopback addresses by /16, so that nodes on 127.1.0.1 and 127.2.0.1
// count as two operators (addrbook puts every loopback address in one group).
func testGroup(m ma.Multiaddr) addrbook.Group {
	ip, ok := ipOf(m)
	if !ok {
		return addrbook.GroupOf(m)
	}
	p, _ := ip.Prefix(16)
	return addrbook.Group("test:" + p.String())
}

// countingTransport counts the dials of the TCP transport under it, and how many run at
// once; hold, if set, is waited on by every dial.
type countingTransport struct {
	transport.Transport
	dials, running, maxRunning atomic.Int64
	hold                       chan struct{}
}

func (c *countingTransport) Dial(ctx context.Context, addr ma.Multiaddr) (net.Conn, error) {
	c.dials.Add(1)
	n := c.running.Add(1)
	defer c.running.Add(-1)
	for {
		m := c.maxRunning.Load()
		if n <= m || c.maxRunning.CompareAndSwap(m, n) {
			break
		}
	}
	if c.hold != nil {
		select {
		case <-c.hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return c.Transport.Dial(ctx, addr)
}

// node is a Service on TCP loopback with identify and reach.
type node struct {
	svc   *tendril.Service
	id    *identify.Identify
	r     *Reach
	addr  tendril.Addr
	trans *countingTransport
}

type nodeOpts struct {
	ip       string // listen IP; "" listens nowhere
	cfg      Config
	gate     tendril.Gater
	noReach  bool
	protocol []tendril.Protocol
}

func newNode(t testing.TB, o nodeOpts) *node {
	t.Helper()
	key, err := secio.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	n := &node{trans: &countingTransport{Transport: tcp.New(nil)}}
	n.svc, err = tendril.New(tendril.Config{
		PrivateKey: key,
		Protocols:  o.protocol,
		Transports: []transport.Transport{n.trans},
		Admission:  tendril.Admission{Gater: o.gate},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.svc.Close() })
	if o.ip != "" {
		n.addr, err = n.svc.Listen(context.Background(), tendril.MustParseAddr("/ip4/"+o.ip+"/tcp/0"))
		if err != nil {
			t.Fatal(err)
		}
	}
	n.id, err = identify.New(n.svc, identify.Config{PrivateKey: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.id.Close() })
	if !o.noReach {
		if o.cfg.Group == nil {
			o.cfg.Group = testGroup
		}
		n.r, err = New(n.svc, n.id, o.cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.r.Close() })
	}
	return n
}

func (n *node) dial(t testing.TB, to *node) *tendril.Session {
	t.Helper()
	s, err := n.svc.Dial(context.Background(), to.addr)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// waitState waits for r's reachability to become want, and returns how long it took.
func waitState(t testing.TB, r *Reach, want State, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for r.Reachability() != want {
		if time.Since(start) > limit {
			t.Fatalf("reachability %s after %v, want %s; status %+v; stats %+v", r.Reachability(), limit, want, r.Status(), r.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// refuseInbound is a Gater that drops every inbound connection, as a NAT drops what
// nobody inside asked for.
type refuseInbound struct{}

func (refuseInbound) GateAddr(dir tendril.Direction, _ netip.AddrPort) error {
	if dir == tendril.Inbound {
		return errNAT
	}
	return nil
}
func (refuseInbound) GatePeer(tendril.Direction, secio.PeerID, netip.AddrPort) error { return nil }

var errNAT = &natError{}

type natError struct{}

func (*natError) Error() string { return "behind a NAT" }
