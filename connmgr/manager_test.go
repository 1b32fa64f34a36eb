package connmgr

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	tendril "github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/transport"
	"github.com/tendril-p2p/tendril/transport/memory"
)

// TestKeepsTarget: 16 nodes on 25 ms links, each with every other's address in its book,
// reach 8 sessions each; 4 killed nodes restarted with their books are back at 8, and no
// address was dialled sooner than its backoff allowed.
func TestKeepsTarget(t *testing.T) {
	const nodes, killed = 16, 4
	network := memory.NewNetwork(memory.NetworkConfig{Link: memory.Link{Delay: 25 * time.Millisecond}})
	all := make([]*node, nodes)
	for i := range all {
		all[i] = newNode(t, network, 100+i, Config{Rand: rand.NewPCG(1, uint64(i))})
	}
	for _, nd := range all {
		nd.tell(all...)
		nd.start()
	}
	atTarget := func(ns []*node) func() bool {
		return func() bool {
			for _, nd := range ns {
				if nd.sessions() < 8 {
					return false
				}
			}
			return true
		}
	}
	took := waitFor(t, 20*time.Second, "every node at 8 sessions", atTarget(all))
	t.Logf("all %d nodes at >= 8 sessions after %v", nodes, took)
	for _, nd := range all {
		out := 0
		for _, s := range nd.svc.Sessions() {
			if s.Direction() == tendril.Outbound {
				out++
			}
		}
		if out > 8 {
			t.Fatalf("a node has %d outbound sessions, Target 8", out)
		}
	}

	for _, nd := range all[:killed] {
		nd.stop()
	}
	time.Sleep(1500 * time.Millisecond) // the others notice and dial the dead ones, backing off
	for _, nd := range all[:killed] {
		nd.start()
	}
	took = waitFor(t, 20*time.Second, "every node back at 8 sessions", atTarget(all))
	t.Logf("after restarting %d nodes with their books, all back at >= 8 sessions after %v", killed, took)
	dials := 0
	for _, nd := range all {
		dials += nd.log.checkBackoff(t, DefaultConfig().Backoff)
	}
	t.Logf("%d dials in all", dials)
}

// TestDeadAddressBackoff: an address nobody listens at is redialled at the backoff's
// pace: counted at the transport, no sooner than (1-Jitter)*Backoff(k) after its kth
// failure, and about as often as the backoff allows in the time.
func TestDeadAddressBackoff(t *testing.T) {
	network := memory.NewNetwork(memory.NetworkConfig{Link: memory.Link{Delay: 5 * time.Millisecond}})
	bo := BackoffConfig{Base: 100 * time.Millisecond, Max: 800 * time.Millisecond, Factor: 2, Jitter: 0.2}
	a := newNode(t, network, 1, Config{Backoff: bo, Interval: 50 * time.Millisecond})
	dead := newNode(t, network, 2, Config{}) // never started
	a.tell(dead)
	a.start()
	time.Sleep(3 * time.Second)
	a.mgr.Close()
	n := a.log.count(dead.listen)
	a.log.checkBackoff(t, bo)
	// Attempts at about 0, .1, .3, .7, 1.5, 2.3 s (Max .8 s from the fifth): 6 in 3 s;
	// jitter can fit one more.
	t.Logf("%d dials of the dead address in 3 s", n)
	if n < 4 || n > 7 {
		t.Fatalf("%d dials of the dead address in 3 s, want 4..7", n)
	}
	st := a.mgr.Status(dead.id)
	if len(st.Attempts) == 0 || st.Attempts[len(st.Attempts)-1].Err == nil || st.Connected {
		t.Fatalf("status: %+v", st)
	}
}

