package tendril

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/internal/testutil"
	"github.com/tendril-p2p/tendril/mux"
	"github.com/tendril-p2p/tendril/secio"
)

// Admission: strangers that fill a node's budgets (idle authenticated Sybils, silent or
// trickling sockets, from one IP or spread over many) must not lock out a good peer nor
// stop the node dialling out. Linux routes all of 127/8 to loopback, so the attackers dial
// from 127.0.2.x and the good peer from 127.0.0.1: different IPs and different /24s.

// sybilIP is the i-th attacker address (127.0.2.1, 127.0.2.2, ...); with spread false every
// attacker uses the first.
func sybilIP(i int, spread bool) net.IP {
	if !spread {
		i = 0
	}
	return net.IPv4(127, 0, 2+byte(i/250), 1+byte(i%250))
}

func dialFrom(addr Addr, ip net.IP) (*net.TCPConn, error) {
	_, hp, err := addr.hostPort()
	if err != nil {
		return nil, err
	}
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", hp)
	if err != nil {
		return nil, err
	}
	return c.(*net.TCPConn), nil
}

// sybil completes a real handshake from ip and runs a mux on top (which answers the
// server's keepalive pings), then opens nothing: an idle authenticated peer. It returns
// nil if the server refused it.
func sybil(t *testing.T, addr Addr, ip net.IP) *rawPeer {
	t.Helper()
	key, err := secio.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	tcp, err := dialFrom(addr, ip)
	if err != nil {
		return nil
	}
	gate := &gateConn{Conn: tcp, stopped: make(chan struct{}), closed: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sc, err := secio.Client(ctx, gate, &secio.Config{PrivateKey: key, ExpectedPeer: addr.Peer, MaxFrameSize: mux.MaxFrameSize(nil)})
	if err != nil {
		tcp.Close()
		return nil
	}
	p := &rawPeer{tcp: tcp, gate: gate, sc: sc}
	t.Cleanup(p.close)
	p.startMux(t)
	return p
}

// admissionConfig is a node with a small budget (as issue 15 found it: MaxConnections 32)
// whose loopback addresses are subject to the per-IP caps.
func admissionConfig(box *checker) Config {
	cfg := hostileConfig(box)
	cfg.MaxConnections = 32 // 24 inbound, 8 outbound
	cfg.HandshakeTimeout = 20 * time.Second
	cfg.Admission = Admission{Unlimited: []netip.Prefix{}} // hostileConfig's aside, the defaults
	return cfg
}

// goodPeerRoundTrip is the acceptance check: a good peer from 127.0.0.1 connects, opens the
// protocol and has a message echoed, within 2 s; then the node dials out.
func goodPeerRoundTrip(t *testing.T, srv *Service, box *checker, addr Addr) {
	t.Helper()
	start := time.Now()
	g := newGoodPeer(t, srv, box, addr)
	g.chat(t, 1)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("good peer round trip took %v, want under 2 s", d)
	} else {
		t.Logf("good peer connected and round-tripped in %v", d.Round(time.Millisecond))
	}
	other := newService(t, Config{})
	if _, err := srv.Dial(context.Background(), listen(t, other)); err != nil {
		t.Fatalf("the node cannot dial out: %v", err)
	}
}

// TestAdmissionIdleSybils: idle authenticated Sybils fill the inbound sessions, from one IP
// (the per-IP cap stops them at 8) and from 40 IPs (the high watermark trims the oldest idle
// ones); a good peer still gets in and round-trips within 2 s, and the node dials out.
func TestAdmissionIdleSybils(t *testing.T) {
	needTCP(t)
	for _, spread := range []bool{false, true} {
		t.Run(map[bool]string{false: "one-ip", true: "many-ips"}[spread], func(t *testing.T) {
			checkNoLeaks(t)
			box := newChecker()
			srv := newService(t, admissionConfig(box))
			log := collectEvents(srv)
			addr := listen(t, srv)
			admitted := 0
			for i := range 40 {
				if sybil(t, addr, sybilIP(i, spread)) != nil {
					admitted++
				}
			}
			// Let the Sybils' sessions age past the grace period: they are idle, not new.
			time.Sleep(DefaultGracePeriod + 200*time.Millisecond)
			t.Logf("%d of 40 Sybil handshakes completed; server has %d sessions", admitted, len(srv.Sessions()))
			goodPeerRoundTrip(t, srv, box, addr)
			if !spread {
				log.waitFor(t, "per-IP refusal", func(e Event) bool {
					var le *LimitError
					return e.Type == EventLimitReached && errors.As(e.Err, &le) && le.Limit == "inbound sessions per IP"
				})
			} else {
				log.waitFor(t, "trimmed session", func(e Event) bool {
					return e.Type == EventSessionClosed && errors.Is(e.Err, ErrTrimmed)
				})
			}
		})
	}
}

