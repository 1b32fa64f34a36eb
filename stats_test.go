package tendril

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/tendril-p2p/tendril/secio"
)

// TestStats: the counters of both ends of a session agree, survive the session's close in
// the Service's totals, and failed handshakes are counted by reason.
func TestStats(t *testing.T) {
	sess, bb, a, b := echoPair(t, "/s")
	const n = 10
	if err := sendSeq(sess, "/s", 0, n, 100); err != nil {
		t.Fatal(err)
	}
	bb.waitFor(t, "the messages", func() bool { return len(bb.msgs) == n })
	var remote *Session
	waitUntil(t, "b's session", func() bool { remote = b.Session(a.ID()); return remote != nil })
	waitUntil(t, "the messages counted as sent", func() bool { return sess.Stats().MessagesSent == n })
	as, bs := sess.Stats(), remote.Stats()
	if as.StreamsOpened != 1 || as.StreamsAccepted != 0 || as.StreamsOpen != 1 ||
		bs.StreamsOpened != 0 || bs.StreamsAccepted != 1 || bs.MessagesReceived != n || bs.BytesReceived < n*100 {
		t.Errorf("session stats: dialer %+v, listener %+v", as, bs)
	}
	// A peer that is not tendril, and one with another ID than the dialled one.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
			c.Close()
		}
	}()
	if _, err := a.Dial(context.Background(), addrFromNet(ln.Addr(), secio.PeerID{})); !errors.Is(err, secio.ErrNotTendril) {
		t.Fatalf("dial an HTTP server: %v", err)
	}
	other := newService(t, Config{})
	wrong := listen(t, other)
	key, err := secio.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	wrong.Peer = key.PeerID()
	if _, err := a.Dial(context.Background(), wrong); !errors.Is(err, secio.ErrPeerIDMismatch) {
		t.Fatalf("dial with a wrong peer ID: %v", err)
	}

	sess.Close()
	<-sess.Done() // Close may return before a handler in a call does; Done waits for the end
	<-remote.Done()
	waitUntil(t, "both services to fold in the closed sessions", func() bool {
		return a.Stats().OutboundOpen == 0 && b.Stats().InboundOpen == 0
	})
	sa, sb := a.Stats(), b.Stats()
	if sa.OutboundTotal != 1 || sa.OutboundOpen != 0 || sa.InboundTotal != 0 || sa.HandshakesCompleted != 1 ||
		sa.MessagesSent != n || sa.StreamsOpened != 1 || sa.StreamsOpen != 0 || sa.BytesSent < as.BytesSent {
		t.Errorf("dialer's service stats after close: %+v", sa)
	}
	if f := sa.HandshakesFailed; f.NotTendril != 1 || f.PeerIDMismatch != 1 || f.Total() != 2 {
		t.Errorf("dialer's failed handshakes: %+v", f)
	}
	if sb.InboundTotal != 1 || sb.InboundOpen != 0 || sb.MessagesReceived != n || sb.StreamsAccepted != 1 || sb.HandshakesCompleted != 1 {
		t.Errorf("listener's service stats after close: %+v", sb)
	}
}
