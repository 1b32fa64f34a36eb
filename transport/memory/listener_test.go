package memory

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/transport"
)

func TestHandles(t *testing.T) {
	tr := NewNetwork(NetworkConfig{}).NewTransport()
	for s, want := range map[string]bool{
		"/memory/0":                     true,
		"/memory/18446744073709551615":  true,
		"/ip4/127.0.0.1/tcp/1":          false,
		"/memory/1/memory/2":            false,
		"/ip4/127.0.0.1/tcp/1/memory/2": false,
		"/dns/localhost/tcp/1":          false,
		"/ip6/::1/tcp/4001/p2p/QmYyQSo1c1Ym7orWxLYvCrM2EmxFTANf8wXmmE7DWjhx5N": false,
	} {
		if got := tr.Handles(maddr(t, s)); got != want {
			t.Errorf("Handles(%s) = %v, want %v", s, got, want)
		}
		if want {
			continue
		}
		if _, err := tr.Dial(context.Background(), maddr(t, s)); !errors.Is(err, transport.ErrUnsupported) {
			t.Errorf("Dial(%s): %v, want transport.ErrUnsupported", s, err)
		}
		if _, err := tr.Listen(context.Background(), maddr(t, s), transport.ListenOptions{}); !errors.Is(err, transport.ErrUnsupported) {
			t.Errorf("Listen(%s): %v, want transport.ErrUnsupported", s, err)
		}
	}
}

// TestListenNumbers: /memory/0 picks a free number from 49152 up, a number asked for is
// taken until its listener closes, and a second listener on it fails with ErrAddrInUse.
func TestListenNumbers(t *testing.T) {
	tr := NewNetwork(NetworkConfig{}).NewTransport()
	l1, l2 := listen(t, tr), listen(t, tr)
	if l1.Addr().(Addr) < firstAuto || l2.Addr() == l1.Addr() {
		t.Fatalf("/memory/0 picked %v and %v; want two distinct numbers from %d", l1.Addr(), l2.Addr(), firstAuto)
	}
	l, err := tr.Listen(context.Background(), maddr(t, "/memory/7"), transport.ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !l.Multiaddr().Equal(maddr(t, "/memory/7")) {
		t.Fatalf("listening on /memory/7: Multiaddr %s", l.Multiaddr())
	}
	_, err = NewNetwork(NetworkConfig{}).NewTransport().Listen(context.Background(), maddr(t, "/memory/7"), transport.ListenOptions{})
	if err != nil {
		t.Fatalf("/memory/7 in another network: %v", err)
	}
	_, err = tr.Listen(context.Background(), maddr(t, "/memory/7"), transport.ListenOptions{})
	if !errors.Is(err, ErrAddrInUse) || !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("second listener on /memory/7: %v, want ErrAddrInUse and EADDRINUSE", err)
	}
	l.Close()
	l, err = tr.Listen(context.Background(), maddr(t, "/memory/7"), transport.ListenOptions{})
	if err != nil {
		t.Fatalf("/memory/7 after its listener closed: %v", err)
	}
	l.Close()
}

// TestConnAddrs: the dialer's end has a number of its own (an ephemeral port), the
// acceptor's is the listener's; addresses are Addr, not IP, on both ends.
func TestConnAddrs(t *testing.T) {
	n := NewNetwork(NetworkConfig{})
	a, b := n.NewTransport(), n.NewTransport()
	l := listen(t, b)
	d1, s1 := connect1(t, a, l)
	d2, _ := connect1(t, a, l)
	if d1.LocalAddr() == l.Addr() || d1.LocalAddr() == d2.LocalAddr() {
		t.Fatalf("dialled ends %v and %v, listener %v: want numbers of their own", d1.LocalAddr(), d2.LocalAddr(), l.Addr())
	}
	if d1.RemoteAddr() != l.Addr() || s1.LocalAddr() != l.Addr() || s1.RemoteAddr() != d1.LocalAddr() {
		t.Fatalf("dialer %v -> %v, acceptor %v -> %v, listener %v", d1.LocalAddr(), d1.RemoteAddr(), s1.LocalAddr(), s1.RemoteAddr(), l.Addr())
	}
	if na := d1.LocalAddr(); na.Network() != "memory" || na.String() != d1.LocalMultiaddr().String() {
		t.Fatalf("LocalAddr %q %q, LocalMultiaddr %s", na.Network(), na.String(), d1.LocalMultiaddr())
	}
	if !transport.RemoteMultiaddr(s1).Equal(d1.LocalMultiaddr()) || !transport.LocalMultiaddr(s1).Equal(l.Multiaddr()) {
		t.Fatalf("acceptor's multiaddrs %s -> %s", transport.LocalMultiaddr(s1), transport.RemoteMultiaddr(s1))
	}
	if ap := transport.RemoteAddrPort(s1); ap != (netip.AddrPort{}) {
		t.Fatalf("RemoteAddrPort of a memory connection: %v, want none (not IP)", ap)
	}
	up, err := l.Upgrade(context.Background(), s1)
	if err != nil || up != s1 {
		t.Fatalf("Upgrade: %v, %v; want the connection itself", up, err)
	}
	// A dialled end's number is freed when it closes, and can then be listened on.
	num := d1.LocalMultiaddr()
	if _, err := a.Listen(context.Background(), num, transport.ListenOptions{}); !errors.Is(err, ErrAddrInUse) {
		t.Fatalf("listening on an open connection's number: %v, want ErrAddrInUse", err)
	}
	d1.Close()
	l2, err := a.Listen(context.Background(), num, transport.ListenOptions{})
	if err != nil {
		t.Fatalf("listening on a closed connection's number: %v", err)
	}
	l2.Close()
}

