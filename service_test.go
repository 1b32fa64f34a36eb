package tendril

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/protocol"
	"github.com/tendril-p2p/tendril/secio"
)

func TestTwoPeersExchange(t *testing.T) {
	ba, bb := newInbox(), newInbox()
	a := newService(t, Config{Protocols: []Protocol{echoProto("/test", ba)}})
	b := newService(t, Config{Protocols: []Protocol{echoProto("/test", bb)}})
	addr := listen(t, b)
	if addr.Peer != b.ID() {
		t.Fatalf("listen address %s lacks the peer ID", addr)
	}
	ctx := context.Background()
	sess := dial(t, a, addr)
	if sess.Peer() != b.ID() || !sess.Secure() || sess.Direction() != Outbound {
		t.Fatalf("session: peer %s secure %v dir %v", sess.Peer(), sess.Secure(), sess.Direction())
	}
	if err := sess.OpenProtocol(ctx, "/test"); err != nil {
		t.Fatal(err)
	}
	if err := a.Send(b.ID(), "/test", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	bb.waitFor(t, "message at b", func() bool { return len(bb.msgs) == 1 })
	if got := string(bb.msgs[0]); got != "hello" {
		t.Fatalf("b got %q", got)
	}
	// b answers on the same stream, found by a's peer ID.
	bs := b.Session(a.ID())
	if bs == nil || bs.Direction() != Inbound {
		t.Fatal("b has no inbound session with a")
	}
	if err := b.Send(a.ID(), "/test", []byte("world")); err != nil {
		t.Fatal(err)
	}
	ba.waitFor(t, "message at a", func() bool { return len(ba.msgs) == 1 })
	if got := string(ba.msgs[0]); got != "world" {
		t.Fatalf("a got %q", got)
	}
	if v := sess.Protocols(); len(v) != 1 || v[0].Version != "1.0" || !v[0].Outbound {
		t.Fatalf("protocols: %+v", v)
	}
}

func TestDialWrongPeerID(t *testing.T) {
	a := newService(t, Config{})
	b := newService(t, Config{})
	addr := listen(t, b)
	other, err := secio.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Dial(context.Background(), addr.WithPeer(other.PeerID()))
	if !errors.Is(err, secio.ErrPeerIDMismatch) {
		t.Fatalf("dial with wrong peer ID: %v, want ErrPeerIDMismatch", err)
	}
	if !waitEvent(t, a, EventPeerIDMismatch) {
		t.Fatal("no peer-id-mismatch event")
	}
	// Without /p2p/ the dial succeeds and learns the ID from the handshake.
	noID := addr
	noID.Peer = secio.PeerID{}
	sess := dial(t, a, noID)
	if sess.Peer() != b.ID() {
		t.Fatal("wrong peer learned")
	}
}

func TestSelfDial(t *testing.T) {
	a := newService(t, Config{})
	addr := listen(t, a)
	if _, err := a.Dial(context.Background(), addr); !errors.Is(err, secio.ErrSelfDial) {
		t.Fatalf("self dial with ID: %v", err)
	}
	addr.Peer = secio.PeerID{}
	if _, err := a.Dial(context.Background(), addr); !errors.Is(err, secio.ErrSelfDial) {
		t.Fatalf("self dial without ID: %v", err)
	}
}

func TestVersionNegotiationMatrix(t *testing.T) {
	cases := []struct {
		local, remote []string
		want          string
		err           error
	}{
		{[]string{"1.0"}, []string{"1.0"}, "1.0", nil},
		{[]string{"1.0", "1.1"}, []string{"1.0", "1.1"}, "1.1", nil},
		{[]string{"1.0", "1.1"}, []string{"1.0"}, "1.0", nil},
		{[]string{"9.0", "10.0"}, []string{"9.0", "10.0"}, "10.0", nil},
		{[]string{"2.0"}, []string{"1.0"}, "", protocol.ErrNoCommonVersion},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.local, tc.remote), func(t *testing.T) {
			ba, bb := newInbox(), newInbox()
			a := newService(t, Config{Protocols: []Protocol{echoProto("/v", ba, tc.local...)}})
			b := newService(t, Config{Protocols: []Protocol{echoProto("/v", bb, tc.remote...)}})
			sess := dial(t, a, listen(t, b))
			err := sess.OpenProtocol(context.Background(), "/v")
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("got %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ba.waitFor(t, "connected", func() bool { return ba.connected == 1 })
			bb.waitFor(t, "connected", func() bool { return bb.connected == 1 })
			if ba.versions[0] != tc.want || bb.versions[0] != tc.want {
				t.Fatalf("versions %v %v, want %s", ba.versions, bb.versions, tc.want)
			}
		})
	}
}

