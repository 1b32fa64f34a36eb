package tendril

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/secio"
	"github.com/tendril-p2p/tendril/transport"
	"github.com/tendril-p2p/tendril/transport/memory"
)

// TestDialUnsupported: an address no transport handles is refused by Dial and Listen with
// a typed error, before any socket is made.
func TestDialUnsupported(t *testing.T) {
	svc := newService(t, Config{})
	addr := MustParseAddr("/ip4/127.0.0.1/udp/1")
	_, err := svc.Dial(context.Background(), addr)
	if !errors.Is(err, ErrInvalidAddr) || !errors.Is(err, transport.ErrUnsupported) {
		t.Fatalf("Dial(%s): %v, want ErrInvalidAddr and transport.ErrUnsupported", addr, err)
	}
	if _, err := svc.Listen(context.Background(), addr); !errors.Is(err, transport.ErrUnsupported) {
		t.Fatalf("Listen(%s): %v, want transport.ErrUnsupported", addr, err)
	}
}

// servePipe runs a session between dialer and listener over a net.Pipe: ServeConn on the
// listener's end, DialConn (expecting to) on the dialer's. It returns the dialer's session
// and ServeConn's result.
func servePipe(t *testing.T, dialer, listener *Service, to Addr) (*Session, error, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c1, c2 := net.Pipe()
	served := make(chan error, 1)
	go func() {
		_, err := listener.ServeConn(ctx, c2, Inbound)
		served <- err
	}()
	sess, err := dialer.DialConn(ctx, c1, to)
	return sess, err, <-served
}

// TestServeConnPipe: a full session over a net.Pipe, protocols and all; the peer ID in the
// address is verified; admission applies (MaxInbound, with trimming off, is a hard limit).
func TestServeConnPipe(t *testing.T) {
	bb := newInbox()
	listener := newService(t, Config{
		Protocols: []Protocol{echoProto("/echo", bb)},
		Admission: Admission{MaxInbound: 1, HighWater: -1},
	})
	dialer := newService(t, Config{Protocols: []Protocol{{Name: "/echo", Versions: []string{"1.0"}, Handler: newInbox(), OpenOnConnect: true}}})

	stranger, _ := secio.GenerateKey()
	if _, err, _ := servePipe(t, dialer, listener, Addr{Peer: stranger.PeerID()}); !errors.Is(err, secio.ErrPeerIDMismatch) {
		t.Fatalf("DialConn to the wrong peer ID: %v, want secio.ErrPeerIDMismatch", err)
	}

	sess, err, served := servePipe(t, dialer, listener, Addr{Peer: listener.ID()})
	if err != nil || served != nil {
		t.Fatalf("DialConn: %v; ServeConn: %v", err, served)
	}
	if sess.Peer() != listener.ID() || sess.Direction() != Outbound {
		t.Fatalf("session with %s (%v), want %s outbound", sess.Peer(), sess.Direction(), listener.ID())
	}
	if err := sess.Send("/echo", []byte("over a pipe")); err != nil {
		t.Fatal(err)
	}
	bb.waitFor(t, "the message", func() bool { return len(bb.msgs) == 1 && string(bb.msgs[0]) == "over a pipe" })

	other := newService(t, Config{})
	_, err, served = servePipe(t, other, listener, Addr{Peer: listener.ID()})
	if !errors.Is(served, ErrConnectionLimit) {
		t.Fatalf("second inbound session beyond MaxInbound 1: ServeConn %v (DialConn %v), want ErrConnectionLimit", served, err)
	}
}

// TestServeConnUnix: sessions over a Unix socket, with the socket's address reported.
func TestServeConnUnix(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tendril.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Skipf("no Unix sockets here: %v", err)
	}
	defer ln.Close()
	bb := newInbox()
	listener := newService(t, Config{Protocols: []Protocol{echoProto("/echo", bb)}})
	dialer := newService(t, Config{Protocols: []Protocol{echoProto("/echo", newInbox())}})
	served := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		_, err = listener.ServeConn(context.Background(), c, Inbound)
		served <- err
	}()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := dialer.DialConn(context.Background(), c, Addr{Peer: listener.ID()})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if got, want := sess.RemoteAddr().String(), "/unix/"+path+"/p2p/"+listener.ID().String(); got != want {
		t.Fatalf("remote address %s, want %s", got, want)
	}
	if err := sess.OpenProtocol(context.Background(), "/echo"); err != nil {
		t.Fatal(err)
	}
	if err := sess.Send("/echo", []byte("over a unix socket")); err != nil {
		t.Fatal(err)
	}
	bb.waitFor(t, "the message", func() bool { return len(bb.msgs) == 1 })
}

