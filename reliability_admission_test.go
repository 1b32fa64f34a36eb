//go:build linux

package tendril

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"
	"golang.org/x/sys/unix"

	"github.com/tendril-p2p/tendril/internal/lab"
	"github.com/tendril-p2p/tendril/mux"
	"github.com/tendril-p2p/tendril/protocol"
	"github.com/tendril-p2p/tendril/secio"
	"github.com/tendril-p2p/tendril/transport"
)

// Handshake slots under a steady stream of silent sockets (issue 26, item 6): 1,260 TCP
// connections that never send a byte, from 20 source addresses, while a good peer dials 20
// times from another address. Before the admission ledger, 64 slots with only a per-IP cap,
// and eviction of the oldest handshake only once it had run a second, let a stream of young
// silent sockets keep every slot: 3 of 20 good dials succeeded. Loopback is not exempt here
// (Admission.Unlimited empty), so the caps apply to 127/8 and to the test's own IPv6 /64.

// floodEcho is the protocol the good peer opens: a raw stream echoed back.
const floodEcho = "/flood-echo"

// floodConfig is a node with the default admission limits, loopback not exempt.
func floodConfig() Config {
	return Config{
		Protocols: []Protocol{{Name: floodEcho, Versions: []string{"1"}, StreamHandler: StreamHandlerFunc(func(_ *Context, _ string, st net.Conn) {
			_, _ = io.Copy(st, st)
		})}},
		EventBuffer: 4096,
		Admission:   Admission{Unlimited: []netip.Prefix{}},
	}
}

// floodGoodDial is one legitimate dial from src: TCP, the secio handshake, a mux, the echo
// protocol negotiated, and one 64-byte round trip, all within timeout. The dialer waits
// pause between TCP's connect and its first handshake message, as over a slow or lossy
// link.
func floodGoodDial(addr Addr, src netip.Addr, pause, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, hp, err := addr.hostPort()
	if err != nil {
		return err
	}
	d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0))}
	raw, err := d.DialContext(ctx, "tcp", hp)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	time.Sleep(pause)
	return floodGoodExchange(ctx, raw, addr.Peer)
}

// floodGoodExchange is a good peer's part on a connection to peer: the secio handshake, a
// mux, the echo protocol negotiated, and one 64-byte round trip, within ctx. It closes raw.
func floodGoodExchange(ctx context.Context, raw net.Conn, peer secio.PeerID) error {
	key, err := secio.GenerateKey()
	if err != nil {
		raw.Close()
		return err
	}
	sc, err := secio.Client(ctx, raw, &secio.Config{PrivateKey: key, ExpectedPeer: peer, MaxFrameSize: mux.MaxFrameSize(nil)})
	if err != nil {
		return err
	}
	defer sc.Close()
	cfg := mux.DefaultConfig()
	cfg.KeepAliveInterval = -1
	ms, err := mux.Client(sc, cfg)
	if err != nil {
		return err
	}
	defer ms.Close()
	st, err := ms.OpenStream(ctx)
	if err != nil {
		return fmt.Errorf("open stream: %w", err)
	}
	defer st.Close()
	if _, err := protocol.Negotiate(ctx, st, floodEcho, []string{"1"}); err != nil {
		return err
	}
	dl, _ := ctx.Deadline()
	_ = st.SetDeadline(dl)
	msg := bytes.Repeat([]byte{0x5a}, 64)
	if _, err := st.Write(msg); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	back := make([]byte, len(msg))
	if _, err := io.ReadFull(st, back); err != nil {
		return fmt.Errorf("read echo: %w", err)
	}
	if !bytes.Equal(back, msg) {
		return fmt.Errorf("echo differs")
	}
	return nil
}

// silentFlood opens perSource silent TCP connections to addr from each source in turn,
// one goroutine per source (started by spawn), spread evenly over span, and keeps every one
// open, never writing, until close.
type silentFlood struct {
	mu    sync.Mutex
	conns []net.Conn
	reset int // connects the node refused at once
	wg    sync.WaitGroup
}