// TestAdmissionSilentSockets: sockets that never send a byte, or trickle a ClientHello one byte
// every 500 ms, take all the handshake slots they may: from one IP its 4, from one /24 its
// 16 (newcomers then take the slots of the subnet's oldest), from 80 /24s all 64 (newcomers
// take the oldest's). A good peer from another /24 gets in within 2 s, and the node dials
// out.
func TestAdmissionSilentSockets(t *testing.T) {
	needTCP(t)
	spreads := []struct {
		name  string
		ip    func(i int) net.IP
		holds int // handshake slots the sockets hold
	}{
		{"one-ip", func(int) net.IP { return net.IPv4(127, 0, 2, 1) }, DefaultMaxHandshakesPerIP},
		{"one-subnet", func(i int) net.IP { return net.IPv4(127, 0, 2, byte(1+i)) }, DefaultMaxHandshakesPerSubnet},
		{"many-subnets", func(i int) net.IP { return net.IPv4(127, 0, byte(10+i), 1) }, DefaultMaxHandshakes},
	}
	for _, trickle := range []bool{false, true} {
		for _, sp := range spreads {
			t.Run(map[bool]string{false: "silent", true: "trickle"}[trickle]+"-"+sp.name, func(t *testing.T) {
				checkNoLeaks(t)
				box := newChecker()
				srv := newService(t, admissionConfig(box))
				log := collectEvents(srv)
				addr := listen(t, srv)
				stop := make(chan struct{})
				var wg sync.WaitGroup
				var conns []*net.TCPConn
				for i := range DefaultMaxHandshakes + 16 {
					c, err := dialFrom(addr, sp.ip(i))
					if err != nil {
						continue
					}
					conns = append(conns, c)
					if trickle {
						wg.Go(func() { trickleHello(c, 500*time.Millisecond, stop) })
					}
				}
				defer func() {
					close(stop)
					for _, c := range conns {
						c.Close()
					}
					wg.Wait()
				}()
				waitUntil(t, "the sockets holding their slots", func() bool {
					srv.mu.Lock()
					defer srv.mu.Unlock()
					return srv.adm.ledger.Handshakes() == sp.holds
				})
				goodPeerRoundTrip(t, srv, box, addr)
				if sp.name != "one-ip" {
					log.waitFor(t, "evicted handshake", isHandshakeFailure(ErrHandshakeEvicted))
				} else {
					log.waitFor(t, "per-IP handshake refusal", func(e Event) bool {
						var le *LimitError
						return e.Type == EventLimitReached && errors.As(e.Err, &le) && le.Limit == "handshakes per IP"
					})
				}
			})
		}
	}
}

