package holepunch

import (
	"context"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/identify"
	"github.com/tendril-p2p/tendril/relay"
	"github.com/tendril-p2p/tendril/secio"
)

// loopbackOK lets the tests punch on loopback, which Allow refuses by default.
func loopbackOK(ma.Multiaddr) bool { return true }

// node is a Service listening on loopback TCP, with identify.
type node struct {
	svc  *tendril.Service
	id   *identify.Identify
	addr tendril.Addr
}

func newNode(t testing.TB) *node {
	t.Helper()
	key, err := secio.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	svc, err := tendril.New(tendril.Config{PrivateKey: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	id, err := identify.New(svc, identify.Config{PrivateKey: key, Public: loopbackOK})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { id.Close() })
	a, err := svc.Listen(context.Background(), tendril.MustParseAddr("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	a.Peer = svc.ID()
	return &node{svc: svc, id: id, addr: a}
}

func newPuncher(t testing.TB, n *node, cfg Config) *Puncher {
	t.Helper()
	if cfg.Allow == nil {
		cfg.Allow = loopbackOK
	}
	p, err := New(n.svc, n.id, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// trio is a relay A, a node B with a reservation on it, and a node C.
type trio struct {
	a, b, c *node
	res     *relay.Reservation
}

func newTrio(t testing.TB) *trio {
	t.Helper()
	tr := &trio{a: newNode(t), b: newNode(t), c: newNode(t)}
	r, err := relay.NewRelay(tr.a.svc, relay.RelayConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	cl, err := relay.NewClient(tr.b.svc, relay.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	if tr.res, err = cl.Reserve(ctxT(t, 10*time.Second), tr.a.addr); err != nil {
		t.Fatal(err)
	}
	// C learns how it is seen (identify) from a direct session with A.
	if _, err := tr.c.svc.Dial(ctxT(t, 10*time.Second), tr.a.addr); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*node{tr.b, tr.c} {
		waitFor(t, "identify's observed address", 10*time.Second, func() bool { return len(n.id.ObservedAddrs()) > 0 })
	}
	return tr
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func waitFor(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %s", what, d)
		}
	}
}

func direct(n *node, peer secio.PeerID) bool {
	s := n.svc.Session(peer)
	return s != nil && !s.Relayed()
}
