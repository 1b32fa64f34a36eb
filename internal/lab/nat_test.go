//go:build linux

package lab

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// natKinds are the NAT routers the tests compare.
var natKinds = []NATConfig{
	{}, // EIM/APDF: Linux masquerade as it is
	{Filtering: AddressDependentFiltering},
	FullCone,  // EIM/EIF
	Symmetric, // EDM/APDF
}

// dropWait is how long a dial waits before a test concludes that its SYNs were dropped.
// A reset or an ICMP error would end it at once; a SYN that gets through is answered in
// a millisecond.
const dropWait = 1500 * time.Millisecond

// reuse lets sockets share a local port, as a hole-punching node's listener and dials do.
func reuse(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); serr == nil {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}
	})
	if err != nil {
		return err
	}
	return serr
}

// dialFrom connects from port on h (0: any) to addr with the sockets shared.
func dialFrom(ctx context.Context, h *Host, port int, addr string) (net.Conn, error) {
	var c net.Conn
	var err error
	d := &net.Dialer{LocalAddr: &net.TCPAddr{Port: port}, Control: reuse}
	if derr := h.Do(func() { c, err = d.DialContext(ctx, "tcp4", addr) }); derr != nil {
		return nil, derr
	}
	return c, err
}

// listenShared listens on port on h with the port shared, closed when the test ends.
func listenShared(t *testing.T, h *Host, port int) net.Listener {
	t.Helper()
	var ln net.Listener
	var err error
	lc := &net.ListenConfig{Control: reuse}
	if derr := h.Do(func() { ln, err = lc.Listen(context.Background(), "tcp4", net.JoinHostPort("", strconv.Itoa(port))) }); derr != nil {
		t.Fatal(derr)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// requireDropped dials addr from h and requires the dial to time out: no answer at all,
// neither a connection nor a reset nor an ICMP error.
func requireDropped(ctx context.Context, t *testing.T, h *Host, addr, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, dropWait)
	defer cancel()
	c, err := dialFrom(ctx, h, 0, addr)
	if err == nil {
		c.Close()
		t.Errorf("%s: %s reached %s", what, h, addr)
		return
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("%s: dial from %s to %s: %v, want a timeout (dropped, not refused)", what, h, addr, err)
	}
}

// natHome is a NAT router of the given kind with one host b behind it, on a lab with
// public hosts s1 and s2 that listen and echo on port 7000.
type natHome struct {
	lab    *Lab
	lan    *Segment
	inet   *Segment
	nat    *NAT
	b      *Host
	s1, s2 *Host
	from1  <-chan net.Addr // what s1's and s2's listeners see
	from2  <-chan net.Addr
}

func newNATHome(t *testing.T, cfg NATConfig) *natHome {
	t.Helper()
	l := New(t)
	lan, inet := l.LAN("home"), l.Public("inet")
	n := l.NATRouter("nat", lan, inet, cfg)
	b := l.Host("b", lan)
	b.DefaultVia(n.Host)
	s1, s2 := l.Host("s1", inet), l.Host("s2", inet)
	return &natHome{
		lab: l, lan: lan, inet: inet, nat: n, b: b, s1: s1, s2: s2,
		from1: serveEcho(listen(t, s1, netip.AddrPortFrom(s1.Addr(inet), 7000).String())),
		from2: serveEcho(listen(t, s2, netip.AddrPortFrom(s2.Addr(inet), 7000).String())),
	}
}

// seen returns the address that a public server's listener saw the last connection from.
func seen(t *testing.T, from <-chan net.Addr) netip.AddrPort {
	t.Helper()
	select {
	case a := <-from:
		return netip.MustParseAddrPort(a.String())
	case <-time.After(10 * time.Second):
		t.Fatal("the server saw no connection")
		return netip.AddrPort{}
	}
}

// The mapping: connections from one local port of b to two servers come from the router's
// address and, with endpoint-independent mapping, from the same port, which is b's own;
// with endpoint-dependent mapping each from a port of its own.
func TestNATMapping(t *testing.T) {
	for _, cfg := range natKinds {
		t.Run(cfg.String(), func(t *testing.T) {
			ctx := testContext(t)
			h := newNATHome(t, cfg)
			const port = 40000
			var ext [2]netip.AddrPort
			for i, s := range []*Host{h.s1, h.s2} {
				c, err := dialFrom(ctx, h.b, port, netip.AddrPortFrom(s.Addr(h.inet), 7000).String())
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close() // both stay open: the second may not reuse the first's mapping
				echoOnce(t, c, "mapped")
				ext[i] = seen(t, []<-chan net.Addr{h.from1, h.from2}[i])
				if ext[i].Addr() != h.nat.External() {
					t.Errorf("%s saw %v, want the router's %v", s, ext[i], h.nat.External())
				}
			}
			t.Logf("b:%d is %v towards s1 and %v towards s2", port, ext[0], ext[1])
			if cfg.Mapping == EndpointIndependentMapping {
				if ext[0].Port() != port || ext[1].Port() != port {
					t.Errorf("external ports %d and %d, want b's own %d towards both", ext[0].Port(), ext[1].Port(), port)
				}
			} else if ext[0].Port() == ext[1].Port() {
				t.Errorf("one external port %d towards both servers: the mapping is endpoint-independent", ext[0].Port())
			}
		})
	}
}

// The filtering: b listens on a port and has connected from it to s1. A new connection
// to that external port is let in from another port of s1 by address-dependent and
// endpoint-independent filtering, from s2 only by endpoint-independent filtering; all
// else is dropped without an answer, as is everything before b has sent anything,
// everything sent to the router's own address, and what a neighbour routes to the LAN.
func TestNATFiltering(t *testing.T) {
	for _, cfg := range natKinds {
		t.Run(cfg.String(), func(t *testing.T) {
			ctx := testContext(t)
			h := newNATHome(t, cfg)
			const port = 40000
			accepted := serveEcho(listenShared(t, h.b, port))
			target := netip.AddrPortFrom(h.nat.External(), port).String()
			requireDropped(ctx, t, h.s1, target, "before any mapping")
			// The router itself serves nothing outside, and says nothing either.
			requireDropped(ctx, t, h.s1, netip.AddrPortFrom(h.nat.External(), 22).String(), "to the router")
			// Nor does it forward what a neighbour outside sends straight to the LAN.
			h.s2.Route(h.lan.Prefix(), h.nat.Host)
			requireDropped(ctx, t, h.s2, netip.AddrPortFrom(h.b.Addr(h.lan), port).String(), "routed to the LAN")

			c, err := dialFrom(ctx, h.b, port, netip.AddrPortFrom(h.s1.Addr(h.inet), 7000).String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			echoOnce(t, c, "open the mapping")
			ext := seen(t, h.from1)
			target = ext.String()

			for _, probe := range []struct {
				from *Host
				in   bool
				what string
			}{
				{h.s1, cfg.Filtering != AddressAndPortDependentFiltering, "from the same address, another port"},
				{h.s2, cfg.Filtering == EndpointIndependentFiltering, "from another address"},
			} {
				if !probe.in {
					requireDropped(ctx, t, probe.from, target, probe.what)
					continue
				}
				c, err := dialFrom(ctx, probe.from, 0, target)
				if err != nil {
					t.Errorf("%s: %v, want b to answer", probe.what, err)
					continue
				}
				echoOnce(t, c, "let in")
				c.Close()
				if got := netip.MustParseAddrPort((<-accepted).String()).Addr(); got != probe.from.Addr(h.inet) {
					t.Errorf("%s: b saw %v, want %v", probe.what, got, probe.from.Addr(h.inet))
				}
			}
		})
	}
}

// Hole punching: b and c, each behind a NAT of its own whose outside link is delayed
// 20 ms each way, learn their external addresses from a public server, then dial each other's from their listening ports at the same
// moment. The two SYNs cross (or one is dropped and the other gets through the hole the
// first opened, or, through an endpoint-independent filter, reaches the listener): with
// endpoint-independent mapping on both sides one connection results, with
// endpoint-dependent mapping on both the ports learned are not those used, and both
// dials time out.
func TestNATSimultaneousOpen(t *testing.T) {
	for _, c := range []struct {
		kind NATConfig
		ok   bool
	}{
		{NATConfig{}, true},
		{NATConfig{Filtering: AddressDependentFiltering}, true},
		{FullCone, true},
		{Symmetric, false},
	} {
		t.Run(c.kind.String(), func(t *testing.T) {
			ctx := testContext(t)
			l := New(t)
			inet := l.Public("inet")
			s := l.Host("s", inet)
			observed := serveEcho(listen(t, s, netip.AddrPortFrom(s.Addr(inet), 7000).String()))
			const port = 40000
			var peers [2]*punchPeer
			for i, name := range []string{"b", "c"} {
				lan := l.LAN("lan-" + name)
				n := l.NATRouter("nat-"+name, lan, inet, c.kind)
				n.WAN.Delay(20 * time.Millisecond)
				h := l.Host(name, lan)
				h.DefaultVia(n.Host)
				p := &punchPeer{h: h, accepted: acceptAll(listenShared(t, h, port))}
				o, err := dialFrom(ctx, h, port, netip.AddrPortFrom(s.Addr(inet), 7000).String())
				if err != nil {
					t.Fatal(err)
				}
				defer o.Close()
				echoOnce(t, o, "who am I")
				p.ext = seen(t, observed)
				peers[i] = p
			}
			start := time.Now()
			punch(ctx, peers[0], peers[1], port, 3*time.Second)
			t.Logf("punch ended after %v: %v / %v", time.Since(start), peers[0].err, peers[1].err)
			for _, p := range peers {
				if p.conn != nil {
					defer p.conn.Close()
				}
			}
			if !c.ok {
				for _, p := range peers {
					if p.conn != nil {
						t.Errorf("%s reached %v through a symmetric NAT", p.h, p.conn.RemoteAddr())
					}
				}
				return
			}
			for _, p := range peers {
				if p.conn == nil {
					t.Fatalf("%s: %v", p.h, p.err)
				}
			}
			echoLine := func(from, to net.Conn) {
				t.Helper()
				go func() { _, _ = from.Write([]byte("punched\n")) }()
				to.SetReadDeadline(time.Now().Add(10 * time.Second))
				buf := make([]byte, 8)
				if _, err := io.ReadFull(to, buf); err != nil || string(buf) != "punched\n" {
					t.Errorf("through the punched connection: %q, %v", buf, err)
				}
			}
			echoLine(peers[0].conn, peers[1].conn)
			echoLine(peers[1].conn, peers[0].conn)
		})
	}
}

// punchPeer is one side of a hole punch.
type punchPeer struct {
	h        *Host
	accepted <-chan net.Conn // what the peer's listener accepts
	ext      netip.AddrPort  // as a public server saw it
	conn     net.Conn        // the punched connection, or nil
	err      error           // why there is none
}

// acceptAll hands on every connection ln accepts until ln closes.
func acceptAll(ln net.Listener) <-chan net.Conn {
	ch := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case ch <- c:
			default:
				c.Close()
			}
		}
	}()
	return ch
}