// TestAdmissionLimits: inbound and outbound budgets are separate, the per-IP cap refuses
// before the handshake with a typed error, and the high watermark trims idle sessions but
// never protected ones nor ones with a protocol open.
func TestAdmissionLimits(t *testing.T) {
	needTCP(t)
	t.Run("outbound-separate", func(t *testing.T) {
		srv := newService(t, Config{Admission: Admission{MaxInbound: 2, MaxOutbound: 1, HighWater: -1}})
		addr := listen(t, srv)
		for range 2 {
			if _, err := newService(t, Config{}).Dial(context.Background(), addr); err != nil {
				t.Fatal(err)
			}
		}
		waitUntil(t, "two inbound", func() bool { return len(srv.Sessions()) == 2 })
		if _, err := newService(t, Config{}).Dial(context.Background(), addr); err == nil {
			waitUntil(t, "third refused", func() bool { return len(srv.Sessions()) == 2 })
		}
		// Inbound full, yet the node dials out; its one outbound slot then is taken.
		if _, err := srv.Dial(context.Background(), listen(t, newService(t, Config{}))); err != nil {
			t.Fatalf("dial out with inbound full: %v", err)
		}
		_, err := srv.Dial(context.Background(), listen(t, newService(t, Config{})))
		var le *LimitError
		if !errors.As(err, &le) || le.Limit != "outbound sessions" || !errors.Is(err, ErrConnectionLimit) {
			t.Fatalf("second outbound dial: %v", err)
		}
	})
	t.Run("trim-protect", func(t *testing.T) {
		var protected atomic.Pointer[secio.PeerID]
		cfg := Config{
			Protocols: []Protocol{echoProto("/e", newInbox())},
			Admission: Admission{MaxInbound: 6, HighWater: 6, LowWater: 3, GracePeriod: -1, Protect: func(s *Session) bool {
				p := protected.Load()
				return p != nil && *p == s.Peer()
			}},
		}
		srv := newService(t, cfg)
		log := collectEvents(srv)
		addr := listen(t, srv)
		var peers []*Service
		for i := range 5 {
			c := newService(t, Config{Protocols: []Protocol{echoProto("/e", newInbox())}})
			sess := dial(t, c, addr)
			switch i {
			case 0:
				id := c.ID()
				protected.Store(&id)
			case 1:
				if err := sess.OpenProtocol(context.Background(), "/e"); err != nil {
					t.Fatal(err)
				}
				waitProtocol(t, srv, c.ID(), "/e")
			}
			peers = append(peers, c)
			time.Sleep(5 * time.Millisecond) // distinct opening times: oldest first is checked
		}
		// The sixth reaches the high mark: down to 3, taking idle unprotected ones, oldest
		// first: peers 2, 3 and 4 go; 0 (protected), 1 (protocol open) and the newest stay.
		last := newService(t, Config{})
		if _, err := last.Dial(context.Background(), addr); err != nil {
			t.Fatal(err)
		}
		for _, i := range []int{2, 3, 4} {
			id := peers[i].ID()
			log.waitFor(t, "trim", func(e Event) bool {
				return e.Type == EventSessionClosed && e.Peer == id && errors.Is(e.Err, ErrTrimmed)
			})
		}
		time.Sleep(100 * time.Millisecond)
		for _, i := range []int{0, 1} {
			if srv.Session(peers[i].ID()) == nil {
				t.Fatalf("peer %d trimmed", i)
			}
		}
		if srv.Session(last.ID()) == nil {
			t.Fatal("the newcomer was trimmed")
		}
	})
	t.Run("per-ip", func(t *testing.T) {
		srv := newService(t, Config{Admission: Admission{Unlimited: []netip.Prefix{}, MaxInboundPerIP: 2}})
		log := collectEvents(srv)
		addr := listen(t, srv)
		for range 2 {
			if p := sybil(t, addr, sybilIP(0, false)); p == nil {
				t.Fatal("refused within the per-IP cap")
			}
		}
		waitUntil(t, "two sessions", func() bool { return len(srv.Sessions()) == 2 })
		if p := sybil(t, addr, sybilIP(0, false)); p != nil {
			// The handshake can complete on the client before the server refuses it.
			waitUntil(t, "third closed", func() bool { return len(srv.Sessions()) == 2 })
		}
		log.waitFor(t, "per-IP limit", func(e Event) bool { return e.Type == EventLimitReached && errors.Is(e.Err, ErrConnectionLimit) })
		// Another IP is not affected.
		if p := sybil(t, addr, sybilIP(1, true)); p == nil {
			t.Fatal("another IP refused")
		}
	})
	t.Run("idle", func(t *testing.T) {
		srv := newService(t, Config{Protocols: []Protocol{echoProto("/e", newInbox())}, Admission: Admission{IdleTimeout: time.Second}})
		log := collectEvents(srv)
		addr := listen(t, srv)
		idle := newService(t, Config{})
		busy := newService(t, Config{Protocols: []Protocol{echoProto("/e", newInbox())}})
		if _, err := idle.Dial(context.Background(), addr); err != nil {
			t.Fatal(err)
		}
		dialOpen(t, busy, addr, "/e")
		id := idle.ID()
		log.waitFor(t, "idle close", func(e Event) bool {
			return e.Type == EventSessionClosed && e.Peer == id && errors.Is(e.Err, ErrIdleSession)
		})
		time.Sleep(200 * time.Millisecond)
		if srv.Session(busy.ID()) == nil {
			t.Fatal("a session with a protocol open was closed as idle")
		}
	})
}

// banGater refuses one address and one peer.
type banGater struct {
	ip   netip.Addr
	peer atomic.Pointer[secio.PeerID]
}

func (g *banGater) GateAddr(_ Direction, remote netip.AddrPort) error {
	if remote.Addr() == g.ip {
		return errors.New("banned address")
	}
	return nil
}

func (g *banGater) GatePeer(_ Direction, id secio.PeerID, _ netip.AddrPort) error {
	if p := g.peer.Load(); p != nil && *p == id {
		return errors.New("banned peer")
	}
	return nil
}

// TestGater: a banned address is reset before the handshake, a banned peer is closed after
// it (inbound) or its Dial fails (outbound); both with EventGated wrapping ErrGated.
func TestGater(t *testing.T) {
	needTCP(t)
	g := &banGater{ip: netip.MustParseAddr("127.0.2.9")}
	srv := newService(t, Config{Admission: Admission{Gater: g}})
	log := collectEvents(srv)
	addr := listen(t, srv)
	if p := sybil(t, addr, net.ParseIP("127.0.2.9")); p != nil {
		t.Fatal("banned address completed a handshake")
	}
	log.waitFor(t, "address gated", func(e Event) bool { return e.Type == EventGated && errors.Is(e.Err, ErrGated) })
	banned := newService(t, Config{})
	id := banned.ID()
	g.peer.Store(&id)
	banned.Dial(context.Background(), addr) // the handshake completes; the server closes the session
	log.waitFor(t, "peer gated", func(e Event) bool { return e.Type == EventGated && e.Peer == id && errors.Is(e.Err, ErrGated) })
	if srv.Session(id) != nil {
		t.Fatal("banned peer registered")
	}
	if _, err := srv.Dial(context.Background(), listen(t, banned)); !errors.Is(err, ErrGated) {
		t.Fatalf("dial to a banned peer: %v", err)
	}
	if _, err := newService(t, Config{}).Dial(context.Background(), addr); err != nil {
		t.Fatalf("unbanned peer: %v", err)
	}
}

