package admit

import (
	"net/netip"
	"testing"
	"time"
)

// The ledger's tests run on a fixed clock (t0 plus offsets), without sockets or sleeps, as
// go-libp2p tests its connection manager: the decisions are plain code.

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// at is t0 plus d.
func at(d time.Duration) time.Time { return t0.Add(d) }

// testLimits are small limits that make every rule reachable in a few calls.
func testLimits() Limits {
	return Limits{
		MaxHandshakes:          8,
		MaxHandshakesPerIP:     2,
		MaxHandshakesPerSubnet: 4,
		EvictAge:               time.Second,
		HandshakeRate:          2,
		HandshakeBurst:         3,
		MaxInbound:             6,
		MaxOutbound:            2,
		MaxInboundPerIP:        2,
		MaxInboundPerSubnet:    4,
		Unlimited:              []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		HighWater:              6,
		LowWater:               4,
		GracePeriod:            time.Second,
		IdleTimeout:            30 * time.Second,
	}
}

// v4 is the address 10.a.b.c; v6 the address 2001:db8:0:s::h (subnet s, host h).
func v4(a, b, c byte) netip.Addr { return netip.AddrFrom4([4]byte{10, a, b, c}) }

func v6(s, h uint16) netip.Addr {
	return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, byte(s >> 8), byte(s), 14: byte(h >> 8), 15: byte(h)})
}

// admit takes a handshake slot or fails the test.
func mustAdmit(t *testing.T, l *Ledger, now time.Time, ip netip.Addr, spoke bool) (Ticket, *Handshake) {
	t.Helper()
	tk, ev, k := l.AdmitInbound(now, ip, spoke)
	if k != None {
		t.Fatalf("%v at %v: refused by %v", ip, now.Sub(t0), k)
	}
	return tk, ev
}

// refused checks that admitting ip at now is refused by want, and changes nothing.
func refused(t *testing.T, l *Ledger, now time.Time, ip netip.Addr, spoke bool, want Limit) {
	t.Helper()
	before := len(l.hs)
	_, ev, k := l.AdmitInbound(now, ip, spoke)
	if k != want || ev != nil {
		t.Fatalf("%v: refused by %v (evicted %v), want %v", ip, k, ev != nil, want)
	}
	if len(l.hs) != before {
		t.Fatalf("a refusal changed the slots: %d, was %d", len(l.hs), before)
	}
	checkCounts(t, l)
}

// checkCounts checks the ledger's invariants: its per-address and per-subnet counts are
// exactly those of its slots and sessions, hold no zero entries, and stay within the
// limits.
func checkCounts(t *testing.T, l *Ledger) {
	t.Helper()
	if len(l.hs) > l.lim.MaxHandshakes {
		t.Fatalf("%d handshakes, limit %d", len(l.hs), l.lim.MaxHandshakes)
	}
	perIP, perSubnet := map[netip.Addr]int{}, map[netip.Prefix]int{}
	for i, h := range l.hs {
		if h.ended {
			t.Fatalf("an ended handshake holds a slot")
		}
		if i > 0 && h.start.Before(l.hs[i-1].start) {
			t.Fatalf("slots out of order")
		}
		if h.limited {
			perIP[h.addr]++
			perSubnet[Subnet(h.addr)]++
		}
	}
	same := func(what string, got, want int, ok bool) {
		if !ok || got != want || got <= 0 {
			t.Fatalf("%s: counted %d (present %v), slots say %d", what, got, ok, want)
		}
	}
	if len(perIP) != len(l.hsPerIP) || len(perSubnet) != len(l.hsPerSubnet) {
		t.Fatalf("handshake count maps have %d and %d entries, slots %d and %d", len(l.hsPerIP), len(l.hsPerSubnet), len(perIP), len(perSubnet))
	}
	for ip, n := range perIP {
		got, ok := l.hsPerIP[ip]
		same(ip.String(), got, n, ok)
		if c := l.lim.MaxHandshakesPerIP; c > 0 && n > c {
			t.Fatalf("%v holds %d handshakes, cap %d", ip, n, c)
		}
	}
	for p, n := range perSubnet {
		got, ok := l.hsPerSubnet[p]
		same(p.String(), got, n, ok)
		if c := l.lim.MaxHandshakesPerSubnet; c > 0 && n > c {
			t.Fatalf("%v holds %d handshakes, cap %d", p, n, c)
		}
	}
	for m, name := range map[*map[netip.Addr]int]string{&l.perIP: "sessions per IP", &l.hsPerIP: "handshakes per IP"} {
		for k, n := range *m {
			if n <= 0 {
				t.Fatalf("%s: %v has %d", name, k, n)
			}
		}
	}
	if l.inbound > l.lim.MaxInbound || l.outbound > l.lim.MaxOutbound || l.inbound < 0 || l.outbound < 0 {
		t.Fatalf("sessions: %d inbound, %d outbound", l.inbound, l.outbound)
	}
	if len(l.idle) > l.inbound {
		t.Fatalf("%d idle checks for %d inbound sessions", len(l.idle), l.inbound)
	}
	if len(l.rate.full) > MaxRateBuckets {
		t.Fatalf("%d rate buckets, bound %d", len(l.rate.full), MaxRateBuckets)
	}
}
