package admit

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
)

// TestHandshakePerIPCap: an address holds at most MaxHandshakesPerIP slots, silent or not;
// beyond it it is refused (never evicts its own), and other addresses are not affected.
func TestHandshakePerIPCap(t *testing.T) {
	l := New(testLimits())
	ip := v4(1, 1, 1)
	mustAdmit(t, l, t0, ip, false)
	mustAdmit(t, l, t0, ip, false)
	refused(t, l, at(time.Hour), ip, false, HandshakesPerIP)
	refused(t, l, at(time.Hour), ip, true, HandshakesPerIP)
	mustAdmit(t, l, t0, v4(1, 1, 2), false)
	checkCounts(t, l)
}

// TestSilentEvictedAtAnyAge: with every slot taken by silent sockets, a newcomer takes the
// slot of the oldest at once, however young; the evicted ticket's Release gives nothing
// back twice.
func TestSilentEvictedAtAnyAge(t *testing.T) {
	l := New(testLimits())
	var tickets []Ticket
	for i := range 8 { // 8 subnets, one socket each: only the global limit binds
		tk, _ := mustAdmit(t, l, at(time.Duration(i)*time.Microsecond), v4(byte(i), 0, 1), false)
		tickets = append(tickets, tk)
	}
	now := at(10 * time.Microsecond)
	for i := range 8 {
		_, ev := mustAdmit(t, l, now, v4(100, byte(i), 1), false)
		if ev == nil || ev != tickets[i].Handshake() {
			t.Fatalf("newcomer %d evicted %v, want the oldest silent one (%d)", i, ev, i)
		}
		checkCounts(t, l)
	}
	for i := range tickets {
		l.Release(&tickets[i]) // their setups give back what is left: nothing
		checkCounts(t, l)
	}
	if len(l.hs) != 8 {
		t.Fatalf("%d handshakes, want the 8 newcomers", len(l.hs))
	}
}

// TestSpokenOnlyEvictedByAge: a handshake whose first message has arrived is never
// evicted by a silent newcomer while a silent one is left, and otherwise only once it has
// run EvictAge; before that the newcomer is refused.
func TestSpokenOnlyEvictedByAge(t *testing.T) {
	l := New(testLimits())
	var spoken []Ticket
	for i := range 4 {
		tk, _ := mustAdmit(t, l, t0, v4(byte(i), 0, 1), true) // spoke when accepted
		spoken = append(spoken, tk)
	}
	for i := range 4 {
		tk, _ := mustAdmit(t, l, t0, v4(byte(10+i), 0, 1), false)
		if l.Heard(t0, tk.Handshake()) != None { // spoke later
			t.Fatal("refused by the rate")
		}
		spoken = append(spoken, tk)
	}
	// A stream of silent newcomers: the first takes the slot of the oldest handshake only
	// once it has run EvictAge; every later one takes the previous newcomer's (silent).
	refused(t, l, at(999*time.Millisecond), v4(50, 0, 1), false, Handshakes)
	_, ev := mustAdmit(t, l, at(time.Second), v4(50, 0, 1), false)
	if ev != spoken[0].Handshake() {
		t.Fatal("the oldest spoken handshake was not evicted at EvictAge")
	}
	prev := l.hs[len(l.hs)-1]
	for i := range 100 {
		_, ev := mustAdmit(t, l, at(time.Second), v4(60, byte(i), 1), false)
		if ev != prev {
			t.Fatalf("newcomer %d evicted a handshake that had spoken", i)
		}
		prev = l.hs[len(l.hs)-1]
		checkCounts(t, l)
	}
	for _, tk := range spoken[1:] {
		if tk.Handshake().ended {
			t.Fatal("a spoken handshake lost its slot to a silent newcomer")
		}
	}
}