// startSilentFlood starts the flood. source(i, j) is the address of source i's j-th
// connection; spawn runs a function on a new goroutine (in a network namespace, for one).
func startSilentFlood(addr Addr, sources, perSource int, span time.Duration, source func(i, j int) netip.Addr, spawn func(func())) *silentFlood {
	f := &silentFlood{}
	_, hp, _ := addr.hostPort()
	every := span / time.Duration(perSource)
	for i := range sources {
		f.wg.Add(1)
		spawn(func() {
			defer f.wg.Done()
			// Sources start out of step, so that the stream is steady.
			next := time.Now().Add(every * time.Duration(i) / time.Duration(sources))
			for j := range perSource {
				time.Sleep(time.Until(next))
				next = next.Add(every)
				d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(source(i, j), 0)), Timeout: 5 * time.Second}
				c, err := d.Dial("tcp", hp)
				f.mu.Lock()
				if err != nil {
					f.reset++
				} else {
					f.conns = append(f.conns, c)
				}
				f.mu.Unlock()
			}
		})
	}
	return f
}

// opened is how many connections the flood has opened so far.
func (f *silentFlood) opened() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.conns) + f.reset
}

// close waits for the flood to have made all its connections, then closes them.
func (f *silentFlood) close() {
	f.wg.Wait()
	for _, c := range f.conns {
		c.Close()
	}
}

// floodTarget starts the node under attack, listening on listen (in spawn's namespace).
func floodTarget(t *testing.T, listen Addr, spawn func(func())) (*Service, *eventLog, Addr) {
	t.Helper()
	srv := newService(t, floodConfig())
	log := collectEvents(srv)
	var addr Addr
	var err error
	spawn1(spawn, func() { addr, err = srv.Listen(context.Background(), listen) })
	if err != nil {
		t.Fatal(err)
	}
	return srv, log, addr
}

// goodDials starts n dials to addr from src(i) (floodGoodDial), one every interval, waits
// for them all, and returns how many succeeded and why the others failed.
func goodDials(addr Addr, src func(i int) netip.Addr, pause time.Duration, n int, every time.Duration, spawn func(func())) (ok int, fails []string) {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		spawn(func() {
			defer wg.Done()
			errs[i] = floodGoodDial(addr, src(i), pause, 5*time.Second)
		})
		time.Sleep(every)
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil {
			ok++
		} else {
			fails = append(fails, fmt.Sprintf("dial %d: %v", i, err))
		}
	}
	return ok, fails
}

// limitRefusals counts the node's limit refusals by limit.
func limitRefusals(log *eventLog) map[string]int {
	n := map[string]int{}
	log.count(func(e Event) bool {
		var le *LimitError
		if e.Type == EventLimitReached && errors.As(e.Err, &le) {
			n[le.Limit] += max(e.Count, 1)
		}
		return false
	})
	return n
}

// floodCase is one spread of an attack.
type floodCase struct {
	name   string
	listen Addr                      // where the node listens
	source func(i, j int) netip.Addr // the j-th connection of attacker source i
	good   netip.Addr                // the good peer's address
	slow   func(i int) netip.Addr    // if set, the i-th of 20 peers on a slow link (slowPause), also dialling
}

// slowPause is how long a slow good peer waits between its connect and its first message.
const slowPause = 500 * time.Millisecond

// runSilentFlood runs the acceptance check of one case: during 1,260 silent connections
// from 20 sources, at least 18 of 20 good dials succeed (and as many of a slow peer's, if
// the case has one).
func runSilentFlood(t *testing.T, fc floodCase, spawn func(func())) {
	const sources, perSource = 20, 63 // 1,260 connections
	srv, log, addr := floodTarget(t, fc.listen, spawn)
	flood := startSilentFlood(addr, sources, perSource, 4*time.Second, fc.source, spawn)
	defer flood.close()
	// The stream is steady once the first sockets hold the slots.
	for flood.opened() < sources*perSource/5 {
		time.Sleep(10 * time.Millisecond)
	}
	type result struct {
		who   string
		ok    int
		fails []string
	}
	var results []result
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for _, g := range []struct {
		who   string
		src   func(i int) netip.Addr
		pause time.Duration
	}{{"good", func(int) netip.Addr { return fc.good }, 0}, {"slow", fc.slow, slowPause}} {
		if g.src == nil {
			continue
		}
		wg.Go(func() {
			ok, fails := goodDials(addr, g.src, g.pause, 20, 120*time.Millisecond, spawn)
			mu.Lock()
			results = append(results, result{g.who, ok, fails})
			mu.Unlock()
		})
	}
	wg.Wait()
	good := time.Since(start)
	flood.close()
	st := srv.Stats()
	t.Logf("good dials done in %v while %d silent connections were opened (%d reset at once); "+
		"server: limit refusals %v, %d handshakes failed (%d aborted, %d timed out, %d other)",
		good.Round(time.Millisecond), flood.opened(), flood.reset, limitRefusals(log),
		st.HandshakesFailed.Total(), st.HandshakesFailed.Aborted, st.HandshakesFailed.Timeout, st.HandshakesFailed.Other)
	for _, r := range results {
		t.Logf("%s peer: %d of 20 dials succeeded", r.who, r.ok)
		for _, f := range r.fails {
			t.Logf("%s peer: %s", r.who, f)
		}
	}
	for _, r := range results {
		if r.ok < 18 {
			t.Errorf("%d of 20 %s dials succeeded during the flood, want at least 18", r.ok, r.who)
		}
	}
}

