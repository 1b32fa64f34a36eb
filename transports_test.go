package tendril

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/secio"
	"github.com/tendril-p2p/tendril/transport"
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