func connect1(t *testing.T, a *Transport, l *Listener) (*Conn, *Conn) {
	t.Helper()
	c, err := a.Dial(context.Background(), l.Multiaddr())
	if err != nil {
		t.Fatal(err)
	}
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c.(*Conn), s.(*Conn)
}

// TestDialRefused: a dial to a number nobody listens on, or no longer, fails at once with
// ErrRefused (ECONNREFUSED); so does one in another network.
func TestDialRefused(t *testing.T) {
	n := NewNetwork(NetworkConfig{Link: Link{Delay: time.Second}})
	a, b := n.NewTransport(), n.NewTransport()
	l := listen(t, b)
	addr := l.Multiaddr()
	l.Close()
	other := NewNetwork(NetworkConfig{}).NewTransport()
	lo := listen(t, other)
	for _, target := range []string{"/memory/1", addr.String(), lo.Multiaddr().String()} {
		start := time.Now()
		_, err := a.Dial(context.Background(), maddr(t, target))
		if !errors.Is(err, ErrRefused) || !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial %s: %v, want ErrRefused and ECONNREFUSED", target, err)
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Fatalf("dial %s was refused after %v, want at once, not after the 2 s round trip", target, d)
		}
	}
}

// TestDialRoundTrip: a dial takes the links' round trip; a listener closed meanwhile
// refuses it then; ctx cuts it short.
func TestDialRoundTrip(t *testing.T) {
	n := NewNetwork(NetworkConfig{Link: Link{Delay: 30 * time.Millisecond}})
	a, b := n.NewTransport(), n.NewTransport()
	l := listen(t, b)
	start := time.Now()
	c, err := a.Dial(context.Background(), l.Multiaddr())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if d := time.Since(start); d < 60*time.Millisecond {
		t.Fatalf("dial over 30 ms links took %v, want a round trip (60 ms)", d)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := a.Dial(ctx, l.Multiaddr()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dial with a 10 ms context over a 60 ms round trip: %v", err)
	}

	errc := make(chan error)
	go func() { _, err := a.Dial(context.Background(), l.Multiaddr()); errc <- err }()
	time.Sleep(10 * time.Millisecond)
	l.Close()
	if err := <-errc; !errors.Is(err, ErrRefused) {
		t.Fatalf("dial to a listener closed during the round trip: %v, want ErrRefused", err)
	}
}

// TestBacklog: a listener holds at most Backlog unaccepted connections; beyond, dials are
// refused until Accept makes room. Close closes those still waiting.
func TestBacklog(t *testing.T) {
	n := NewNetwork(NetworkConfig{Backlog: 4})
	a, b := n.NewTransport(), n.NewTransport()
	l := listen(t, b)
	var dialled []net.Conn
	for i := range 5 {
		c, err := a.Dial(context.Background(), l.Multiaddr())
		if i < 4 {
			if err != nil {
				t.Fatalf("dial %d of a backlog of 4: %v", i+1, err)
			}
			dialled = append(dialled, c)
			continue
		}
		if !errors.Is(err, ErrRefused) {
			t.Fatalf("dial beyond the backlog: %v, want ErrRefused", err)
		}
	}
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := a.Dial(context.Background(), l.Multiaddr())
	if err != nil {
		t.Fatalf("dial after Accept made room: %v", err)
	}
	dialled = append(dialled, c)
	l.Close()
	for i, c := range dialled {
		wait := 5 * time.Second
		if i == 0 {
			wait = 50 * time.Millisecond
		}
		c.SetReadDeadline(time.Now().Add(wait))
		_, err := c.Read(make([]byte, 1))
		if i == 0 {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("the accepted connection after the listener closed: %v, want it open", err)
			}
			continue
		}
		if err != io.EOF {
			t.Fatalf("a connection left in the backlog at Close: %v, want io.EOF", err)
		}
		c.Close()
	}
	dialled[0].Close()
}

// TestCloseUnblocksAccept: Close wakes a waiting Accept, which returns net.ErrClosed, as
// does every Accept after.
func TestCloseUnblocksAccept(t *testing.T) {
	l := listen(t, NewNetwork(NetworkConfig{}).NewTransport())
	errc := make(chan error)
	go func() { _, err := l.Accept(); errc <- err }()
	time.Sleep(10 * time.Millisecond)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept during Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not unblock Accept")
	}
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
	}
	if err := l.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("second Close: %v, want net.ErrClosed", err)
	}
}