// spawn1 runs f on a goroutine started by spawn and waits for it.
func spawn1(spawn func(func()), f func()) {
	done := make(chan struct{})
	spawn(func() {
		defer close(done)
		f()
	})
	<-done
}

// TestAdmissionSilentFlood: 1,260 silent sockets from 20 addresses, in one /24 with the
// good peer's (127.0.0.2-21, good peer 127.0.0.100, as the issue measured it) and from 20
// /24s; then (in a network namespace of the test's own) from one IPv6 /64, a fresh address
// per connection (the good peer in another /64). At least 18 of 20 good dials succeed. Where the flood comes from one subnet, 20 peers from another subnet whose first
// message follows their connect by 500 ms (a slow or lossy link) dial too: silent for that
// long, they survive only because the flood cannot evict outside its own subnet's share of
// the slots (Admission.MaxHandshakesPerSubnet). (From 20 subnets, the flood holds every
// slot, and such a peer is evicted: see docs/RELIABILITY.md.)
func TestAdmissionSilentFlood(t *testing.T) {
	goSpawn := func(f func()) { go f() }
	for _, fc := range []floodCase{
		{
			name:   "v4-one-/24",
			listen: loopbackAddr,
			source: func(i, _ int) netip.Addr { return netip.AddrFrom4([4]byte{127, 0, 0, byte(2 + i)}) },
			good:   netip.MustParseAddr("127.0.0.100"),
			slow:   func(i int) netip.Addr { return netip.AddrFrom4([4]byte{127, 0, 1, byte(100 + i)}) },
		},
		{
			name:   "v4-twenty-/24s",
			listen: loopbackAddr,
			source: func(i, _ int) netip.Addr { return netip.AddrFrom4([4]byte{127, 0, byte(2 + i), 1}) },
			good:   netip.MustParseAddr("127.0.0.100"),
		},
	} {
		t.Run(fc.name, func(t *testing.T) {
			checkNoLeaks(t)
			runSilentFlood(t, fc, goSpawn)
		})
	}
	t.Run("v6-one-/64", func(t *testing.T) {
		ns := newNetns(t, "2001:db8:1::/64", "2001:db8:2::/64", "2001:db8:3::/64")
		checkNoLeaks(t)
		runSilentFlood(t, floodCase{
			listen: MustParseAddr("/ip6/2001:db8:1::1/tcp/0"),
			source: func(i, j int) netip.Addr { return v6Host(0x2001_0db8_0001_0000, 0xa7<<56|uint64(i)<<16|uint64(j)) },
			good:   netip.MustParseAddr("2001:db8:2::100"),
			slow:   func(i int) netip.Addr { return v6Host(0x2001_0db8_0003_0000, 0x100+uint64(i)) },
		}, ns.spawn)
	})
}

// v6Host is the IPv6 address with the given /64 prefix and interface identifier.
func v6Host(prefix, host uint64) netip.Addr {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], prefix)
	binary.BigEndian.PutUint64(b[8:], host)
	return netip.AddrFrom16(b)
}

// capturedHello returns a real ClientHello, length prefix included, as a dialer sends it
// first on every connection: what an attacker replays.
func capturedHello(t *testing.T) []byte {
	t.Helper()
	key, err := secio.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	a, b := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		secio.Client(context.Background(), a, &secio.Config{PrivateKey: key})
	}()
	var hdr [4]byte
	if _, err := io.ReadFull(b, hdr[:]); err != nil {
		t.Fatal(err)
	}
	msg := make([]byte, 4+binary.BigEndian.Uint32(hdr[:]))
	copy(msg, hdr[:])
	if _, err := io.ReadFull(b, msg[4:]); err != nil {
		t.Fatal(err)
	}
	b.Close()
	<-done
	return msg
}

// helloReplay replays one ClientHello on as many connections as it can: each of its
// workers connects, sends the hello, waits for the node's first answer (its ServerHello:
// the key exchange and signature done) and closes, over and over until stop.
type helloReplay struct {
	attempts, answered atomic.Int64
	stop               chan struct{}
	wg                 sync.WaitGroup
}