func TestUnknownProtocol(t *testing.T) {
	a := newService(t, Config{Protocols: []Protocol{echoProto("/only-a", newInbox())}})
	b := newService(t, Config{Protocols: []Protocol{echoProto("/only-b", newInbox())}})
	sess := dial(t, a, listen(t, b))
	err := sess.OpenProtocol(context.Background(), "/only-a")
	if !errors.Is(err, protocol.ErrUnknownProtocol) {
		t.Fatalf("got %v, want protocol.ErrUnknownProtocol", err)
	}
	if !waitEvent(t, b, EventNegotiationFailed) {
		t.Fatal("acceptor reported no negotiation failure")
	}
	if err := sess.OpenProtocol(context.Background(), "/nowhere"); !errors.Is(err, ErrUnknownProtocol) {
		t.Fatalf("unregistered locally: %v", err)
	}
}

func TestOrderingTenThousand(t *testing.T) {
	const n = 10000
	sess, bb, _, _ := echoPair(t, "/seq")
	ctx := context.Background()
	for i := range n {
		if err := sess.SendContext(ctx, "/seq", digestMsg(i, 40)); err != nil {
			t.Fatal(err)
		}
	}
	bb.waitFor(t, "all messages", func() bool { return len(bb.msgs) == n })
	for i, m := range bb.msgs {
		if !checkDigest(m) || string(m[32:40]) != fmt.Sprintf("%08d", i) {
			t.Fatalf("message %d out of order or corrupt: %q", i, m[32:40])
		}
	}
}

func TestMessageSizes(t *testing.T) {
	sess, bb, _, _ := echoPair(t, "/size")
	sizes := []int{1, 2, 100, 1 << 10, 64 << 10, 1<<20 + 7, 4 << 20}
	var sent [][]byte
	for _, n := range sizes {
		m := make([]byte, n)
		rand.Read(m)
		sent = append(sent, m)
		if err := sess.SendContext(context.Background(), "/size", m); err != nil {
			t.Fatalf("size %d: %v", n, err)
		}
	}
	if err := sess.Send("/size", make([]byte, 4<<20+1)); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("oversize: %v", err)
	}
	bb.waitFor(t, "all sizes", func() bool { return len(bb.msgs) == len(sizes) })
	for i := range sent {
		if !bytes.Equal(sent[i], bb.msgs[i]) {
			t.Fatalf("message of %d bytes differs", sizes[i])
		}
	}
}

func TestMeshOfTen(t *testing.T) {
	const n = 10
	boxes := make([]*inbox, n)
	svcs := make([]*Service, n)
	addrs := make([]Addr, n)
	for i := range n {
		boxes[i] = newInbox()
		p := echoProto("/mesh", boxes[i])
		p.OpenOnConnect = true
		svcs[i] = newService(t, Config{Protocols: []Protocol{p}})
		addrs[i] = listen(t, svcs[i])
	}
	var wg sync.WaitGroup
	for i := range n {
		for j := i + 1; j < n; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := svcs[i].Dial(context.Background(), addrs[j]); err != nil {
					t.Errorf("dial %d->%d: %v", i, j, err)
				}
			}()
		}
	}
	wg.Wait()
	for i := range n {
		boxes[i].waitFor(t, "mesh connected", func() bool { return boxes[i].connected == n-1 })
	}
	for i := range n {
		sent, err := svcs[i].Broadcast("/mesh", digestMsg(i, 100), nil)
		if err != nil || sent != n-1 {
			t.Fatalf("broadcast from %d: sent %d, %v", i, sent, err)
		}
	}
	for i := range n {
		boxes[i].waitFor(t, "broadcasts", func() bool { return len(boxes[i].msgs) == n-1 })
		for _, m := range boxes[i].msgs {
			if !checkDigest(m) {
				t.Fatal("corrupt broadcast")
			}
		}
	}
}

func TestSimultaneousDialKeepsOneSession(t *testing.T) {
	for round := range 5 {
		a := newService(t, Config{})
		b := newService(t, Config{})
		aa, ab := listen(t, a), listen(t, b)
		var wg sync.WaitGroup
		var sa, sb *Session
		wg.Add(2)
		go func() { defer wg.Done(); sa, _ = a.Dial(context.Background(), ab) }()
		go func() { defer wg.Done(); sb, _ = b.Dial(context.Background(), aa) }()
		wg.Wait()
		if sa == nil || sb == nil {
			t.Fatalf("round %d: a dial failed", round)
		}
		// Eventually each side has exactly one session, and it is the same connection.
		deadline := time.Now().Add(10 * time.Second)
		for {
			la, lb := a.Sessions(), b.Sessions()
			if len(la) == 1 && len(lb) == 1 && la[0].LocalAddr().Transport.Equal(lb[0].RemoteAddr().Transport) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: sessions a=%d b=%d", round, len(la), len(lb))
			}
			time.Sleep(10 * time.Millisecond)
		}
		a.Close()
		b.Close()
	}
}