// punch dials a and b at each other's external address from port at the same moment.
// Each ends with the connection it dialled or, if the other's SYN reached its listener
// first (which then makes its own dial fail), with the one its listener accepted from
// the other's external address.
func punch(ctx context.Context, a, b *punchPeer, port int, wait time.Duration) {
	done := make(chan struct{}, 2)
	for _, pair := range [][2]*punchPeer{{a, b}, {b, a}} {
		p, other := pair[0], pair[1]
		go func() {
			defer func() { done <- struct{}{} }()
			dctx, cancel := context.WithTimeout(ctx, wait)
			defer cancel()
			p.conn, p.err = dialFrom(dctx, p.h, port, other.ext.String())
		}()
	}
	<-done
	<-done
	for _, p := range []*punchPeer{a, b} {
		if p.conn != nil {
			continue
		}
		other := a
		if p == a {
			other = b
		}
		select {
		case c := <-p.accepted:
			if netip.MustParseAddrPort(c.RemoteAddr().String()) == other.ext {
				p.conn = c
			} else {
				c.Close()
			}
		default:
		}
	}
}

func TestNATConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg NATConfig
		ok  bool
	}{
		{NATConfig{}, true},
		{FullCone, true},
		{Symmetric, true},
		{NATConfig{Filtering: AddressDependentFiltering, UPnP: true}, true},
		{NATConfig{Mapping: EndpointDependentMapping, Filtering: EndpointIndependentFiltering}, false},
		{NATConfig{Mapping: 7}, false},
		{NATConfig{Filtering: -1}, false},
	} {
		if err := c.cfg.Validate(); (err == nil) != c.ok {
			t.Errorf("%+v: Validate() = %v", c.cfg, err)
		}
	}
}