func startHelloReplay(addr Addr, hello []byte, workers int, source func(i, j int) netip.Addr, spawn func(func())) *helloReplay {
	r := &helloReplay{stop: make(chan struct{})}
	_, hp, _ := addr.hostPort()
	for i := range workers {
		r.wg.Add(1)
		spawn(func() {
			defer r.wg.Done()
			for j := 0; ; j++ {
				select {
				case <-r.stop:
					return
				default:
				}
				r.attempts.Add(1)
				d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(source(i, j), 0)), Timeout: 2 * time.Second}
				c, err := d.Dial("tcp", hp)
				if err != nil {
					continue
				}
				_ = c.SetDeadline(time.Now().Add(2 * time.Second))
				if _, err := c.Write(hello); err == nil {
					var one [1]byte
					if n, _ := c.Read(one[:]); n == 1 {
						r.answered.Add(1)
					}
				}
				abortConn(c)
			}
		})
	}
	return r
}

func (r *helloReplay) close() {
	close(r.stop)
	r.wg.Wait()
}

// TestAdmissionReplayedHellos: 20 workers replay one captured ClientHello from one /24
// (20 addresses) and from one IPv6 /64 (a fresh address per connection), closing each
// connection as soon as the node has answered, for 3 s. The node answers (runs the key
// exchange and signs for) at most HandshakeBurst + HandshakeRate per second of them from
// that subnet, and a good peer from another subnet gets through every time.
func TestAdmissionReplayedHellos(t *testing.T) {
	const attack = 3 * time.Second
	hello := capturedHello(t)
	run := func(t *testing.T, fc floodCase, spawn func(func())) {
		srv, log, addr := floodTarget(t, fc.listen, spawn)
		r := startHelloReplay(addr, hello, 20, fc.source, spawn)
		start := time.Now()
		ok, fails := goodDials(addr, func(int) netip.Addr { return fc.good }, 0, 20, attack/20, spawn)
		for time.Since(start) < attack {
			time.Sleep(10 * time.Millisecond)
		}
		r.close()
		elapsed := time.Since(start)
		answered := r.answered.Load()
		bound := int64(DefaultHandshakeBurst) + int64(DefaultHandshakeRate)*int64(elapsed/time.Second+1)
		t.Logf("%d of %d replayed hellos answered in %v (bound %d), limit refusals %v; %d of 20 good dials succeeded; server: %d handshakes failed",
			answered, r.attempts.Load(), elapsed.Round(time.Millisecond), bound,
			limitRefusals(log), ok, srv.Stats().HandshakesFailed.Total())
		for _, f := range fails {
			t.Log(f)
		}
		if answered > bound {
			t.Errorf("the node answered %d replayed hellos from one subnet in %v, want at most %d", answered, elapsed.Round(time.Millisecond), bound)
		}
		if ok < 20 {
			t.Errorf("%d of 20 good dials from another subnet succeeded", ok)
		}
	}
	t.Run("v4-one-/24", func(t *testing.T) {
		checkNoLeaks(t)
		run(t, floodCase{
			listen: loopbackAddr,
			source: func(i, _ int) netip.Addr { return netip.AddrFrom4([4]byte{127, 0, 3, byte(1 + i)}) },
			good:   netip.MustParseAddr("127.0.0.100"),
		}, func(f func()) { go f() })
	})
	t.Run("v6-one-/64", func(t *testing.T) {
		ns := newNetns(t, "2001:db8:1::/64", "2001:db8:2::/64")
		checkNoLeaks(t)
		run(t, floodCase{
			listen: MustParseAddr("/ip6/2001:db8:1::1/tcp/0"),
			source: func(i, j int) netip.Addr { return v6Host(0x2001_0db8_0001_0000, 0xa7<<56|uint64(i)<<32|uint64(j)) },
			good:   netip.MustParseAddr("2001:db8:2::100"),
		}, ns.spawn)
	})
}

// burstListener hands out the connections queued in it at once, then waits: a listener
// whose backlog held a burst, which the accept loop drains faster than the handshakes it
// starts can read.
type burstListener struct {
	conns   chan net.Conn
	addr    net.Addr
	drained chan struct{} // closed when Accept finds the queue empty
	closed  chan struct{}
	once    [2]sync.Once
}

func (l *burstListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	default:
	}
	l.once[0].Do(func() { close(l.drained) })
	<-l.closed
	return nil, net.ErrClosed
}