func TestDisconnectAndReconnect(t *testing.T) {
	ba, bb := newInbox(), newInbox()
	p := echoProto("/r", ba)
	p.OpenOnConnect = true
	pb := echoProto("/r", bb)
	a := newService(t, Config{Protocols: []Protocol{p}})
	b := newService(t, Config{Protocols: []Protocol{pb}})
	addr := listen(t, b)
	for i := range 3 {
		sess := dial(t, a, addr)
		bb.waitFor(t, "connected", func() bool { return bb.connected == i+1 })
		ba.waitFor(t, "connected", func() bool { return ba.connected == i+1 })
		if err := a.Send(b.ID(), "/r", []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		bb.waitFor(t, "message", func() bool { return len(bb.msgs) == i+1 })
		if err := a.Disconnect(b.ID()); err != nil {
			t.Fatal(err)
		}
		<-sess.Done()
		bb.waitFor(t, "disconnected", func() bool { return bb.gone == i+1 })
		if a.Session(b.ID()) != nil {
			t.Fatal("session still listed after Disconnect")
		}
	}
}

// TestMaxConnections: MaxConnections 4 is split into 3 inbound sessions and 1 outbound
// (a quarter); with trimming off, both are hard limits, and neither direction takes the
// other's slots.
func TestMaxConnections(t *testing.T) {
	srv := newService(t, Config{MaxConnections: 4, Admission: Admission{HighWater: -1}})
	addr := listen(t, srv)
	for range 3 {
		if _, err := newService(t, Config{}).Dial(context.Background(), addr); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "three inbound sessions", func() bool { return len(srv.Sessions()) == 3 })
	// The fourth may complete its handshake on its side before the server refuses it.
	newService(t, Config{}).Dial(context.Background(), addr)
	if !waitEvent(t, srv, EventLimitReached) {
		t.Fatal("no limit event")
	}
	if n := len(srv.Sessions()); n != 3 {
		t.Fatalf("%d inbound sessions, limit 3", n)
	}
	if _, err := srv.Dial(context.Background(), listen(t, newService(t, Config{}))); err != nil {
		t.Fatalf("outbound with inbound full: %v", err)
	}
	if _, err := srv.Dial(context.Background(), listen(t, newService(t, Config{}))); !errors.Is(err, ErrConnectionLimit) {
		t.Fatalf("outbound over the limit: %v", err)
	}
}

func TestBackpressureBoundsMemory(t *testing.T) {
	release := make(chan struct{})
	stuck := HandlerFuncs{OnReceived: func(*Context, []byte) { <-release }}
	const queue = 256 << 10
	a := newService(t, Config{
		Protocols:      []Protocol{{Name: "/slow", Versions: []string{"1"}, Handler: HandlerFuncs{}}},
		SendQueueBytes: queue,
		MaxMessageSize: 64 << 10,
	})
	b := newService(t, Config{Protocols: []Protocol{{Name: "/slow", Versions: []string{"1"}, Handler: stuck}}})
	sess := dialOpen(t, a, listen(t, b), "/slow")
	msg := make([]byte, 32<<10)
	sent := sendUntilBlocked(t, sess, "/slow", msg, 10000) // 320 MiB if nothing pushed back
	// SendContext waits, then gives up with ctx; a few more messages may fit as the writer
	// drains into flow-control windows and socket buffers, but that too is bounded.
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		err := sess.SendContext(ctx, "/slow", msg)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		sent++
		if i > 1000 {
			t.Fatal("SendContext never waited on a receiver that does not read")
		}
	}
	if q := sess.QueuedBytes(); q > queue {
		t.Fatalf("queued %d bytes, bound %d", q, queue)
	}
	// Everything accepted sits in the queue, the mux window (1 MiB) or socket buffers.
	if total := sent * len(msg); total > 32<<20 {
		t.Fatalf("accepted %d bytes for a receiver that reads nothing", total)
	}
	t.Logf("accepted %d KiB before blocking", sent*len(msg)>>10)
	close(release)
}

