package memory

import (
	"context"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/transport"
)

func maddr(t testing.TB, s string) ma.Multiaddr {
	t.Helper()
	m, err := ma.NewMultiaddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// listen listens on /memory/0 of host, closed when the test ends.
func listen(t testing.TB, host *Transport) *Listener {
	t.Helper()
	l, err := host.Listen(context.Background(), maddr(t, "/memory/0"), transport.ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.(*Listener)
}

// connect dials from a to a listener of b and returns both ends, closed when the test
// ends.
func connect(t testing.TB, a, b *Transport) (dialer, acceptor *Conn) {
	t.Helper()
	l := listen(t, b)
	c, err := a.Dial(context.Background(), l.Multiaddr())
	if err != nil {
		t.Fatal(err)
	}
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	t.Cleanup(func() { c.Close(); s.Close() })
	return c.(*Conn), s.(*Conn)
}

// pair returns both ends of a connection between two hosts of a new network whose links
// are l.
func pair(t testing.TB, l Link) (*Conn, *Conn) {
	t.Helper()
	n := NewNetwork(NetworkConfig{Link: l})
	return connect(t, n.NewTransport(), n.NewTransport())
}

// roundTrip measures rounds 8-byte ping-pongs from c to its echoing peer and returns
// their median and least durations. The median, not the mean: on a shared machine, one
// round in which the scheduler ran something else for a while says nothing of the link.
func roundTrip(t testing.TB, c, peer net.Conn, rounds int) (median, least time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 8)
		for {
			if _, err := io.ReadFull(peer, buf); err != nil {
				return
			}
			if _, err := peer.Write(buf); err != nil {
				return
			}
		}
	}()
	defer func() { peer.Close(); <-done }()
	buf := make([]byte, 8)
	times := make([]time.Duration, rounds)
	for i := range times {
		start := time.Now()
		if _, err := c.Write(buf); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
		times[i] = time.Since(start)
	}
	slices.Sort(times)
	return times[rounds/2], times[0]
}
