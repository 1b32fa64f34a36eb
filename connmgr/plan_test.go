package connmgr

import (
	"errors"
	"strings"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/secio"
)

func TestReadyAt(t *testing.T) {
	c := DefaultConfig().Backoff
	for _, tc := range []struct {
		name string
		st   *addrState
		e    *addrbook.Entry
		want time.Time
	}{
		{"nothing known", nil, nil, time.Time{}},
		{"book: no failures", nil, &addrbook.Entry{LastAttempt: t0}, time.Time{}},
		{"book: 3 failures, no jitter", nil, &addrbook.Entry{LastAttempt: t0, Failures: 3}, t0.Add(4 * time.Second)},
		{"state wins over the book", &addrState{failures: 1, next: t0.Add(time.Second)}, &addrbook.Entry{LastAttempt: t0, Failures: 9}, t0.Add(time.Second)},
	} {
		if got := readyAt(tc.st, tc.e, c); !got.Equal(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestChooseAddr(t *testing.T) {
	c := DefaultConfig().Backoff
	a, b, x := ip4(11, 1, 0, 1), ip4(12, 1, 0, 1), ip4(13, 1, 0, 1)
	entries := []addrbook.Entry{{Addr: a}, {Addr: b}}
	back := func(d time.Duration) *addrState { return &addrState{failures: 1, next: t0.Add(d)} }
	key := func(m ma.Multiaddr) string { return string(m.Bytes()) }
	for _, tc := range []struct {
		name   string
		book   []addrbook.Entry
		extra  []ma.Multiaddr
		states map[string]*addrState
		want   ma.Multiaddr // nil: none ready
		at     time.Time
	}{
		{"best first", entries, nil, nil, a, time.Time{}},
		{"best backing off: the next", entries, nil, map[string]*addrState{key(a): back(time.Second)}, b, time.Time{}},
		{"all backing off: the earliest", entries, nil, map[string]*addrState{key(a): back(3 * time.Second), key(b): back(2 * time.Second)}, nil, t0.Add(2 * time.Second)},
		{"an extra address after the book's", entries, []ma.Multiaddr{x}, map[string]*addrState{key(a): back(time.Second), key(b): back(time.Second)}, x, time.Time{}},
		{"extra already in the book counts once", entries[:1], []ma.Multiaddr{a}, map[string]*addrState{key(a): back(time.Second)}, nil, t0.Add(time.Second)},
		{"due exactly now", entries[:1], nil, map[string]*addrState{key(a): back(0)}, a, time.Time{}},
		{"book history backs off", []addrbook.Entry{{Addr: a, Failures: 2, LastAttempt: t0}}, nil, nil, nil, t0.Add(2 * time.Second)},
		{"no address", nil, nil, nil, nil, time.Time{}},
	} {
		ch, at, ok := chooseAddr(t0, tc.book, tc.extra, tc.states, c)
		if ok != (tc.want != nil) || (ok && !ch.addr.Equal(tc.want)) || !at.Equal(tc.at) {
			t.Errorf("%s: got %v %v %v, want %v %v", tc.name, ch.addr, at, ok, tc.want, tc.at)
		}
		if ok && (ch.key != key(ch.addr) || ch.group != addrbook.GroupOf(ch.addr)) {
			t.Errorf("%s: choice %+v inconsistent", tc.name, ch)
		}
	}
}

func TestSlots(t *testing.T) {
	g1, g2 := addrbook.GroupOf(ip4(11, 1, 0, 1)), addrbook.GroupOf(ip4(12, 1, 0, 1))
	s := newSlots(4, 2)
	for _, g := range []addrbook.Group{g1, g1} {
		if why := s.refuse(g); why != "" {
			t.Fatalf("refused %s: %s", g, why)
		}
		s.take(g)
	}
	if why := s.refuse(g1); !strings.Contains(why, "at its cap") {
		t.Fatalf("third of %s: %q, want the group cap", g1, why)
	}
	if s.cappedGroups() != 1 {
		t.Fatalf("cappedGroups %d, want 1", s.cappedGroups())
	}
	s.take(addrbook.GroupMemory)
	s.take(addrbook.GroupMemory)
	if why := s.refuse(addrbook.GroupMemory); !strings.Contains(why, "slots full (4/4)") {
		t.Fatalf("memory at 4/4: %q, want slots full", why)
	}
	e := newSlots(8, 2)
	for range 5 {
		e.take(addrbook.GroupLocal)
		e.take(addrbook.GroupMemory)
	}
	if why := e.refuse(addrbook.GroupMemory); !strings.Contains(why, "full") {
		t.Fatalf("exempt groups past the cap should only meet Target: %q", why)
	}
	e = newSlots(8, 2)
	e.take(addrbook.GroupLocal)
	e.take(addrbook.GroupLocal)
	e.take(addrbook.GroupMemory)
	e.take(addrbook.GroupMemory)
	if e.refuse(addrbook.GroupLocal) != "" || e.refuse(addrbook.GroupMemory) != "" || e.cappedGroups() != 0 {
		t.Fatal("local and memory groups are exempt from the cap")
	}
	n := newSlots(8, -1)
	for range 7 {
		n.take(g2)
	}
	if why := n.refuse(g2); why != "" {
		t.Fatalf("MaxPerGroup -1: %q", why)
	}
}

// simulate runs rounds of pick against book as the Manager does, every pick becoming an
// outbound session at once, until a round picks nothing; it returns the sessions per
// group.
func simulate(t *testing.T, book *addrbook.Book, target, maxPerGroup, maxDialing int) map[addrbook.Group]int {
	t.Helper()
	conn := make(map[secio.PeerID]addrbook.Group)
	for range 100 {
		sl := newSlots(target, maxPerGroup)
		for _, g := range conn {
			sl.take(g)
		}
		room := min(maxDialing, target-sl.used)
		exclude := func(p secio.PeerID) bool { _, ok := conn[p]; return ok }
		got := pick(t0, book, sl, room, DefaultConfig().Backoff, exclude,
			func(secio.PeerID) map[string]*addrState { return nil },
			func(secio.PeerID, time.Time) bool { return false })
		if len(got) == 0 {
			break
		}
		for _, d := range got {
			if _, dup := conn[d.peer]; dup {
				t.Fatalf("peer %v picked twice", d.peer)
			}
			conn[d.peer] = d.group
		}
	}
	per := make(map[addrbook.Group]int)
	for _, g := range conn {
		per[g]++
	}
	return per
}

// TestFloodedGroupCapped: one /16 fills the book with hundreds of peers beside three
// honest peers in other groups; the outbound slots it takes stay at MaxPerGroup, and
// every honest peer is dialled. With the cap off it takes the rest of the slots.
func TestFloodedGroupCapped(t *testing.T) {
	book := newBook(t, nil)
	attacker := addrbook.GroupOf(ip4(66, 6, 0, 1))
	n := 0
	// The attacker passes its addresses on from many /16s of its own, as peer exchange
	// would, so that they reach many new buckets.
	for via := range 40 {
		for i := range 40 {
			n += book.Add(t0, peerN(1000+via*40+i), []ma.Multiaddr{ip4(66, 6, via, i+1)},
				addrbook.FromPeer(addrbook.GroupOf(ip4(70+via, 1, 0, 1))))
		}
	}
	if n < 100 {
		t.Fatalf("only %d attacker addresses in the book", n)
	}
	honest := []int{11, 12, 13}
	for i, a := range honest {
		book.Add(t0, peerN(i), []ma.Multiaddr{ip4(a, 1, 0, 1)}, addrbook.Source{Kind: addrbook.SourceIdentify})
	}
	per := simulate(t, book, 8, 2, 4)
	t.Logf("%d attacker addresses in the book; outbound per group: %v", n, per)
	if per[attacker] > 2 {
		t.Fatalf("the flooding group took %d outbound slots, cap 2", per[attacker])
	}
	for _, a := range honest {
		if per[addrbook.GroupOf(ip4(a, 1, 0, 1))] != 1 {
			t.Fatalf("honest group %d.1/16 not dialled: %v", a, per)
		}
	}
	if open := simulate(t, book, 8, -1, 4); open[attacker] != 5 {
		t.Fatalf("without the cap the flooding group should take the 5 free slots, took %d", open[attacker])
	}
}

// TestPickSkipsBackingOff: after a restart only the book knows who failed; pick marks
// those candidates and asks again, so that the round still starts room dials.
func TestPickSkipsBackingOff(t *testing.T) {
	book := newBook(t, nil)
	failing := make(map[secio.PeerID]bool)
	for i := range 60 {
		p, a := peerN(i), ip4(11+i, 1, 0, 1)
		book.Add(t0, p, []ma.Multiaddr{a}, addrbook.Source{Kind: addrbook.SourceIdentify})
		if i >= 6 {
			book.Attempt(t0, p, a)
			book.Failed(t0, p, a, errors.New("refused"))
			book.Failed(t0, p, a, errors.New("refused"))
			failing[p] = true
		}
	}
	noted := make(map[secio.PeerID]time.Time)
	exclude := func(p secio.PeerID) bool { _, ok := noted[p]; return ok }
	later := func(p secio.PeerID, at time.Time) bool { noted[p] = at; return true }
	got := pick(t0.Add(time.Second), book, newSlots(8, 2), 6, DefaultConfig().Backoff, exclude,
		func(secio.PeerID) map[string]*addrState { return nil }, later)
	if len(got) != 6 {
		t.Fatalf("picked %d, want the 6 ready peers (noted %d backing off)", len(got), len(noted))
	}
	for _, d := range got {
		if failing[d.peer] {
			t.Fatalf("picked %v, which the book says backs off", d.peer)
		}
	}
	for p, at := range noted {
		if !at.Equal(t0.Add(2 * time.Second)) {
			t.Fatalf("%v noted until %v, want t0+2s (two failures)", p, at)
		}
	}
}

func TestPeerState(t *testing.T) {
	ps := newPeerState()
	for i := range 20 {
		ps.record(Attempt{Time: t0.Add(time.Duration(i) * time.Second)})
	}
	h := ps.history()
	if len(h) != attemptsKept || !h[0].Time.Equal(t0.Add(12*time.Second)) || !h[7].Time.Equal(t0.Add(19*time.Second)) {
		t.Fatalf("history %v", h)
	}
	for i := range 100 {
		ps.addr(string(ip4(11, 1, 0, i+1).Bytes())).fail(t0.Add(time.Duration(i)*time.Second), DefaultConfig().Backoff, 0.5)
	}
	if len(ps.addrs) != maxAddrStates {
		t.Fatalf("%d address states, bound %d", len(ps.addrs), maxAddrStates)
	}
	c := DefaultConfig().Backoff
	as := ps.addr("x")
	for range 6 {
		as.fail(t0, c, 0.5)
	}
	if !as.next.Equal(t0.Add(32 * time.Second)) {
		t.Fatalf("after 6 failures next %v, want t0+32s", as.next)
	}
	ps.notBefore = t0.Add(time.Hour)
	ps.refresh(c)
	if as.failures != 0 || !as.next.Equal(t0.Add(time.Second)) || !ps.notBefore.IsZero() {
		t.Fatalf("after refresh: failures %d next %v notBefore %v; want 0, t0+Base, zero", as.failures, as.next, ps.notBefore)
	}

	tab := peerTable{m: make(map[secio.PeerID]*peerState), max: 3}
	keep := func(p secio.PeerID) bool { return p == peerN(0) }
	for i := range 10 {
		if tab.get(peerN(i), keep) == nil {
			t.Fatalf("get %d: nil with evictable states", i)
		}
	}
	if len(tab.m) != 3 || tab.m[peerN(0)] == nil {
		t.Fatalf("table %d states, kept one present %v", len(tab.m), tab.m[peerN(0)] != nil)
	}
	all := peerTable{m: make(map[secio.PeerID]*peerState), max: 1}
	all.get(peerN(0), keep)
	if all.get(peerN(1), keep) != nil {
		t.Fatal("evicted a protected state")
	}
}
