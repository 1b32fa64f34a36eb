package autorelay

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/identify"
	"github.com/tendril-p2p/tendril/relay"
	"github.com/tendril-p2p/tendril/secio"
	"github.com/tendril-p2p/tendril/transport"
	"github.com/tendril-p2p/tendril/transport/memory"
)

type node struct {
	svc  *tendril.Service
	id   *identify.Identify
	addr tendril.Addr
}

func newNode(t *testing.T, network *memory.Network) *node {
	t.Helper()
	key, err := secio.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	svc, err := tendril.New(tendril.Config{PrivateKey: key, Transports: []transport.Transport{network.NewTransport()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	id, err := identify.New(svc, identify.Config{PrivateKey: key, Public: func(ma.Multiaddr) bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { id.Close() })
	a, err := svc.Listen(context.Background(), tendril.MustParseAddr("/memory/0"))
	if err != nil {
		t.Fatal(err)
	}
	a.Peer = svc.ID()
	return &node{svc: svc, id: id, addr: a}
}

// TestReservesOnConnectedRelay: B, needing relays, reserves on the connected peer whose
// identify lists the hop protocol (not on the one that does not), publishes the circuit
// address, and C reaches B by dialling it; when B no longer needs relays the reservation
// and the address go.
func TestReservesOnConnectedRelay(t *testing.T) {
	network := memory.NewNetwork(memory.NetworkConfig{})
	a, plain, b, c := newNode(t, network), newNode(t, network), newNode(t, network), newNode(t, network)
	r, err := relay.NewRelay(a.svc, relay.RelayConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	cl, err := relay.NewClient(b.svc, relay.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	var needed atomic.Bool
	needed.Store(true)
	changes := make(chan []ma.Multiaddr, 16)
	ar, err := New(b.svc, b.id, cl, Config{
		Needed:   needed.Load,
		Interval: 20 * time.Millisecond,
		OnChange: func(m []ma.Multiaddr) { changes <- m },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ar.Close() })
	for _, n := range []*node{plain, a} {
		if _, err := b.svc.Dial(context.Background(), n.addr); err != nil {
			t.Fatal(err)
		}
	}
	var addrs []ma.Multiaddr
	select {
	case addrs = <-changes:
	case <-time.After(10 * time.Second):
		for _, s := range b.svc.Sessions() {
			info, ok := b.id.Info(s.Peer())
			t.Logf("session %s %s relayed=%v info=%v protos=%v", s.Peer(), s.Direction(), s.Relayed(), ok, info.Protocols)
		}
		t.Fatal("no circuit address published")
	}
	want, err := CircuitAddr(a.addr)
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != 1 || !addrs[0].Equal(want) {
		t.Fatalf("published %v, want [%s]", addrs, want)
	}
	if rs := ar.Relays(); len(rs) != 1 || rs[0] != a.svc.ID() {
		t.Fatalf("relays %v", rs)
	}
	s, err := Dial(context.Background(), c.svc, tendril.Addr{Transport: addrs[0], Peer: b.svc.ID()})
	if err != nil {
		t.Fatalf("dialling the circuit address: %v", err)
	}
	if !s.Relayed() || s.Peer() != b.svc.ID() {
		t.Fatalf("session %v relayed %v", s.Peer(), s.Relayed())
	}
	needed.Store(false)
	select {
	case addrs = <-changes:
	case <-time.After(10 * time.Second):
		t.Fatal("the circuit address stayed")
	}
	if len(addrs) != 0 || len(ar.Relays()) != 0 {
		t.Fatalf("after no longer needed: %v, %v", addrs, ar.Relays())
	}
}