// TestShortSessionsBackOff: a peer that accepts every session and closes it at once is
// redialled at the backoff's pace, not every round: a session that ends before
// StableAfter is a failure of its address.
func TestShortSessionsBackOff(t *testing.T) {
	network := memory.NewNetwork(memory.NetworkConfig{Link: memory.Link{Delay: 5 * time.Millisecond}})
	bo := BackoffConfig{Base: 200 * time.Millisecond, Max: 5 * time.Second, Factor: 2, Jitter: 0.2}
	a := newNode(t, network, 1, Config{Backoff: bo, StableAfter: time.Second})
	rude := newNode(t, network, 2, Config{})
	a.tell(rude)
	rude.start()
	rude.mgr.Close() // a bare Service
	sub := rude.svc.Subscribe(0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range sub.C() {
			if ev.Type == tendril.EventSessionOpened {
				if s := rude.svc.Session(ev.Peer); s != nil {
					s.Close()
				}
			}
		}
	}()
	defer func() { sub.Close(); <-done }()
	a.start()
	time.Sleep(3 * time.Second)
	a.mgr.Close()
	n := a.log.count(rude.listen)
	// Dials at about 0, .2, .6, 1.4, 3.0 s: 4 in 3 s, 5 with jitter; a dial per round
	// would be dozens.
	t.Logf("%d dials of a peer that closes every session at once, in 3 s", n)
	if n < 3 || n > 5 {
		t.Fatalf("%d dials in 3 s, want 3..5", n)
	}
	st := a.mgr.Status(rude.id)
	if len(st.Attempts) == 0 || !strings.Contains(st.Attempts[len(st.Attempts)-1].Err.Error(), "before it was stable") {
		t.Fatalf("last attempt %+v, want a short session", st.Attempts)
	}
}

// TestKeptPeerReturns: a kept peer, not in the book, is dialled at once, lost when it
// stops, and back within its backoff bound of its restart; its session is protected.
func TestKeptPeerReturns(t *testing.T) {
	network := memory.NewNetwork(memory.NetworkConfig{Link: memory.Link{Delay: 10 * time.Millisecond}})
	kb := BackoffConfig{Base: 100 * time.Millisecond, Max: 800 * time.Millisecond, Factor: 2, Jitter: 0.2}
	a := newNode(t, network, 1, Config{KeptBackoff: kb})
	a.prot = true
	b := newNode(t, network, 2, Config{})
	b.start()
	a.start()
	var (
		mu    sync.Mutex
		types []EventType // kept events seen
	)
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for ev := range a.mgr.Events() {
			if ev.Type == EventKeptConnected || ev.Type == EventKeptLost {
				mu.Lock()
				types = append(types, ev.Type)
				mu.Unlock()
			}
		}
	}()
	seen := func(n int) func() bool {
		return func() bool { mu.Lock(); defer mu.Unlock(); return len(types) >= n }
	}
	if err := a.mgr.KeepConnected(b.id, b.listen); err != nil {
		t.Fatal(err)
	}
	if err := a.mgr.KeepConnected(a.id); !errors.Is(err, ErrInvalidPeer) {
		t.Fatalf("keeping itself: %v", err)
	}
	waitFor(t, 5*time.Second, "kept peer connected", seen(1))
	if s := a.svc.Session(b.id); !a.mgr.Protect(s) {
		t.Fatal("the kept peer's session is not protected")
	}
	if st := a.mgr.Status(b.id); !st.Connected || !st.Kept || !strings.HasPrefix(st.Reason, "connected") {
		t.Fatalf("status %+v", st)
	}

	b.stop()
	time.Sleep(2 * time.Second) // A fails to reach it: its backoff grows to Max
	st := a.mgr.Status(b.id)
	if st.Connected || len(st.Attempts) < 3 {
		t.Fatalf("status while down: %+v", st)
	}
	t.Logf("while down: %s; %d attempts, last %v", st.Reason, len(st.Attempts), st.Attempts[len(st.Attempts)-1].Err)
	b.start()
	took := waitFor(t, 5*time.Second, "kept peer back", func() bool { return a.svc.Session(b.id) != nil })
	// The bound: its longest wait (1.2 * Max), a round's spacing and a dial.
	bound := time.Duration(1.2*float64(kb.Max)) + minRoundGap + 300*time.Millisecond
	t.Logf("kept peer back %v after its restart (bound %v)", took, bound)
	if took > bound {
		t.Fatalf("kept peer back after %v, bound %v", took, bound)
	}
	waitFor(t, 5*time.Second, "kept-connected event", seen(3))
	a.mgr.Close()
	<-collected
	want := []EventType{EventKeptConnected, EventKeptLost, EventKeptConnected}
	if len(types) != len(want) || types[0] != want[0] || types[1] != want[1] || types[2] != want[2] {
		t.Fatalf("kept events %v, want %v", types, want)
	}
}