// TestSubnetShare: one /24 or /64 holds at most MaxHandshakesPerSubnet slots; its
// newcomers then take the slot of its own oldest silent socket, never another subnet's,
// and are refused once all of its handshakes have spoken. An IPv4-mapped IPv6 address is
// the caller's to unmap: a /64 and a /24 are counted apart.
func TestSubnetShare(t *testing.T) {
	for _, tc := range []struct {
		name string
		ip   func(subnet, host int) netip.Addr
	}{
		{"v4", func(s, h int) netip.Addr { return v4(0, byte(s), byte(h)) }},
		{"v6", func(s, h int) netip.Addr { return v6(uint16(s), uint16(h)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim := testLimits()
			lim.HandshakeBurst = 10
			l := New(lim)
			other, _ := mustAdmit(t, l, t0, tc.ip(2, 1), false) // another subnet, oldest of all
			var own []Ticket
			for h := range 4 {
				tk, _ := mustAdmit(t, l, at(time.Millisecond), tc.ip(1, h+1), false)
				own = append(own, tk)
			}
			for i := range 4 {
				_, ev := mustAdmit(t, l, at(2*time.Millisecond), tc.ip(1, 100+i), false)
				if ev != own[i].Handshake() {
					t.Fatalf("newcomer %d took another slot than its subnet's oldest silent one", i)
				}
				checkCounts(t, l)
			}
			if other.Handshake().ended {
				t.Fatal("a subnet's newcomer evicted another subnet's handshake")
			}
			for _, h := range l.hs {
				if Subnet(h.addr) == Subnet(tc.ip(1, 1)) && l.Heard(at(2*time.Millisecond), h) != None {
					t.Fatal("refused by the rate")
				}
			}
			refused(t, l, at(time.Hour), tc.ip(1, 200), false, HandshakesPerSubnet)
			mustAdmit(t, l, at(time.Hour), tc.ip(3, 1), false)
		})
	}
}

// TestHandshakeRate: a subnet starts at most HandshakeBurst handshakes at once and
// HandshakeRate per second after that, counted when the first message has arrived
// (Heard, or at admission); a refusal changes nothing; silent sockets are not charged; a
// handshake is charged once; Unlimited addresses are not charged.
func TestHandshakeRate(t *testing.T) {
	l := New(testLimits()) // 2 per second, 3 at once
	subnetA := func(h byte) netip.Addr { return v4(7, 7, h) }
	var tks []Ticket
	for i := range 4 { // silent: no charge
		tk, _ := mustAdmit(t, l, t0, subnetA(byte(i)), false)
		tks = append(tks, tk)
	}
	hs := func(i int) *Handshake { return tks[i].Handshake() }
	for i := range 3 {
		if k := l.Heard(t0, hs(i)); k != None {
			t.Fatalf("handshake %d of the burst refused by %v", i, k)
		}
	}
	if k := l.Heard(t0, hs(0)); k != None {
		t.Fatalf("heard twice: %v", k)
	}
	if k := l.Heard(t0, hs(3)); k != HandshakeRate {
		t.Fatalf("4th handshake in one instant: %v, want HandshakeRate", k)
	}
	if !hs(3).Silent() {
		t.Fatal("a refused handshake counts as spoken")
	}
	if k := l.Heard(at(499*time.Millisecond), hs(3)); k != HandshakeRate {
		t.Fatalf("after 499 ms: %v, want HandshakeRate", k)
	}
	if k := l.Heard(at(500*time.Millisecond), hs(3)); k != None {
		t.Fatalf("after 500 ms (one interval): %v", k)
	}
	// At admission: a newcomer that has spoken is refused by the rate before anything
	// changes, even the eviction it would make.
	l.Release(&tks[3])
	silent, _ := mustAdmit(t, l, at(500*time.Millisecond), subnetA(40), false) // the subnet is full again
	refused(t, l, at(500*time.Millisecond), subnetA(50), true, HandshakeRate)
	if silent.Handshake().ended {
		t.Fatal("a refused newcomer evicted a handshake")
	}
	if _, ev := mustAdmit(t, l, at(time.Second), subnetA(50), true); ev != silent.Handshake() {
		t.Fatal("the newcomer did not take the silent handshake's slot")
	}
	// A handshake that has ended is not charged; nor are Unlimited addresses.
	tk, _ := mustAdmit(t, l, at(time.Second), v4(8, 8, 8), false)
	h := tk.Handshake()
	l.Release(&tk)
	for range 10 {
		if k := l.Heard(at(time.Second), h); k != None {
			t.Fatalf("an ended handshake was charged: %v", k)
		}
	}
	if _, ok := l.rate.full[Subnet(v4(8, 8, 8))]; ok {
		t.Fatal("an ended handshake was charged")
	}
	for range 10 {
		ut, _ := mustAdmit(t, l, at(time.Second), netip.MustParseAddr("127.0.0.1"), true)
		l.Release(&ut)
	}
	if len(l.rate.full) != 1 {
		t.Fatalf("%d subnets charged, want 1", len(l.rate.full))
	}
	checkCounts(t, l)
}

// TestUnlimitedExempt: Unlimited addresses have no per-address or per-subnet caps and no
// rate, but share the handshake slots and the session budget.
func TestUnlimitedExempt(t *testing.T) {
	l := New(testLimits())
	lo := netip.MustParseAddr("127.0.0.1")
	for range 8 {
		mustAdmit(t, l, t0, lo, true)
	}
	refused(t, l, at(time.Millisecond), lo, true, Handshakes)
	if len(l.hsPerIP)+len(l.hsPerSubnet)+len(l.rate.full) != 0 {
		t.Fatal("unlimited handshakes counted per address, or charged")
	}
	l = New(testLimits())
	for i := range 7 {
		tk, _ := mustAdmit(t, l, t0, lo, false)
		k := l.AdmitSession(&tk)
		if want := map[bool]Limit{true: None, false: Inbound}[i < 6]; k != want {
			t.Fatalf("unlimited session %d: %v, want %v", i, k, want)
		}
	}
	checkCounts(t, l)
}

// TestSessions: inbound sessions by address and subnet, outbound apart, Release
// idempotent, and the per-address session cap refusing before the handshake too.
func TestSessions(t *testing.T) {
	l := New(testLimits())
	ip := v6(1, 1)
	var sess []Ticket
	for range 2 {
		tk, _ := mustAdmit(t, l, t0, ip, false)
		if k := l.AdmitSession(&tk); k != None {
			t.Fatal(k)
		}
		if tk.Handshake() != nil || !tk.Counted() {
			t.Fatal("a session still holds its handshake slot, or is not counted")
		}
		sess = append(sess, tk)
	}
	refused(t, l, t0, ip, false, InboundPerIP) // before its handshake
	// A race let one through its handshake: refused at AdmitSession, then released.
	tk := Ticket{addr: ip, inbound: true, limited: true}
	if k := l.AdmitSession(&tk); k != InboundPerIP {
		t.Fatalf("third session from one address: %v", k)
	}
	l.Release(&tk)
	for h := range 2 {
		tk, _ := mustAdmit(t, l, t0, v6(1, uint16(10+h)), false)
		if k := l.AdmitSession(&tk); k != None {
			t.Fatal(k)
		}
		sess = append(sess, tk)
	}
	refused(t, l, t0, v6(1, 20), false, InboundPerSubnet)
	for i := range 2 {
		tk, _ := mustAdmit(t, l, t0, v6(uint16(2+i), 1), false)
		if k := l.AdmitSession(&tk); k != None {
			t.Fatal(k)
		}
		sess = append(sess, tk)
	}
	tk, _ = mustAdmit(t, l, t0, v6(9, 1), false)
	if k := l.AdmitSession(&tk); k != Inbound {
		t.Fatalf("7th inbound session: %v, want Inbound", k)
	}
	l.Release(&tk)
	out := []Ticket{}
	for range 2 {
		o, k := l.AdmitOutbound()
		if k != None {
			t.Fatalf("outbound with inbound full: %v", k)
		}
		out = append(out, o)
	}
	if _, k := l.AdmitOutbound(); k != Outbound {
		t.Fatalf("3rd outbound: %v", k)
	}
	checkCounts(t, l)
	for i := range sess {
		l.Release(&sess[i])
		l.Release(&sess[i])
	}
	for i := range out {
		l.Release(&out[i])
		l.Release(&out[i])
	}
	checkCounts(t, l)
	if l.inbound != 0 || l.outbound != 0 || len(l.perIP)+len(l.perSubnet) != 0 {
		t.Fatalf("after releasing everything: %d inbound, %d outbound, %d+%d map entries", l.inbound, l.outbound, len(l.perIP), len(l.perSubnet))
	}
}

// TestHostileSequence drives the ledger as a crowd of peers that ignore the protocol
// would: a seeded random mix of connections from few and many addresses and subnets,
// first messages arriving or not, handshakes ending, sessions admitted and released, over
// a clock that moves in small steps. After every step the counts match the slots and
// sessions and stay within every limit, and once everything is released the ledger holds
// nothing (no map entry, slot or idle check is left behind).
func TestHostileSequence(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 26))
		l := New(testLimits())
		now := t0
		var live []Ticket
		addr := func() netip.Addr {
			switch rng.IntN(4) {
			case 0:
				return v4(1, 1, byte(rng.IntN(3))) // few addresses, one /24
			case 1:
				return v6(1, uint16(rng.IntN(1<<16))) // many addresses, one /64
			case 2:
				return v4(byte(rng.IntN(256)), byte(rng.IntN(256)), 1) // many /24s
			}
			return netip.MustParseAddr("127.0.0.1")
		}
		for step := range 5000 {
			now = now.Add(time.Duration(rng.IntN(50)) * time.Millisecond)
			switch op := rng.IntN(12); {
			case op < 4:
				if tk, ev, k := l.AdmitInbound(now, addr(), rng.IntN(3) == 0); k == None {
					if ev != nil && !ev.ended {
						t.Fatalf("seed %d step %d: an evicted handshake still holds its slot", seed, step)
					}
					live = append(live, tk)
				}
			case op < 5:
				if tk, k := l.AdmitOutbound(); k == None {
					live = append(live, tk)
				}
			case op < 7 && len(live) > 0:
				if h := live[rng.IntN(len(live))].Handshake(); h != nil {
					l.Heard(now, h)
				}
			case op < 9 && len(live) > 0:
				// A handshake ends: its session is admitted (even an evicted one's, as
				// when the handshake completed just as it was evicted) or it is released.
				i := rng.IntN(len(live))
				if live[i].Handshake() == nil {
					break
				}
				if l.AdmitSession(&live[i]) == None {
					l.QueueIdle(&live[i], uint64(step), now)
				} else {
					l.Release(&live[i])
					live = append(live[:i], live[i+1:]...)
				}
			case len(live) > 0:
				i := rng.IntN(len(live))
				l.Release(&live[i])
				live = append(live[:i], live[i+1:]...)
			}
			if rng.IntN(50) == 0 {
				l.DueIdle(now)
			}
			checkCounts(t, l)
		}
		for i := range live {
			l.Release(&live[i])
		}
		checkCounts(t, l)
		if len(l.hs)+len(l.hsPerIP)+len(l.hsPerSubnet)+len(l.perIP)+len(l.perSubnet)+len(l.idle)+l.inbound+l.outbound != 0 {
			t.Fatalf("seed %d: after releasing everything the ledger holds %d slots, %d+%d+%d+%d map entries, %d idle checks, %d+%d sessions",
				seed, len(l.hs), len(l.hsPerIP), len(l.hsPerSubnet), len(l.perIP), len(l.perSubnet), len(l.idle), l.inbound, l.outbound)
		}
	}
}

