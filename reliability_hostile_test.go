package tendril

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/mux"
	"github.com/tendril-p2p/tendril/protocol"
	"github.com/tendril-p2p/tendril/secio"
)

// Hostile peers: connections that never finish the handshake, random bytes, oversize length
// claims, garbage after a valid handshake, stream floods, negotiations that never finish, a
// peer that never reads, and connection limits. Each test keeps a well-behaved peer talking
// to the same Service and checks that it is not disturbed.

const hostileProto = "/rel"

func hostileConfig(h Handler) Config {
	return Config{
		Protocols:          []Protocol{{Name: hostileProto, Versions: []string{"1.0"}, Handler: h}},
		HandshakeTimeout:   2 * time.Second,
		NegotiationTimeout: 2 * time.Second,
		ShutdownTimeout:    2 * time.Second,
		EventBuffer:        4096, // the tests count events that arrive in bursts of hundreds
		// Hundreds of hostile handshakes at once, each of which must fail for its own
		// reason (not be evicted for a newer one); admission_test.go tests the eviction.
		Admission: Admission{MaxHandshakes: 1024},
	}
}

// hostileService checks the test for leaks (checkNoLeaks), then starts a Service with
// hostileConfig, changed by tune if not nil, and returns it with its checker, its events and
// the address it listens on.
func hostileService(t *testing.T, tune func(*Config)) (*Service, *checker, *eventLog, Addr) {
	t.Helper()
	checkNoLeaks(t)
	box := newChecker()
	cfg := hostileConfig(box)
	if tune != nil {
		tune(&cfg)
	}
	srv := newService(t, cfg)
	return srv, box, collectEvents(srv), listen(t, srv)
}

// goodPeer is a well-behaved peer connected to srv with the protocol open; chat sends n
// verified messages and waits for them.
type goodPeer struct {
	svc  *Service
	sess *Session
	srv  *Service
	box  *checker // the server's checker
	sent int
}

func newGoodPeer(t *testing.T, srv *Service, srvBox *checker, addr Addr) *goodPeer {
	t.Helper()
	svc := newService(t, hostileConfig(newChecker()))
	sess, err := svc.Dial(context.Background(), addr)
	if err != nil {
		t.Fatalf("good peer dial: %v", err)
	}
	if err := sess.OpenProtocol(context.Background(), hostileProto); err != nil {
		t.Fatalf("good peer open: %v", err)
	}
	return &goodPeer{svc: svc, sess: sess, srv: srv, box: srvBox}
}

func (g *goodPeer) chat(t *testing.T, n int) {
	t.Helper()
	if err := sendSeq(g.sess, hostileProto, g.sent, g.sent+n, 1000); err != nil {
		t.Fatalf("good peer send: %v", err)
	}
	g.sent += n
	srvSess := g.srv.Session(g.svc.ID())
	if srvSess == nil {
		t.Fatal("the server dropped the good peer")
	}
	g.box.waitCount(t, srvSess, g.sent)
	g.box.assertClean(t)
}

func dialTCP(t *testing.T, addr Addr) net.Conn { return dialTCPFrom(t, addr, "") }

// dialTCPFrom dials addr from the loopback address src ("": the system's choice).
func dialTCPFrom(t *testing.T, addr Addr, src string) net.Conn {
	t.Helper()
	if src == "" && testTransport != "tcp" {
		return dialTest(t, addr)
	}
	_, hp, err := addr.hostPort()
	if err != nil {
		t.Fatal(err)
	}
	d := net.Dialer{Timeout: 10 * time.Second}
	if src != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(src)}
	}
	c, err := d.Dial("tcp", hp)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitClosedByPeer reads from c until the peer closes it (EOF or reset), within timeout.
func waitClosedByPeer(c net.Conn, timeout time.Duration) error {
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return err
	}
	return nil
}

func isHandshakeFailure(want error) func(Event) bool {
	return func(e Event) bool { return e.Type == EventHandshakeFailed && errors.Is(e.Err, want) }
}

