package tendril

import (
	"context"
	"errors"
	"testing"

	"github.com/tendril-p2p/tendril/secio"
)

// A Probe of a connected peer's address reaches it on a new connection and leaves both
// sessions as they were: the peer's handshake fails where the prober's identity was due,
// so no duplicate session is registered or replaces the one they have.
func TestProbe(t *testing.T) {
	a := newService(t, Config{})
	b := newService(t, Config{})
	addrB := listen(t, b)
	sess := dial(t, a, addrB)
	waitUntil(t, "b's session", func() bool { return len(b.Sessions()) == 1 })
	before := b.Stats()

	for range 3 {
		if err := a.Probe(context.Background(), addrB); err != nil {
			t.Fatalf("Probe: %v", err)
		}
	}
	waitUntil(t, "b's three failed handshakes", func() bool {
		return b.Stats().HandshakesFailed.Total() == before.HandshakesFailed.Total()+3
	})
	if st := b.Stats(); st.InboundTotal != before.InboundTotal || st.HandshakesCompleted != before.HandshakesCompleted {
		t.Fatalf("b registered a session for a probe: %+v, before %+v", st, before)
	}
	select {
	case <-sess.Done():
		t.Fatalf("the session ended: %v", sess.Err())
	default:
	}
	if got := a.Sessions(); len(got) != 1 || got[0] != sess {
		t.Fatalf("a's sessions: %v", got)
	}
}

func TestProbeFailures(t *testing.T) {
	a := newService(t, Config{})
	b := newService(t, Config{})
	addrB := listen(t, b)
	ctx := context.Background()

	other := addrB.WithPeer(newService(t, Config{}).ID())
	if err := a.Probe(ctx, other); !errors.Is(err, secio.ErrPeerIDMismatch) {
		t.Fatalf("another peer's ID: %v, want secio.ErrPeerIDMismatch", err)
	}
	if err := a.Probe(ctx, Addr{Transport: addrB.Transport}); !errors.Is(err, ErrInvalidAddr) {
		t.Fatalf("no peer ID: %v, want ErrInvalidAddr", err)
	}
	if err := a.Probe(ctx, addrB.WithPeer(a.ID())); !errors.Is(err, secio.ErrSelfDial) {
		t.Fatalf("own ID: %v, want secio.ErrSelfDial", err)
	}
	b.Close()
	if err := a.Probe(ctx, addrB); err == nil {
		t.Fatal("a closed peer: Probe succeeded")
	}
	a.Close()
	if err := a.Probe(ctx, addrB.WithPeer(b.ID())); !errors.Is(err, ErrServiceClosed) {
		t.Fatalf("closed Service: %v, want ErrServiceClosed", err)
	}
	if len(a.Sessions()) != 0 {
		t.Fatal("a probe left a session")
	}
}
