package tcp

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/transport"
)

func listen(t *testing.T, tr *Transport, addr string) transport.Listener {
	t.Helper()
	ln, err := tr.Listen(context.Background(), ma.StringCast(addr), transport.ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func portOf(t *testing.T, a ma.Multiaddr) int {
	t.Helper()
	s, err := a.ValueForProtocol(ma.P_TCP)
	if err != nil {
		t.Fatal(err)
	}
	ap, err := netip.ParseAddrPort("127.0.0.1:" + s)
	if err != nil {
		t.Fatal(err)
	}
	return int(ap.Port())
}

// TestListenStillExclusive: listeners share their port with DialFrom's connections, but a
// second Listen on a port in use still fails, as it did before SO_REUSEPORT.
func TestListenStillExclusive(t *testing.T) {
	tr := New(nil)
	ln := listen(t, tr, "/ip4/127.0.0.1/tcp/0")
	if ln2, err := tr.Listen(context.Background(), ln.Multiaddr(), transport.ListenOptions{}); err == nil {
		ln2.Close()
		t.Fatalf("a second Listen on %s succeeded", ln.Multiaddr())
	}
}

// TestDialFromListenPort: a connection dialled from a listen port leaves from it, while
// the listener goes on accepting.
func TestDialFromListenPort(t *testing.T) {
	tr := New(nil)
	a := listen(t, tr, "/ip4/127.0.0.1/tcp/0")
	b := listen(t, tr, "/ip4/127.0.0.1/tcp/0")
	from := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(portOf(t, a.Multiaddr())))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := tr.DialFrom(ctx, from, b.Multiaddr())
	if err != nil {
		t.Fatalf("DialFrom %s: %v", from, err)
	}
	defer c.Close()
	in, err := b.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if got := in.RemoteAddr().(*net.TCPAddr).AddrPort(); got != from {
		t.Fatalf("the connection came from %s, want %s", got, from)
	}
	// a still accepts, on the port it shares.
	c2, err := tr.Dial(ctx, a.Multiaddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	in2, err := a.Accept()
	if err != nil {
		t.Fatal(err)
	}
	in2.Close()
	// Without SO_REUSEPORT on the listener, the port is not shared.
	excl := New(&Config{DisableReusePort: true})
	e := listen(t, excl, "/ip4/127.0.0.1/tcp/0")
	from = netip.AddrPortFrom(from.Addr(), uint16(portOf(t, e.Multiaddr())))
	if c3, err := tr.DialFrom(ctx, from, b.Multiaddr()); err == nil {
		c3.Close()
		t.Fatal("DialFrom shared the port of a listener without SO_REUSEPORT")
	}
}

// TestStartDialFrom: an attempt started from a listen port completes into a connection
// from that port; one to a closed port is refused; an abandoned one closes.
func TestStartDialFrom(t *testing.T) {
	tr := New(nil)
	a := listen(t, tr, "/ip4/127.0.0.1/tcp/0")
	b := listen(t, tr, "/ip4/127.0.0.1/tcp/0")
	from := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(portOf(t, a.Multiaddr())))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	at, err := tr.StartDialFrom(from, b.Multiaddr())
	if err != nil {
		t.Fatal(err)
	}
	c, err := at.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.LocalAddr().(*net.TCPAddr).AddrPort(); got != from {
		t.Fatalf("local address %s, want %s", got, from)
	}
	in, err := b.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	if _, err := in.Read(buf); err != nil || buf[0] != 'x' {
		t.Fatalf("read %q, %v", buf, err)
	}
	// A closed port: refused.
	closed := listen(t, New(&Config{DisableReusePort: true}), "/ip4/127.0.0.1/tcp/0")
	dead := closed.Multiaddr()
	closed.Close()
	at, err = tr.StartDialFrom(from, dead)
	if err == nil {
		_, err = at.Wait(ctx)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("a closed port: %v, want ECONNREFUSED", err)
	}
	// The same four-tuple as a live connection: refused at once.
	if at, err := tr.StartDialFrom(from, b.Multiaddr()); err == nil {
		at.Close()
		t.Fatal("a second attempt on a live connection's addresses started")
	}
	// Abandoned before it completes, and after ctx ends.
	if at, err = tr.StartDialFrom(from, listen(t, tr, "/ip4/127.0.0.1/tcp/0").Multiaddr()); err != nil {
		t.Fatal(err)
	}
	at.Close()
	done, stop := context.WithCancel(context.Background())
	stop()
	if at, err = tr.StartDialFrom(from, listen(t, tr, "/ip4/127.0.0.1/tcp/0").Multiaddr()); err != nil {
		t.Fatal(err)
	}
	if _, err := at.Wait(done); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after ctx ended: %v", err)
	}
}
