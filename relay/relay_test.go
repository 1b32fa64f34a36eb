package relay

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril"
)

// TestRelayedSession: C, which knows only A's address, reaches B through A. The handshake
// runs end to end (B's session's peer is C, C's is B, both marked relayed), protocols work
// both ways, and the relay never sees the plaintext.
func TestRelayedSession(t *testing.T) {
	const marker = "PLAINTEXT-MARKER-7f3a9c"
	var seen, leaked bytes.Buffer
	tap := func(b []byte) {
		seen.Write(b[:min(len(b), 1)]) // count only
		if bytes.Contains(b, []byte(marker)) {
			leaked.WriteString("x")
		}
	}
	testTap.Store(&tap)
	t.Cleanup(func() { testTap.Store(nil) })

	tr := newTrio(t, RelayConfig{}, ClientConfig{})
	addr := tr.circuitToB()
	parsed, err := ParseCircuit(addr.String())
	if err != nil || parsed.String() != addr.String() {
		t.Fatalf("ParseCircuit(%s) = %v, %v", addr, parsed, err)
	}
	sess, err := Dial(ctxT(t, 10*time.Second), tr.c.svc, parsed)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	if sess.Peer() != tr.b.svc.ID() || !IsRelayed(sess.RemoteAddr()) {
		t.Fatalf("C's session: peer %s at %s, want %s relayed", sess.Peer(), sess.RemoteAddr(), tr.b.svc.ID())
	}
	echo(t, sess, marker)
	var back = tr.b.svc.Session(tr.c.svc.ID())
	if back == nil || back.Peer() != tr.c.svc.ID() || !IsRelayed(back.RemoteAddr()) {
		t.Fatalf("B's session with C: %v", back)
	}
	echo(t, back, marker+" from B")
	if tr.c.svc.Session(tr.a.svc.ID()) == nil || tr.b.svc.Session(tr.a.svc.ID()) == nil {
		t.Fatal("sessions with the relay missing")
	}
	if seen.Len() == 0 {
		t.Fatal("the relay forwarded nothing: the tap is not wired")
	}
	if leaked.Len() != 0 {
		t.Fatalf("the relay saw the plaintext marker %d times", leaked.Len())
	}
	st := tr.relay.Stats()
	if st.CircuitsOpened != 1 || st.Circuits != 1 || st.Reservations != 1 {
		t.Fatalf("relay stats %+v", st)
	}
	sess.Close()
	waitFor(t, "the circuit to end", func() bool { return tr.relay.Stats().Circuits == 0 })
	if st := tr.relay.Stats(); st.Ended+st.ClosedReset != 1 {
		t.Fatalf("relay stats after close %+v", st)
	}
	t.Logf("relay stats: %+v", tr.relay.Stats())
}

// TestNoReservation: a circuit to a peer without a reservation is refused with a typed
// error, and the dialer's session with the relay lives on.
func TestNoReservation(t *testing.T) {
	tr := newTrio(t, RelayConfig{}, ClientConfig{})
	tr.res.Close()
	other := newNode(t, tr.network, tendril.Config{})
	// Connected to the relay, but without a reservation.
	if _, err := other.svc.Dial(ctxT(t, 10*time.Second), tr.a.addr); err != nil {
		t.Fatal(err)
	}
	_, err := Dial(ctxT(t, 10*time.Second), tr.c.svc, Circuit{Relay: tr.a.addr, Target: other.svc.ID()})
	if !errors.Is(err, ErrNoReservation) {
		t.Fatalf("Dial to a peer without reservation: %v, want ErrNoReservation", err)
	}
	echo(t, tr.c.svc.Session(tr.a.svc.ID()), "still here")
}

// TestDirectReplacesRelayed: once two peers with a relayed session connect directly,
// whichever of them dials, both keep the direct session (the duplicate rule's dialer-ID
// tie-break would drop it for one of the two directions), and the relayed one ends
// gracefully.
func TestDirectReplacesRelayed(t *testing.T) {
	for _, bDials := range []bool{false, true} {
		t.Run(map[bool]string{false: "C dials", true: "B dials"}[bDials], func(t *testing.T) {
			tr := newTrio(t, RelayConfig{}, ClientConfig{})
			// B dialling directly must be the case the dialer-ID rule gets wrong: B's ID the
			// larger, C (the relayed session's dialer) the smaller.
			for bDials && tr.b.svc.ID().Compare(tr.c.svc.ID()) < 0 {
				tr = newTrio(t, RelayConfig{}, ClientConfig{})
			}
			relayed, err := Dial(ctxT(t, 10*time.Second), tr.c.svc, tr.circuitToB())
			if err != nil {
				t.Fatalf("Dial: %v", err)
			}
			if !relayed.Relayed() {
				t.Fatal("the circuit's session does not say it is relayed")
			}
			waitFor(t, "B's session with C", func() bool { return tr.b.svc.Session(tr.c.svc.ID()) != nil })
			relayedAtB := tr.b.svc.Session(tr.c.svc.ID())
			if !relayedAtB.Relayed() {
				t.Fatalf("B's session with C: %v", relayedAtB)
			}
			dialer, target := tr.c, tr.b
			if bDials {
				dialer, target = tr.b, tr.c
			}
			direct, err := dialer.svc.Dial(ctxT(t, 10*time.Second),
				tendril.Addr{Transport: target.addr.Transport, Peer: target.svc.ID()})
			if err != nil {
				t.Fatalf("direct Dial: %v", err)
			}
			if direct.Relayed() || direct == relayed || direct == relayedAtB {
				t.Fatal("Dial returned the relayed session instead of dialling")
			}
			for _, end := range []struct {
				name    string
				n       *node
				peer    *node
				relayed *tendril.Session
			}{{"C", tr.c, tr.b, relayed}, {"B", tr.b, tr.c, relayedAtB}} {
				select {
				case <-end.relayed.Done():
				case <-time.After(10 * time.Second):
					t.Fatalf("%s: the relayed session is still open", end.name)
				}
				// The end that registers the direct session second may hear the peer's
				// graceful close of the relayed one first.
				if err := end.relayed.Err(); !errors.Is(err, tendril.ErrDuplicateSession) && !errors.Is(err, tendril.ErrPeerClosed) {
					t.Fatalf("%s: the relayed session ended with %v", end.name, err)
				}
				waitFor(t, end.name+"'s direct session", func() bool {
					s := end.n.svc.Session(end.peer.svc.ID())
					return s != nil && !s.Relayed()
				})
				kept := end.n.svc.Session(end.peer.svc.ID())
				echo(t, kept, "direct from "+end.name)
			}
		})
	}
}