func (l *burstListener) Close() error {
	l.once[1].Do(func() { close(l.closed) })
	return nil
}

func (l *burstListener) Addr() net.Addr { return l.addr }

func (l *burstListener) Multiaddr() ma.Multiaddr { return transport.FromNetAddr(l.addr) }

func (l *burstListener) Upgrade(_ context.Context, c net.Conn) (net.Conn, error) { return c, nil }

// TestAdmissionAcceptBurst: a dialer whose first message has arrived, accepted just before
// 100 silent sockets of its own /24 in one burst (a backlog drained with a single P, so
// that no handshake reads before the accept loop is done), keeps its slot and completes:
// the accept loop saw its message, so it had spoken from the start, and the evictions the
// burst makes all fall on silent sockets. Without that look it is the first evicted.
func TestAdmissionAcceptBurst(t *testing.T) {
	needTCP(t)
	checkNoLeaks(t)
	srv := newService(t, floodConfig())
	log := collectEvents(srv)
	real, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer real.Close()
	dialFrom := func(ip netip.Addr) (client, server net.Conn) {
		d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(ip, 0))}
		c, err := d.Dial("tcp", real.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := real.Accept()
		if err != nil {
			t.Fatal(err)
		}
		return c, s
	}
	helloLen := len(capturedHello(t)) // the good dialer's, with the same defaults
	bl := &burstListener{conns: make(chan net.Conn, 101), addr: real.Addr(), drained: make(chan struct{}), closed: make(chan struct{})}
	goodClient, goodServer := dialFrom(netip.AddrFrom4([4]byte{127, 0, 6, 1}))
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- floodGoodExchange(ctx, goodClient, srv.ID())
	}()
	// Its ClientHello is in the server end's receive queue before the accept loop sees it.
	if !eventually(5*time.Second, time.Millisecond, nil, func() bool { return receiveQueue(goodServer) >= helloLen }) {
		t.Fatal("the good dialer's first message never arrived")
	}
	bl.conns <- goodServer
	var silent []net.Conn
	for i := range 100 {
		c, s := dialFrom(netip.AddrFrom4([4]byte{127, 0, 6, byte(2 + i)}))
		silent = append(silent, c)
		bl.conns <- s
	}
	defer func() {
		for _, c := range silent {
			c.Close()
		}
	}()
	l := &listener{ln: bl, addr: addrFromNet(bl.Addr(), srv.ID())}
	srv.mu.Lock()
	srv.listeners[l] = struct{}{}
	srv.wg.Add(1)
	srv.mu.Unlock()
	prev := runtime.GOMAXPROCS(1)
	restore := sync.OnceFunc(func() { runtime.GOMAXPROCS(prev) })
	defer restore()
	go srv.acceptLoop(l)
	<-bl.drained
	restore()
	if err := <-done; err != nil {
		t.Fatalf("the dialer that had spoken lost its slot to the burst: %v", err)
	}
	// 100 silent sockets after the dialer, 16 slots for their /24: 85 evictions (84 if the
	// dialer's handshake ended before the burst did, freeing its slot).
	log.waitCount(t, "evictions", 84, isHandshakeFailure(ErrHandshakeEvicted))
}

// receiveQueue returns how many bytes c has received and not yet read.
func receiveQueue(c net.Conn) int {
	rc, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		return -1
	}
	n := -1
	_ = rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
	return n
}

// netns is a lab host of the test's own (internal/lab): loopback up, the given IPv6
// prefixes routed to it (AnyIP: every address in them is local) and, in it alone,
// binding to addresses not configured on an interface allowed. Goroutines enter it with
// spawn. The lab's cleanup, registered before the test's leak checks, deletes it after them.
type netns struct {
	host *lab.Host
}

func newNetns(t *testing.T, prefixes ...string) *netns {
	t.Helper()
	h := lab.New(t).Host("flood")
	for _, p := range prefixes {
		if _, err := h.Run(t.Context(), "ip", "-6", "route", "add", "local", p, "dev", "lo"); err != nil {
			t.Fatal(err)
		}
	}
	h.Sysctl("net.ipv6.ip_nonlocal_bind", "1")
	return &netns{host: h}
}

// spawn runs f on a new goroutine inside the namespace. Sockets f creates belong to it;
// goroutines f starts do not run in it.
func (n *netns) spawn(f func()) {
	go func() {
		if err := n.host.Do(f); err != nil {
			panic(err)
		}
	}()
}