// TestGracefulCloseDeliversInFlight: messages queued before Close all arrive, small ones and
// ones large enough that the secure connection writes their frames behind the caller.
func TestGracefulCloseDeliversInFlight(t *testing.T) {
	for _, tc := range []struct{ n, size int }{{500, 2000}, {40, 100 << 10}} {
		t.Run(fmt.Sprintf("%dx%dB", tc.n, tc.size), func(t *testing.T) {
			sess, bb, a, b := echoPair(t, "/g")
			for i := range tc.n {
				if err := sess.SendContext(context.Background(), "/g", digestMsg(i, tc.size)); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.Close(); err != nil {
				t.Fatalf("graceful close: %v", err)
			}
			bb.waitFor(t, "in-flight messages", func() bool { return len(bb.msgs) == tc.n && bb.gone == 1 })
			for _, m := range bb.msgs {
				if !checkDigest(m) {
					t.Fatal("corrupt message")
				}
			}
			if _, err := a.Dial(context.Background(), b.Addrs()[0]); !errors.Is(err, ErrServiceClosed) {
				t.Fatalf("dial after close: %v", err)
			}
			// Events is closed after Close.
			for range a.Events() {
			}
		})
	}
}

func TestConcurrentProtocols(t *testing.T) {
	const protos, per = 4, 500
	var pa, pb []Protocol
	boxes := make([]*inbox, protos)
	for i := range protos {
		boxes[i] = newInbox()
		name := fmt.Sprintf("/p%d", i)
		pa = append(pa, echoProto(name, newInbox()))
		pb = append(pb, echoProto(name, boxes[i]))
	}
	a := newService(t, Config{Protocols: pa})
	b := newService(t, Config{Protocols: pb})
	sess := dial(t, a, listen(t, b))
	var wg sync.WaitGroup
	for i := range protos {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("/p%d", i)
			if err := sess.OpenProtocol(context.Background(), name); err != nil {
				t.Error(err)
				return
			}
			for j := range per {
				if err := sess.SendContext(context.Background(), name, digestMsg(j, 300)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for i := range protos {
		boxes[i].waitFor(t, "protocol messages", func() bool { return len(boxes[i].msgs) == per })
	}
}

func TestRawStreamProtocol(t *testing.T) {
	got := make(chan []byte, 1)
	recv := StreamHandlerFunc(func(c *Context, _ string, st net.Conn) {
		if c.Outbound() {
			st.Write([]byte("raw bytes"))
			return
		}
		buf := make([]byte, 64)
		n, _ := st.Read(buf)
		got <- buf[:n]
	})
	p := Protocol{Name: "/raw", Versions: []string{"1"}, StreamHandler: recv}
	a := newService(t, Config{Protocols: []Protocol{p}})
	b := newService(t, Config{Protocols: []Protocol{p}})
	dialOpen(t, a, listen(t, b), "/raw")
	select {
	case m := <-got:
		if string(m) != "raw bytes" {
			t.Fatalf("got %q", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("raw stream data never arrived")
	}
}

func TestLegacyTEA(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 16)
	ba, bb := newInbox(), newInbox()
	p := echoProto("/legacy", ba)
	p.OpenOnConnect = true
	p.AllowLegacyTEA = true
	pb := echoProto("/legacy", bb)
	pb.AllowLegacyTEA = true
	sess, addr := legacyPair(t, key, p, pb)
	if sess.Secure() || !sess.Peer().IsZero() {
		t.Fatal("legacy session must be insecure and anonymous")
	}
	bb.waitFor(t, "legacy connected", func() bool { return bb.connected == 1 })
	ba.waitFor(t, "legacy connected", func() bool { return ba.connected == 1 })
	if err := sess.Send("/legacy", []byte("old school")); err != nil {
		t.Fatal(err)
	}
	bb.waitFor(t, "legacy message", func() bool { return len(bb.msgs) == 1 })
	// A node without legacy mode refuses to speak it.
	plain := newService(t, Config{})
	if _, err := plain.DialLegacy(context.Background(), addr); !errors.Is(err, ErrLegacyDisabled) {
		t.Fatalf("legacy dial without config: %v", err)
	}
	// A secure dial to a legacy listener fails cleanly.
	if _, err := plain.Dial(context.Background(), addr); err == nil {
		t.Fatal("secure dial to a legacy listener succeeded")
	}
}

// TestBroadcastUnknownProtocol: a misspelt protocol name is an error, as for Send, not "sent
// to nobody".
func TestBroadcastUnknownProtocol(t *testing.T) {
	a := newService(t, Config{Protocols: []Protocol{echoProto("/known", newInbox())}})
	n, err := a.Broadcast("/unknown", []byte("x"), nil)
	if n != 0 || !errors.Is(err, ErrUnknownProtocol) {
		t.Fatalf("Broadcast on an unregistered protocol: %d, %v", n, err)
	}
	if n, err := a.Broadcast("/known", []byte("x"), nil); n != 0 || err != nil {
		t.Fatalf("Broadcast with no session: %d, %v", n, err)
	}
}