// TestHostileSlowloris: 500 connections open TCP and never finish the handshake (400 send
// nothing, 100 trickle a ClientHello one byte per second); a good peer still connects and chats,
// and the server closes every slow connection when its handshake timeout expires.
func TestHostileSlowloris(t *testing.T) {
	needTCP(t)
	const slow, trickle = 500, 100
	srv, box, log, addr := hostileService(t, func(cfg *Config) { cfg.MaxConnections = slow + 10 })

	conns := make([]net.Conn, slow)
	for i := range conns {
		conns[i] = dialTCP(t, addr)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range trickle {
		c := conns[i]
		wg.Go(func() { trickleHello(c, time.Second, stop) })
	}
	// While all of them hold a handshake slot, a good peer connects and chats.
	g := newGoodPeer(t, srv, box, addr)
	g.chat(t, 20)

	// Every slow connection is closed by the server once the handshake timeout expires.
	var closed atomic.Int32
	var rg sync.WaitGroup
	for _, c := range conns {
		rg.Add(1)
		go func() {
			defer rg.Done()
			if waitClosedByPeer(c, srv.cfg.HandshakeTimeout+30*time.Second) == nil {
				closed.Add(1)
			}
		}()
	}
	rg.Wait()
	close(stop)
	wg.Wait()
	for _, c := range conns {
		c.Close()
	}
	if n := int(closed.Load()); n != slow {
		t.Fatalf("%d of %d slow connections closed by the server", n, slow)
	}
	log.waitCount(t, "handshake timeouts", slow, isHandshakeFailure(secio.ErrHandshakeTimeout))
	g.chat(t, 20)
	if n := len(srv.Sessions()); n != 1 {
		t.Fatalf("%d sessions, want only the good peer's", n)
	}
}

// TestHostileBytesBeforeHandshake: random bytes, zero and oversize length prefixes (up to
// 4 GiB claimed) are refused as invalid handshake messages, without allocating what they
// claim, while a good peer keeps chatting.
func TestHostileBytesBeforeHandshake(t *testing.T) {
	needTCP(t)
	srv, box, log, addr := hostileService(t, nil)
	g := newGoodPeer(t, srv, box, addr)

	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 64<<10)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	inputs := [][]byte{
		random,
		{0, 0, 0, 0},                         // empty message
		{0, 0, 0x10, 0x01},                   // 4097 bytes, one above the limit
		{0x80, 0, 0, 0},                      // 2 GiB
		{0xff, 0xff, 0xff, 0xff},             // 4 GiB
		{0, 0, 0, 8, 9, 9, 9, 9, 9, 9, 9, 9}, // a well-sized message of an unknown type
	}
	const rounds = 40
	heap0 := liveHeap()
	var wg sync.WaitGroup
	for r := range rounds {
		for _, in := range inputs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := dialTCP(t, addr)
				defer c.Close()
				c.Write(in)
				if err := waitClosedByPeer(c, 30*time.Second); err != nil {
					t.Errorf("round %d: server kept a connection that sent %x...: %v", r, in[:4], err)
				}
			}()
		}
	}
	wg.Wait()
	grown := int64(liveHeap()) - int64(heap0)
	log.waitCount(t, "invalid handshake messages", rounds*len(inputs), isHandshakeFailure(secio.ErrInvalidMessage))
	t.Logf("heap growth after %d hostile connections: %d KiB", rounds*len(inputs), grown>>10)
	if grown > 16<<20 {
		t.Fatalf("heap grew by %d MiB", grown>>20)
	}
	g.chat(t, 20)
}

// rawPeer is a hand-driven client: a real secio handshake over a TCP connection whose
// reading can be stopped, optionally a mux session on top.
type rawPeer struct {
	tcp  net.Conn // TCP, or the suite's transport
	gate *gateConn
	sc   *secio.Conn
	ms   *mux.Session
}

// gateConn is a net.Conn whose Read blocks, once stopped, until the conn is closed: a peer
// that never reads again.
type gateConn struct {
	net.Conn
	stopped chan struct{}
	closed  chan struct{}
	once    sync.Once
	stop1   sync.Once
}

func (g *gateConn) Read(p []byte) (int, error) {
	select {
	case <-g.stopped:
		<-g.closed
		return 0, net.ErrClosed
	default:
	}
	return g.Conn.Read(p)
}

func (g *gateConn) stopReading() { g.stop1.Do(func() { close(g.stopped) }) }

func (g *gateConn) Close() error {
	g.once.Do(func() { close(g.closed) })
	return g.Conn.Close()
}

func handshakeRaw(t *testing.T, addr Addr) *rawPeer { return handshakeRawFrom(t, addr, "") }