// TestOutboundShareNotAFailure: dials refused by the Service's outbound admission share
// grow no backoff and record no failure in the book.
func TestOutboundShareNotAFailure(t *testing.T) {
	network := memory.NewNetwork(memory.NetworkConfig{})
	a := newNode(t, network, 1, Config{Interval: 50 * time.Millisecond})
	var peers []*node
	for i := range 6 {
		p := newNode(t, network, 10+i, Config{})
		p.start()
		peers = append(peers, p)
	}
	a.tell(peers...)
	// A Service whose outbound share is 2.
	a.start()
	a.mgr.Close()
	a.svc.Close()
	a.svc = nil
	svc, err := tendril.New(tendril.Config{PrivateKey: a.key, Transports: []transport.Transport{a.log},
		Admission: tendril.Admission{MaxOutbound: 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	mgr, err := New(svc, a.book, Config{Interval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer mgr.Close()
	waitFor(t, 5*time.Second, "2 outbound", func() bool { return len(svc.Sessions()) == 2 })
	time.Sleep(500 * time.Millisecond)
	limited := 0
	for _, p := range peers {
		st := mgr.Status(p.id)
		for _, at := range st.Attempts {
			if errors.Is(at.Err, tendril.ErrConnectionLimit) {
				limited++
			}
		}
		for _, as := range st.Addrs {
			if as.Failures != 0 || !as.NextTry.IsZero() {
				t.Fatalf("%v: address %v has %d failures, next %v, after refusals by the share", p.id, as.Addr, as.Failures, as.NextTry)
			}
		}
		for _, e := range a.book.Addrs(time.Now(), p.id) {
			if e.Failures != 0 {
				t.Fatalf("the book counts %d failures of %v", e.Failures, e.Addr)
			}
		}
	}
	t.Logf("%d dials refused by the outbound share", limited)
	if limited == 0 {
		t.Fatal("no dial met the outbound share: the test tests nothing")
	}
}

// TestCloseCancelsDials: Close returns while a dial hangs in a handshake nobody answers,
// and leaves no goroutine behind (TestMain's goleak check).
func TestCloseCancelsDials(t *testing.T) {
	network := memory.NewNetwork(memory.NetworkConfig{})
	a := newNode(t, network, 1, Config{})
	silent := network.NewTransport()
	ln, err := silent.Listen(context.Background(), ma.StringCast("/memory/2"), transport.ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	ghost := newNode(t, network, 2, Config{})
	a.tell(ghost)
	a.start()
	waitFor(t, 5*time.Second, "dial in progress", func() bool { return a.mgr.Status(ghost.id).Dialing != nil })
	start := time.Now()
	a.mgr.Close()
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Close took %v with a dial hanging", d)
	}
	if st := a.mgr.Status(ghost.id); !strings.Contains(st.Reason, "closed") {
		t.Fatalf("reason after Close: %q", st.Reason)
	}
}

// TestStatusReasons covers the answers a peer without a session gets.
func TestStatusReasons(t *testing.T) {
	network := memory.NewNetwork(memory.NetworkConfig{})
	a := newNode(t, network, 1, Config{Target: 1})
	b := newNode(t, network, 2, Config{})
	c := newNode(t, network, 3, Config{})
	b.start()
	c.start()
	a.tell(b)
	a.start()
	waitFor(t, 5*time.Second, "a connected", func() bool { return a.svc.Session(b.id) != nil })
	if r := a.mgr.Status(c.id).Reason; r != "no address in the book" {
		t.Fatalf("unknown peer: %q", r)
	}
	a.tell(c)
	if r := a.mgr.Status(c.id).Reason; !strings.Contains(r, "outbound slots full (1/1)") {
		t.Fatalf("peer beyond Target: %q", r)
	}
	if r := a.mgr.Status(a.id).Reason; r != "no address in the book" && r != "this node" {
		t.Fatalf("self: %q", r)
	}
	_ = addrbook.GroupMemory
}

// TestRefreshEndsBackoff: a peer the restarted book says failed many times is not
// dialled; news of it (Refresh) makes it due once Base has passed since its last attempt.
func TestRefreshEndsBackoff(t *testing.T) {
	network := memory.NewNetwork(memory.NetworkConfig{})
	bo := BackoffConfig{Base: 100 * time.Millisecond, Max: time.Minute, Factor: 2, Jitter: 0.2}
	a := newNode(t, network, 1, Config{Backoff: bo})
	b := newNode(t, network, 2, Config{})
	b.start()
	a.tell(b)
	now := time.Now()
	a.book.Attempt(now, b.id, b.listen)
	for range 8 {
		a.book.Failed(now, b.id, b.listen, errors.New("earlier run"))
	}
	a.start()
	time.Sleep(400 * time.Millisecond)
	st := a.mgr.Status(b.id)
	if st.Connected || !strings.HasPrefix(st.Reason, "backing off") || a.log.count(b.listen) != 0 {
		t.Fatalf("a peer 8 failures deep was dialled or not reported backing off: %+v", st)
	}
	a.mgr.Refresh(b.id)
	took := waitFor(t, 2*time.Second, "connected after Refresh", func() bool { return a.svc.Session(b.id) != nil })
	t.Logf("connected %v after Refresh (book backoff was %v)", took, Backoff(8, bo, 0.5))
	if s := a.mgr.Status(b.id); len(s.Addrs) != 1 || s.Addrs[0].Failures != 0 {
		t.Fatalf("after success: %+v", s.Addrs)
	}
}

// TestPrune: states of peers the book forgot are dropped at the next prune.
func TestPrune(t *testing.T) {
	network := memory.NewNetwork(memory.NetworkConfig{})
	a := newNode(t, network, 1, Config{})
	dead := newNode(t, network, 2, Config{})
	a.tell(dead)
	a.start()
	waitFor(t, 5*time.Second, "a failed dial", func() bool { return len(a.mgr.Status(dead.id).Attempts) > 0 })
	a.book.Remove(dead.id)
	a.mgr.state.Lock()
	a.mgr.state.pruned = time.Time{}
	a.mgr.state.Unlock()
	a.mgr.wakeUp()
	waitFor(t, 5*time.Second, "state pruned", func() bool {
		a.mgr.state.Lock()
		defer a.mgr.state.Unlock()
		return a.mgr.state.peers.m[dead.id] == nil
	})
}

// TestDialHook: the Manager dials book addresses through Config.Dial when one is set (a
// node routes relay circuits through it), and keeps the session the hook returns.
func TestDialHook(t *testing.T) {
	network := memory.NewNetwork(memory.NetworkConfig{})
	var mu sync.Mutex
	var asked []tendril.Addr
	a := newNode(t, network, 1, Config{})
	b := newNode(t, network, 2, Config{})
	// The book holds an address no transport dials; the hook knows where the peer is.
	alias := ma.StringCast("/memory/777")
	a.book.Add(time.Now(), b.id, []ma.Multiaddr{alias}, addrbook.Source{Kind: addrbook.SourceBootstrap})
	a.cfg.Dial = func(ctx context.Context, addr tendril.Addr) (*tendril.Session, error) {
		mu.Lock()
		asked = append(asked, addr)
		mu.Unlock()
		if !addr.Transport.Equal(alias) {
			return nil, errors.New("unexpected address")
		}
		return a.svc.Dial(ctx, tendril.Addr{Transport: b.listen, Peer: addr.Peer})
	}
	b.start()
	a.start()
	waitFor(t, 10*time.Second, "a's session with b", func() bool { return a.svc.Session(b.id) != nil })
	mu.Lock()
	defer mu.Unlock()
	if len(asked) == 0 || asked[0].Peer != b.id {
		t.Fatalf("the hook was asked %v", asked)
	}
}