// proxied dials the listener at addr over TCP as a trusted proxy would: a PROXY protocol
// v1 header naming client, then dialer's handshake on the same connection.
func proxied(t *testing.T, dialer *Service, addr Addr, client string, port int) (*Session, error) {
	t.Helper()
	_, hp, err := addr.hostPort()
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", hp)
	if err != nil {
		t.Fatal(err)
	}
	_, lport, _ := net.SplitHostPort(hp)
	if _, err := fmt.Fprintf(c, "PROXY TCP4 %s 127.0.0.1 %d %s\r\n", client, port, lport); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return dialer.DialConn(ctx, c, addr)
}

// TestTrustedProxyHeader: behind a trusted proxy on loopback (exempt from the per-IP caps
// by default), the client a PROXY header names is what admission counts: the ninth session
// from one forwarded address is refused by MaxInboundPerIP (8), while another client
// still gets in; the session reports the client's address. From an untrusted address, the
// same header is not believed: it is read as the handshake, which fails.
func TestTrustedProxyHeader(t *testing.T) {
	needTCP(t)
	trusted := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	srv := newService(t, Config{TrustedProxies: trusted})
	log := collectEvents(srv)
	addr := listen(t, srv)
	for i := range DefaultMaxInboundPerIP {
		sess, err := proxied(t, newService(t, Config{}), addr, "203.0.113.9", 40000+i)
		if err != nil {
			t.Fatalf("session %d from the forwarded client: %v", i, err)
		}
		if sess.Peer() != srv.ID() {
			t.Fatalf("session with %s", sess.Peer())
		}
	}
	waitUntil(t, "the listener's sessions", func() bool { return len(srv.Sessions()) == DefaultMaxInboundPerIP })
	for _, s := range srv.Sessions() {
		if got := s.RemoteAddr().Transport.String(); !strings.HasPrefix(got, "/ip4/203.0.113.9/tcp/400") {
			t.Fatalf("session's remote address %s, want the forwarded client's", got)
		}
	}
	if _, err := proxied(t, newService(t, Config{}), addr, "203.0.113.9", 40100); err == nil {
		t.Fatal("a ninth session from one forwarded address was admitted")
	}
	log.waitFor(t, "the per-IP refusal", func(e Event) bool {
		var le *LimitError
		return e.Type == EventLimitReached && errors.As(e.Err, &le) && le.Limit == "inbound sessions per IP"
	})
	if _, err := proxied(t, newService(t, Config{}), addr, "198.51.100.1", 40200); err != nil {
		t.Fatalf("another forwarded client: %v", err)
	}

	plain := newService(t, Config{})
	if _, err := proxied(t, newService(t, Config{}), listen(t, plain), "203.0.113.9", 40300); err == nil {
		t.Fatal("an untrusted PROXY header was accepted as part of a handshake")
	}
}