// handshakeRawFrom is handshakeRaw from the loopback address src.
func handshakeRawFrom(t *testing.T, addr Addr, src string) *rawPeer {
	t.Helper()
	key, err := secio.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	tcp := dialTCPFrom(t, addr, src)
	gate := &gateConn{Conn: tcp, stopped: make(chan struct{}), closed: make(chan struct{})}
	sc, err := secio.Client(context.Background(), gate, &secio.Config{
		PrivateKey: key, ExpectedPeer: addr.Peer, MaxFrameSize: mux.MaxFrameSize(nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	p := &rawPeer{tcp: tcp, gate: gate, sc: sc}
	t.Cleanup(p.close)
	return p
}

func (p *rawPeer) startMux(t *testing.T) {
	t.Helper()
	cfg := mux.DefaultConfig()
	cfg.MaxStreams = 1 << 20
	cfg.KeepAliveInterval = -1
	ms, err := mux.Client(p.sc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.ms = ms
}

// openNegotiated opens a stream and negotiates hostileProto on it, as a good peer would.
func (p *rawPeer) openNegotiated(t *testing.T) *mux.Stream {
	t.Helper()
	st, err := p.ms.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := protocol.Negotiate(context.Background(), st, hostileProto, []string{"1.0"}); err != nil {
		t.Fatal(err)
	}
	return st
}

func (p *rawPeer) close() {
	if p.ms != nil {
		p.ms.Close()
	}
	p.sc.Close()
	p.gate.Close()
}

// TestHostileAfterHandshake: a peer that completes a valid handshake and then sends garbage
// in clear, an oversize frame length, garbage inside valid encrypted frames, or a protocol
// message that claims 4 GiB: only its session (or stream) ends, with the right error.
func TestHostileAfterHandshake(t *testing.T) {
	srv, box, log, addr := hostileService(t, nil)
	g := newGoodPeer(t, srv, box, addr)

	closedWith := func(p *rawPeer, want error) func(Event) bool {
		id := p.sc.LocalPeer()
		return func(e Event) bool {
			return e.Type == EventSessionClosed && e.Peer == id && errors.Is(e.Err, want)
		}
	}
	t.Run("clear-garbage", func(t *testing.T) {
		p := handshakeRaw(t, addr)
		p.tcp.Write([]byte{0, 0, 0, 40}) // a well-sized frame that is not sealed
		p.tcp.Write(make([]byte, 40))
		log.waitFor(t, "auth failure", closedWith(p, secio.ErrAuthFailed))
	})
	t.Run("frame-4GiB", func(t *testing.T) {
		p := handshakeRaw(t, addr)
		p.tcp.Write([]byte{0xff, 0xff, 0xff, 0xff})
		log.waitFor(t, "frame too large", closedWith(p, secio.ErrFrameTooLarge))
	})
	t.Run("encrypted-garbage", func(t *testing.T) {
		p := handshakeRaw(t, addr)
		p.sc.Write([]byte("this is not a yamux header, nor anything else"))
		log.waitFor(t, "mux protocol error", closedWith(p, mux.ErrProtocol))
	})
	t.Run("message-4GiB", func(t *testing.T) {
		p := handshakeRaw(t, addr)
		p.startMux(t)
		st := p.openNegotiated(t)
		heap0 := liveHeap()
		st.Write([]byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3})
		id := p.sc.LocalPeer()
		log.waitFor(t, "message too large", func(e Event) bool {
			return e.Type == EventProtocolError && e.Peer == id && errors.Is(e.Err, protocol.ErrMessageTooLarge)
		})
		if grown := int64(liveHeap()) - int64(heap0); grown > 8<<20 {
			t.Fatalf("a 4 GiB claim grew the heap by %d MiB", grown>>20)
		}
	})
	g.chat(t, 20)
	// Only the message-4GiB session may remain (just its stream failed), besides the good one.
	if n := len(srv.Sessions()); n > 2 {
		t.Fatalf("%d sessions left", n)
	}
}

// TestHostileStreams: a peer opens streams as fast as it can and never negotiates, or
// starts negotiations and never finishes them (some one byte per second). The stream limits
// and the negotiation timeout bound what it costs; the good peer keeps chatting.
func TestHostileStreams(t *testing.T) {
	srv, box, log, addr := hostileService(t, nil)
	g := newGoodPeer(t, srv, box, addr)
	g0 := countGoroutines()

	t.Run("flood", func(t *testing.T) {
		p := handshakeRaw(t, addr)
		p.startMux(t)
		heap0 := liveHeap()
		var opened, refused int
		for range 5000 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			st, err := p.ms.OpenStream(ctx)
			cancel()
			if err != nil {
				refused++
				continue
			}
			opened++
			st.Write([]byte{0x54}) // a first byte of a header, then nothing
		}
		g.chat(t, 20) // during the flood
		grown := int64(liveHeap()) - int64(heap0)
		t.Logf("flood: %d streams opened, %d refused locally; server heap +%d KiB", opened, refused, grown>>10)
		if grown > 64<<20 {
			t.Fatalf("heap grew by %d MiB", grown>>20)
		}
		// Every stream the server accepted times out in negotiation (or was reset by a
		// limit), or the session is closed for the streams it kept opening beyond the
		// limits, and its goroutines end.
		log.waitCount(t, "negotiation timeouts or the session closed as misbehaving", 1, func(e Event) bool {
			return e.Type == EventNegotiationFailed && errors.Is(e.Err, protocol.ErrNegotiationTimeout) ||
				e.Type == EventSessionClosed && errors.Is(e.Err, mux.ErrPeerMisbehaving)
		})
		waitGoroutines(t, g0+40)
	})
	t.Run("unfinished", func(t *testing.T) {
		p := handshakeRaw(t, addr)
		p.startMux(t)
		id := p.sc.LocalPeer()
		const n = 100
		var streams []*mux.Stream
		for i := range n {
			st, err := p.ms.OpenStream(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			streams = append(streams, st)
			if i%2 == 0 {
				st.Write([]byte{0x54, 0x4e, 1}) // half a header
			} else {
				// Announce the stream without a byte of request: a Read sends its opening.
				st.SetReadDeadline(time.Now().Add(time.Millisecond))
				st.Read(make([]byte, 1))
				st.SetReadDeadline(time.Time{})
			}
		}
		// One stream trickles a valid request one byte per second.
		req := []byte{0x54, 0x4e, 0x01, 0x01, 0x00, 0x09, 4, '/', 'r', 'e', 'l', 1, 3, '1', '.', '0'}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := range req {
				if _, err := streams[1].Write(req[i : i+1]); err != nil {
					return
				}
				time.Sleep(time.Second)
			}
		}()
		log.waitCount(t, "negotiation timeouts", n, func(e Event) bool {
			return e.Type == EventNegotiationFailed && e.Peer == id && errors.Is(e.Err, protocol.ErrNegotiationTimeout)
		})
		p.close()
		<-done
		g.chat(t, 20)
	})
	waitGoroutines(t, g0+40)
}

func countGoroutines() int {
	time.Sleep(50 * time.Millisecond)
	return runtime.NumGoroutine()
}

// waitGoroutines waits until at most n goroutines run.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		g := runtime.NumGoroutine()
		if g <= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, want at most %d", g, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestHostileNonReader: a peer negotiates a protocol and then never reads. The server's
// sends block (ErrSessionBlocked) once its queue is full, its memory stays bounded, and its
// other sessions keep working.
func TestHostileNonReader(t *testing.T) {
	srv, box, log, addr := hostileService(t, func(cfg *Config) {
		cfg.SendQueueBytes = 1 << 20
		cfg.MaxMessageSize = 64 << 10
	})
	g := newGoodPeer(t, srv, box, addr)

	p := handshakeRaw(t, addr)
	p.startMux(t)
	p.openNegotiated(t)
	p.gate.stopReading()
	id := p.sc.LocalPeer()
	sess := waitProtocol(t, srv, id, hostileProto)

	heap0 := liveHeap()
	msg := make([]byte, 32<<10)
	sent := sendUntilBlocked(t, sess, hostileProto, msg, 100000) // 3 GiB if nothing pushed back
	// Let the writer push what it can into windows and socket buffers, then try again.
	time.Sleep(500 * time.Millisecond)
	for range 1000 {
		if sess.Send(hostileProto, msg) != nil {
			break
		}
		sent++
	}
	if q := sess.QueuedBytes(); q > srv.cfg.SendQueueBytes {
		t.Fatalf("queued %d bytes, bound %d", q, srv.cfg.SendQueueBytes)
	}
	grown := int64(liveHeap()) - int64(heap0)
	t.Logf("non-reader: %d KiB accepted before blocking, heap +%d KiB", sent*len(msg)>>10, grown>>10)
	if grown > 16<<20 {
		t.Fatalf("heap grew by %d MiB for a peer that reads nothing", grown>>20)
	}
	if _, ok := log.find(func(e Event) bool { return e.Type == EventSessionBlocked && e.Peer == id }); !ok {
		t.Fatal("no session-blocked event")
	}
	g.chat(t, 20)
}