// TestAdmissionConfigValidate: bad admission settings wrap ErrInvalidConfig.
func TestAdmissionConfigValidate(t *testing.T) {
	needTCP(t)
	bad := []Config{
		{Admission: Admission{MaxInbound: -1}},
		{Admission: Admission{MaxInboundPerIP: -2}},
		{Admission: Admission{HighWater: 10, LowWater: 10}},
		{Admission: Admission{MaxInbound: 4, HighWater: 5}},
		{Admission: Admission{IdleTimeout: -2}},
		{Admission: Admission{Unlimited: []netip.Prefix{{}}}},
		{Admission: Admission{MaxHandshakesPerSubnet: -2}},
		{Admission: Admission{HandshakeRate: -2}},
		{Admission: Admission{HandshakeBurst: -1}},
		{HandlerExitTimeout: -1},
	}
	for i, c := range bad {
		if _, err := New(c); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("case %d: %v, want ErrInvalidConfig", i, err)
		}
	}
	for _, c := range []Config{
		{Admission: Admission{HighWater: -1, MaxInboundPerIP: -1, IdleTimeout: -1, GracePeriod: -1}},
		{Admission: Admission{MaxHandshakesPerSubnet: -1, HandshakeRate: -1}},
		{MaxConnections: 1},
	} {
		if _, err := New(c); err != nil {
			t.Errorf("%+v: %v", c.Admission, err)
		}
	}
}

// TestHelloConn: the watch under an inbound handshake keeps it silent until the last byte
// of the dialer's first message has been read through it, however the bytes arrive; then
// the subnet's handshake rate is charged, and a refusal fails that Read with the
// *LimitError. After that it passes reads through, and deadlines and CloseWrite reach the
// socket.
func TestHelloConn(t *testing.T) {
	needTCP(t)
	srv := newService(t, Config{Admission: Admission{Unlimited: []netip.Prefix{}, HandshakeRate: 1, HandshakeBurst: 1}})
	silent := func(ad *admitted) bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return ad.t.Handshake().Silent()
	}
	watch := func(remote string) (net.Conn, net.Conn, *admitted) {
		_, ad, err := srv.admitInbound(context.Background(), netip.MustParseAddrPort(remote), false)
		if err != nil {
			t.Fatal(err)
		}
		dialer, accepted := testutil.TCPPair(t)
		t.Cleanup(func() { dialer.Close(); accepted.Close() })
		return dialer, srv.watchHello(accepted, &ad), &ad
	}
	msg := append([]byte{0, 0, 0, 6}, "hello!"...)
	dialer, c, ad := watch("10.1.2.3:4000")
	buf := make([]byte, 64)
	for _, piece := range [][]byte{msg[:2], msg[2:5], msg[5:9]} { // up to one byte short
		if _, err := dialer.Write(piece); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf[:len(piece)]); err != nil {
			t.Fatal(err)
		}
		if !silent(ad) {
			t.Fatalf("spoke after %d of %d bytes", len(piece), len(msg))
		}
	}
	if _, err := dialer.Write(append(msg[9:], "and more"...)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, buf[:1+len("and more")]); err != nil {
		t.Fatal(err)
	}
	if silent(ad) {
		t.Fatal("still silent once the whole first message was read")
	}
	if c.(*helloConn).w != nil {
		t.Fatal("still watching after the first message")
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	var ne net.Error
	if _, err := c.Read(buf); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read past its deadline: %v", err)
	}
	if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if n, err := dialer.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("after CloseWrite the dialer read %d, %v; want EOF", n, err)
	}

	// The subnet's one handshake is used: the next first message from it is refused.
	dialer, c, ad = watch("10.1.2.4:4000")
	if _, err := dialer.Write(msg); err != nil {
		t.Fatal(err)
	}
	n, err := io.ReadFull(c, buf[:len(msg)])
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != "new handshakes per second per subnet" || n >= len(msg) {
		t.Fatalf("a first message over the subnet's rate: read %d, %v", n, err)
	}
	if !silent(ad) {
		t.Fatal("a refused handshake counts as spoken")
	}
}
