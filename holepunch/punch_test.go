package holepunch

import (
	"sync/atomic"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/relay"
)

// TestPunchOverLoopback: C reaches B through the relay; B, which accepted the relayed
// session, punches, and both end up with a direct session; the relayed one ends.
func TestPunchOverLoopback(t *testing.T) {
	tr := newTrio(t)
	pb := newPuncher(t, tr.b, Config{})
	pc := newPuncher(t, tr.c, Config{})
	relayed, err := relay.Dial(ctxT(t, 10*time.Second), tr.c.svc, tr.res.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if !relayed.Relayed() {
		t.Fatal("the circuit's session is not relayed")
	}
	waitFor(t, "B's direct session with C", 10*time.Second, func() bool { return direct(tr.b, tr.c.svc.ID()) })
	waitFor(t, "C's direct session with B", 10*time.Second, func() bool { return direct(tr.c, tr.b.svc.ID()) })
	select {
	case <-relayed.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the relayed session is still open")
	}
	waitFor(t, "B's report", 5*time.Second, func() bool {
		r, ok := pb.PeerReport(tr.c.svc.ID())
		return ok && r.Punched
	})
	r, _ := pb.PeerReport(tr.c.svc.ID())
	if r.Connection != "punched" || r.Role != RoleInitiator || r.Attempts != 1 || r.Err != nil || r.Took <= 0 {
		t.Fatalf("B's report: %+v", r)
	}
	waitFor(t, "C's report", 5*time.Second, func() bool {
		r, ok := pc.PeerReport(tr.b.svc.ID())
		return ok && r.Punched
	})
	if st := pb.Stats(); st.Attempts != 1 || st.Punched != 1 {
		t.Fatalf("B's stats %+v", st)
	}
	if st := pc.Stats(); st.Served != 1 {
		t.Fatalf("C's stats %+v", st)
	}
	t.Logf("B: %s (relayed RTT %s)", r, r.RelayedRTT)
}

// TestRetriesUntilAddrs: an end that knows no address of its own yet (identify has not
// told it how it is seen) answers with none; the initiator tries again, and the second
// attempt punches.
func TestRetriesUntilAddrs(t *testing.T) {
	tr := newTrio(t)
	pb := newPuncher(t, tr.b, Config{})
	var calls atomic.Int32
	newPuncher(t, tr.c, Config{Addrs: func() []ma.Multiaddr {
		if calls.Add(1) == 1 {
			return nil
		}
		return []ma.Multiaddr{tr.c.addr.Transport}
	}})
	if _, err := relay.Dial(ctxT(t, 10*time.Second), tr.c.svc, tr.res.Addr()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "B's direct session with C", 15*time.Second, func() bool { return direct(tr.b, tr.c.svc.ID()) })
	waitFor(t, "B's report", 5*time.Second, func() bool {
		r, ok := pb.PeerReport(tr.c.svc.ID())
		return ok && r.Punched
	})
	if r, _ := pb.PeerReport(tr.c.svc.ID()); r.Attempts != 2 {
		t.Fatalf("B's report: %+v, want 2 attempts", r)
	}
}
