package relay

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/secio"
)

func testPeer(t testing.TB) secio.PeerID {
	k, err := secio.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k.PeerID()
}

func alive(secio.PeerID, uint64) bool { return true }

// TestLedgerReservations: the total, per-IP and per-subnet caps, pruning of stale
// reservations, refreshes that need no room, and the global rate, on a fixed clock.
func TestLedgerReservations(t *testing.T) {
	cfg := RelayConfig{MaxReservations: 4, MaxReservationsPerIP: 2, MaxReservationsPerSubnet: 3,
		ReservationRate: 1, ReservationBurst: 100}.withDefaults()
	now := time.Unix(1000, 0)
	l := newLedger(now, &cfg)
	ip := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	peers := make([]secio.PeerID, 8)
	for i := range peers {
		peers[i] = testPeer(t)
	}
	must := func(p secio.PeerID, addr netip.Addr, want error) {
		t.Helper()
		_, err := l.reserve(now, p, 1, addr, alive)
		if !errors.Is(err, want) && !(want == nil && err == nil) {
			t.Fatalf("reserve from %v: %v, want %v", addr, err, want)
		}
	}
	must(peers[0], ip("1.2.3.4"), nil)
	must(peers[1], ip("1.2.3.4"), nil)
	must(peers[2], ip("1.2.3.4"), ErrReservationRefused) // per IP
	must(peers[2], ip("1.2.3.5"), nil)
	must(peers[3], ip("1.2.3.6"), ErrReservationRefused) // per subnet
	must(peers[0], ip("1.2.3.4"), nil)                   // a refresh needs no room
	must(peers[3], ip("9.9.9.9"), nil)
	must(peers[4], netip.Addr{}, ErrReservationRefused) // total
	must(peers[5], ip("127.0.0.1"), ErrReservationRefused)
	// Expired ones are pruned when room runs out.
	now = now.Add(cfg.ReservationTTL)
	must(peers[4], netip.Addr{}, nil)
	if len(l.res) != 1 || len(l.perIP) != 0 || len(l.perSubnet) != 0 {
		t.Fatalf("after pruning: %d reservations, %v, %v", len(l.res), l.perIP, l.perSubnet)
	}
	// A reservation whose session is gone is stale too.
	if l.reserved(now, peers[4], func(secio.PeerID, uint64) bool { return false }) {
		t.Fatal("a reservation whose session closed still counts")
	}
	if len(l.res) != 0 {
		t.Fatal("the stale reservation was not dropped")
	}
	// Loopback is exempt from the address caps.
	for i := range 4 {
		must(peers[i], ip("127.0.0.1"), nil)
	}
}

// TestLedgerReservationRate: after the burst, new reservations come at the rate; a
// refresh takes no token.
func TestLedgerReservationRate(t *testing.T) {
	cfg := RelayConfig{MaxReservations: 1000, ReservationRate: 2, ReservationBurst: 3}.withDefaults()
	now := time.Unix(1000, 0)
	l := newLedger(now, &cfg)
	first := testPeer(t)
	granted := 0
	for i := range 10 {
		p := first
		if i > 0 {
			p = testPeer(t)
		}
		if _, err := l.reserve(now, p, 1, netip.Addr{}, alive); err == nil {
			granted++
		} else if !errors.Is(err, ErrRateLimited) {
			t.Fatal(err)
		}
	}
	if granted != 3 {
		t.Fatalf("%d granted at once, want the burst of 3", granted)
	}
	if _, err := l.reserve(now, first, 1, netip.Addr{}, alive); err != nil {
		t.Fatalf("a refresh was refused: %v", err)
	}
	now = now.Add(time.Second)
	granted = 0
	for range 10 {
		if _, err := l.reserve(now, testPeer(t), 1, netip.Addr{}, alive); err == nil {
			granted++
		}
	}
	if granted != 2 {
		t.Fatalf("%d granted a second later, want 2", granted)
	}
}

// TestLedgerCircuits: the total and per-peer caps (a peer counts as dialer and as target),
// the connect rate, and the release.
func TestLedgerCircuits(t *testing.T) {
	cfg := RelayConfig{MaxCircuits: 5, MaxCircuitsPerPeer: 2, ConnectRate: 1, ConnectBurst: 6}.withDefaults()
	now := time.Unix(1000, 0)
	l := newLedger(now, &cfg)
	a, b, c, d, e, f := testPeer(t), testPeer(t), testPeer(t), testPeer(t), testPeer(t), testPeer(t)
	ok := func(src, dst secio.PeerID, want error) {
		t.Helper()
		if err := l.openCircuit(now, src, dst); !errors.Is(err, want) && !(want == nil && err == nil) {
			t.Fatalf("openCircuit: %v, want %v", err, want)
		}
	}
	ok(a, b, nil)
	ok(a, c, nil)
	ok(a, d, ErrResourceLimit) // a is at 2 as dialer
	ok(d, b, nil)
	ok(e, b, ErrResourceLimit) // b is at 2 as target
	ok(c, d, nil)              // c and d at 2
	ok(e, f, nil)              // 5 in total
	ok(f, e, ErrResourceLimit) // total
	l.closeCircuit(a, b)
	ok(f, e, nil) // the sixth token of the burst (refusals for room took none)
	l.closeCircuit(a, c)
	ok(a, c, ErrRateLimited)
	now = now.Add(time.Second)
	ok(a, c, nil)
	if l.circuits != 5 || l.perPeer[a] != 1 || l.perPeer[b] != 1 {
		t.Fatalf("counts: %d in all, a %d, b %d", l.circuits, l.perPeer[a], l.perPeer[b])
	}
}

// TestPeerBuckets: per-peer request buckets, and the least recently used peer forgotten
// beyond the cap.
func TestPeerBuckets(t *testing.T) {
	now := time.Unix(1000, 0)
	cfg := RelayConfig{MaxTrackedPeers: 2, RequestBurst: 2, RequestInterval: time.Second}.withDefaults()
	pb := newLedger(now, &cfg)
	a, b, c := testPeer(t), testPeer(t), testPeer(t)
	for range 2 {
		if !pb.request(now, a) {
			t.Fatal("refused within the burst")
		}
	}
	if pb.request(now, a) {
		t.Fatal("a third request within the burst passed")
	}
	pb.request(now, b)
	pb.request(now, c) // forgets a
	if pb.requests.Len() != 2 || pb.requests.Get(a) != nil {
		t.Fatalf("%d peers kept", pb.requests.Len())
	}
	if !pb.request(now.Add(time.Second), b) {
		t.Fatal("no refill")
	}
}