// TestReaddress: a trusted proxy's handshakes (exempt, on loopback) move to the clients it
// names, where the per-address caps then count them; a client at its cap is refused
// without changing anything; a session from a readdressed ticket counts for the client.
func TestReaddress(t *testing.T) {
	l := New(testLimits())
	proxy := netip.MustParseAddr("127.0.0.1")
	client := v4(9, 9, 9)
	var tickets []Ticket
	for range 3 {
		tk, _ := mustAdmit(t, l, t0, proxy, false)
		tickets = append(tickets, tk)
	}
	for i := range 2 {
		if k := l.Readdress(t0, &tickets[i], client); k != None {
			t.Fatalf("readdress %d: refused by %v", i, k)
		}
		checkCounts(t, l)
	}
	if k := l.Readdress(t0, &tickets[2], client); k != HandshakesPerIP {
		t.Fatalf("third handshake for one client: %v, want %v", k, HandshakesPerIP)
	}
	if got := tickets[2].Addr(); got != proxy {
		t.Fatalf("refused ticket now for %v, want it unchanged (%v)", got, proxy)
	}
	checkCounts(t, l)
	if k := l.AdmitSession(&tickets[0]); k != None {
		t.Fatalf("session: %v", k)
	}
	if l.perIP[client] != 1 {
		t.Fatalf("sessions counted for the client: %d, want 1", l.perIP[client])
	}
	for i := range tickets {
		l.Release(&tickets[i])
		checkCounts(t, l)
	}
	if len(l.perIP) != 0 || len(l.hsPerIP) != 0 || len(l.hs) != 0 {
		t.Fatalf("after release: perIP %v, hsPerIP %v, %d handshakes", l.perIP, l.hsPerIP, len(l.hs))
	}
}