// TestMemoryNetwork50: 50 nodes in one process on the in-memory transport, 25 ms one-way
// links: each dials three others and exchanges requests with them, and the round trips
// measured (a request and its reply: one round trip) match the configured delay within
// 10%.
func TestMemoryNetwork50(t *testing.T) {
	const (
		nodes = 50
		delay = 25 * time.Millisecond
		rtt   = 2 * delay
	)
	network := memory.NewNetwork(memory.NetworkConfig{Link: memory.Link{Delay: delay}})
	echo := Protocol{Name: "/echo", Versions: []string{"1"}, RequestHandler: RequestHandlerFunc(func(_ *Context, req []byte) ([]byte, error) {
		return req, nil
	})}
	svcs := make([]*Service, nodes)
	addrs := make([]Addr, nodes)
	for i := range svcs {
		svcs[i] = newService(t, Config{Transports: []transport.Transport{network.NewTransport()}, Protocols: []Protocol{echo}})
		a, err := svcs[i].Listen(context.Background(), MustParseAddr("/memory/0"))
		if err != nil {
			t.Fatal(err)
		}
		addrs[i] = a
	}
	// Every node dials first (the handshakes are what costs CPU here), then all sessions
	// exchange requests at once: the round trips then measure the links, not a machine
	// busy with 150 handshakes.
	var (
		mu       sync.Mutex
		sessions []*Session
		times    []time.Duration
		wg       sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range svcs {
		for _, step := range []int{1, 7, 19} {
			wg.Go(func() {
				sess, err := svcs[i].Dial(ctx, addrs[(i+step)%nodes])
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				sessions = append(sessions, sess)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, sess := range sessions {
		wg.Go(func() {
			for range 4 {
				start := time.Now()
				reply, err := sess.Request(ctx, "/echo", []byte("ping"))
				d := time.Since(start)
				if err != nil || string(reply) != "ping" {
					t.Errorf("request: %q, %v", reply, err)
					return
				}
				mu.Lock()
				times = append(times, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	slices.Sort(times)
	median := times[len(times)/2]
	t.Logf("%d requests over %d sessions: round trip min %v, median %v, max %v (links %v one way)",
		len(times), nodes*3, times[0], median, times[len(times)-1], delay)
	if times[0] < rtt {
		t.Fatalf("a round trip of %v, shorter than the links allow (%v)", times[0], rtt)
	}
	if raceEnabled {
		return // the race detector's cost per request is no property of the links: the plain runs check the median
	}
	if median < rtt || median > rtt+rtt/10 {
		t.Fatalf("median round trip %v, want %v within 10%%", median, rtt)
	}
}

// forwardingProxy is an httputil.ReverseProxy on loopback in front of a WebSocket
// listener at target, which says every request comes from client (X-Forwarded-For). It
// returns the proxy's address for a dialer, with the listener's peer ID.
func forwardingProxy(t *testing.T, target Addr, client string) Addr {
	t.Helper()
	_, hp, rest, ok := transport.HostPort(target.Transport)
	if !ok || len(rest) != 1 || rest[0].Code() != ma.P_WS {
		t.Fatalf("%s is not a WebSocket address", target)
	}
	to, _ := url.Parse("http://" + hp)
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(to)
		r.Out.Header.Set("X-Forwarded-For", client)
	}}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return MustParseAddr("/ip4/127.0.0.1/tcp/" + u.Port() + "/ws").WithPeer(target.Peer)
}

// TestTrustedProxyForwardedFor: a WebSocket listener behind an httputil.ReverseProxy on
// loopback. With the proxy trusted, the per-IP cap applies to the address in
// X-Forwarded-For: the ninth session from one forwarded address is refused, and sessions
// report it; with the proxy untrusted, the header changes nothing (every session is the
// proxy's, from loopback, which Admission.Unlimited exempts).
func TestTrustedProxyForwardedFor(t *testing.T) {
	dialVia := func(addr Addr) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := newService(t, Config{}).Dial(ctx, addr)
		return err
	}
	ws := MustParseAddr("/ip4/127.0.0.1/tcp/0/ws")

	srv := newService(t, Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	at, err := srv.Listen(context.Background(), ws)
	if err != nil {
		t.Fatal(err)
	}
	via := forwardingProxy(t, at, "203.0.113.9")
	for i := range DefaultMaxInboundPerIP {
		if err := dialVia(via); err != nil {
			t.Fatalf("session %d through the trusted proxy: %v", i, err)
		}
	}
	waitUntil(t, "the listener's sessions", func() bool { return len(srv.Sessions()) == DefaultMaxInboundPerIP })
	for _, s := range srv.Sessions() {
		if got := s.RemoteAddr().Transport.String(); !strings.HasPrefix(got, "/ip4/203.0.113.9/") {
			t.Fatalf("session's remote address %s, want the forwarded client's", got)
		}
	}
	if err := dialVia(via); err == nil {
		t.Fatal("a ninth session from one forwarded address was admitted")
	}
	if err := dialVia(forwardingProxy(t, at, "198.51.100.1")); err != nil {
		t.Fatalf("another forwarded client: %v", err)
	}

	plain := newService(t, Config{})
	at, err = plain.Listen(context.Background(), ws)
	if err != nil {
		t.Fatal(err)
	}
	via = forwardingProxy(t, at, "203.0.113.9")
	for i := range DefaultMaxInboundPerIP + 2 {
		if err := dialVia(via); err != nil {
			t.Fatalf("session %d through an untrusted proxy: %v", i, err)
		}
	}
	waitUntil(t, "the listener's sessions", func() bool { return len(plain.Sessions()) == DefaultMaxInboundPerIP+2 })
	for _, s := range plain.Sessions() {
		if got := s.RemoteAddr().Transport.String(); !strings.HasPrefix(got, "/ip4/127.0.0.1/") {
			t.Fatalf("untrusted proxy: session's remote address %s, want the proxy's", got)
		}
	}
}
