package secio

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
)

// A Probe learns the listener's verified key, and the listener never receives the
// dialer's identity: its handshake ends where the DialerAuth was due.
func TestProbe(t *testing.T) {
	for _, mode := range handshakeModes {
		for _, tr := range transports {
			ca, cb := mode.cfg("a"), mode.cfg("b")
			ca.ExpectedPeer = testKey("b").PeerID()
			x, y := tr.pair(t)
			var rec recorder
			done := make(chan error, 1)
			go func() {
				_, err := Server(context.Background(), y, cb)
				done <- err
			}()
			pub, err := Probe(context.Background(), &recordConn{Conn: x, rec: &rec}, ca)
			if err != nil {
				t.Fatalf("%s/%s: Probe: %v", mode.name, tr.name, err)
			}
			if pub.PeerID() != testKey("b").PeerID() {
				t.Fatalf("%s/%s: Probe returned %s", mode.name, tr.name, pub.PeerID())
			}
			errB := <-done
			var he *HandshakeError
			if !errors.As(errB, &he) || he.Step != "read dialer auth" || !errors.Is(errB, io.ErrUnexpectedEOF) {
				t.Fatalf("%s/%s: server: %v, want io.ErrUnexpectedEOF reading the dialer's auth", mode.name, tr.name, errB)
			}
			if len(rec.writes) != 1 {
				t.Fatalf("%s/%s: the probe wrote %d messages, want only its ClientHello", mode.name, tr.name, len(rec.writes))
			}
			if _, err := x.Write([]byte{0}); !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.ErrClosedPipe) {
				t.Fatalf("%s/%s: the probe's conn is still open: write: %v", mode.name, tr.name, err)
			}
		}
	}
}

// A Probe that finds another peer fails as Client does.
func TestProbeWrongPeer(t *testing.T) {
	ca, cb := testConfig("a"), testConfig("b")
	ca.ExpectedPeer = testKey("c").PeerID()
	x, y := net.Pipe()
	go Server(context.Background(), y, cb)
	if _, err := Probe(context.Background(), x, ca); !errors.Is(err, ErrPeerIDMismatch) {
		t.Fatalf("Probe: %v, want ErrPeerIDMismatch", err)
	}
}
