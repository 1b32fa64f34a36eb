package relay

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril"
)

// TestMalformedHopRequest: garbage on the hop stream gets StatusMalformed and the stream's
// end; the session with the relay lives on. An oversize length is refused before it is
// read.
func TestMalformedHopRequest(t *testing.T) {
	tr := newTrio(t, RelayConfig{}, ClientConfig{})
	if err := ensureOpener(tr.c.svc, HopProtocol); err != nil {
		t.Fatal(err)
	}
	sess, err := tr.c.svc.Dial(ctxT(t, 10*time.Second), tr.a.addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range [][]byte{
		{3, 9, 9, 9},                  // unknown type
		{2, 2, 1},                     // connect with a truncated peer ID
		{1, 1},                        // reserve, no body... then a type byte 1: valid, see below
		{0xff, 0xff, 0x03},            // a length far above maxMessage
		{4, msgConnect, 1, 0xaa, 0x0}, // connect with a bad peer ID and a trailing byte
	} {
		st, _, err := sess.OpenStream(ctxT(t, 5*time.Second), HopProtocol)
		if err != nil {
			t.Fatal(err)
		}
		st.SetDeadline(time.Now().Add(5 * time.Second))
		st.Write(raw)
		body, err := readMsg(bufio.NewReader(st))
		if raw[0] == 1 && raw[1] == 1 {
			if err != nil || Status(body[0]) != StatusOK {
				t.Fatalf("a valid reserve request: %v %v", body, err)
			}
			st.Close()
			continue
		}
		if err != nil || len(body) != 1 || Status(body[0]) != StatusMalformed {
			t.Fatalf("request % x: answer %v, %v; want StatusMalformed", raw, body, err)
		}
		if _, err := st.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("request % x: after the answer: %v, want the end of the stream", raw, err)
		}
		st.Close()
	}
	echo(t, sess, "the session lives")
	if st := tr.relay.Stats(); st.Malformed != 4 {
		t.Fatalf("relay counted %d malformed requests, want 4", st.Malformed)
	}
}

// TestCircuitFlood: dialers asking for circuits as fast as they can (their own rate
// allowance opened wide) get at most MaxCircuitsPerPeer each and MaxCircuits in all; the
// rest are refused with ErrResourceLimit at once; the target's Client holds at most its
// MaxCircuits; and a session through the relay keeps its round trips.
func TestCircuitFlood(t *testing.T) {
	const perPeer, total, targetMax = 6, 10, 5
	tr := newTrio(t, RelayConfig{MaxCircuits: total, MaxCircuitsPerPeer: perPeer, RequestBurst: 1000, ConnectBurst: 1000},
		ClientConfig{MaxCircuits: targetMax})
	// A second target, so that the total binds before the per-target cap.
	b2 := newNode(t, tr.network, tendril.Config{})
	cl2 := newClient(t, b2, ClientConfig{MaxCircuits: 100})
	res2, err := cl2.Reserve(ctxT(t, 10*time.Second), tr.a.addr)
	if err != nil {
		t.Fatal(err)
	}
	// An honest relayed session, set up before the flood, for the round trips.
	honest := newNode(t, tr.network, tendril.Config{})
	hs, err := Dial(ctxT(t, 10*time.Second), honest.svc, res2.Addr())
	if err != nil {
		t.Fatal(err)
	}
	before := rtts(t, hs, 9, 0)

	attackers := make([]*node, 4)
	for i := range attackers {
		attackers[i] = newNode(t, tr.network, tendril.Config{})
		// Connected first: concurrent first dials would race to connect, and the
		// duplicate-session rule would close the streams of the losers.
		if _, err := attackers[i].svc.Dial(ctxT(t, 10*time.Second), tr.a.addr); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu     sync.Mutex
		conns  []*Conn
		counts = map[error]int{}
		maxNow int
	)
	var wg sync.WaitGroup
	stopWatch := make(chan struct{})
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for {
			if n := tr.relay.Stats().Circuits; n > maxNow {
				mu.Lock()
				maxNow = max(maxNow, n)
				mu.Unlock()
			}
			select {
			case <-stopWatch:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	for _, at := range attackers {
		for _, target := range []Circuit{tr.circuitToB(), res2.Addr()} {
			for range 10 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c, err := DialConn(ctxT(t, 10*time.Second), at.svc, target)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						conns = append(conns, c)
					case errors.Is(err, ErrResourceLimit):
						counts[ErrResourceLimit]++
					default:
						counts[err]++
					}
				}()
			}
		}
	}
	wg.Wait()
	during := rtts(t, hs, 9, 0)
	close(stopWatch)
	<-watchDone
	// The honest circuit is one of the total.
	if len(conns) > total-1 || maxNow > total {
		t.Fatalf("%d circuits open (at most %d at once), want at most %d", len(conns), maxNow, total)
	}
	if len(conns)+counts[ErrResourceLimit] != 80 {
		t.Fatalf("%d opened, refusals %v: want the rest refused with ErrResourceLimit", len(conns), counts)
	}
	st := tr.relay.Stats()
	if st.Circuits > total {
		t.Fatalf("relay holds %d circuits", st.Circuits)
	}
	if n := tr.client.Stats().Circuits; n > targetMax {
		t.Fatalf("target serves %d circuits, above its MaxCircuits %d", n, targetMax)
	}
	t.Logf("circuits opened %d of 80 (max at once %d, total cap %d incl. 1 honest), refused %v; B serves %d; honest RTT median before %v during %v",
		len(conns), maxNow, total, counts, tr.client.Stats().Circuits, median(before), median(during))
	if median(during) > 20*median(before)+50*time.Millisecond {
		t.Fatalf("honest relayed round trip median %v during the flood, %v before", median(during), median(before))
	}
	for _, c := range conns {
		c.Close()
	}
	waitFor(t, "the flood's circuits to end", func() bool { return tr.relay.Stats().Circuits == 1 })
	echo(t, hs, "still up")
}

// TestCircuitPerPeer: one dialer gets at most MaxCircuitsPerPeer circuits to one target;
// the next is refused with ErrResourceLimit, and admitted again once one closes.
func TestCircuitPerPeer(t *testing.T) {
	tr := newTrio(t, RelayConfig{MaxCircuitsPerPeer: 3, RequestBurst: 100}, ClientConfig{})
	var conns []*Conn
	for i := range 3 {
		c, err := DialConn(ctxT(t, 10*time.Second), tr.c.svc, tr.circuitToB())
		if err != nil {
			t.Fatalf("circuit %d: %v", i, err)
		}
		conns = append(conns, c)
	}
	if _, err := DialConn(ctxT(t, 10*time.Second), tr.c.svc, tr.circuitToB()); !errors.Is(err, ErrResourceLimit) {
		t.Fatalf("a fourth circuit: %v, want ErrResourceLimit", err)
	}
	conns[0].Close()
	waitFor(t, "a circuit to end", func() bool { return tr.relay.Stats().Circuits == 2 })
	c, err := DialConn(ctxT(t, 10*time.Second), tr.c.svc, tr.circuitToB())
	if err != nil {
		t.Fatalf("after one closed: %v", err)
	}
	conns = append(conns, c)
	for _, c := range conns {
		c.Close()
	}
}

// TestRateLimitedRequests: a peer's hop requests beyond its burst are refused with
// ErrRateLimited before any other work.
func TestRateLimitedRequests(t *testing.T) {
	tr := newTrio(t, RelayConfig{RequestBurst: 3, RequestInterval: time.Hour}, ClientConfig{})
	var limited int
	for range 6 {
		_, err := DialConn(ctxT(t, 10*time.Second), tr.c.svc, Circuit{Relay: tr.a.addr, Target: tr.c.svc.ID()})
		if errors.Is(err, ErrRateLimited) {
			limited++
		}
	}
	if limited != 3 {
		t.Fatalf("%d of 6 requests rate limited, want 3", limited)
	}
}

// TestDataFlood: a circuit pushing data as fast as it can is closed at MaxCircuitBytes;
// both ends learn why (ErrCircuitBytes in their sessions' errors), the relay's memory
// stays within its budgets, and another session through the relay keeps its round trips.
func TestDataFlood(t *testing.T) {
	const limit = 64 << 20
	tr := newTrio(t, RelayConfig{MaxCircuitBytes: limit}, ClientConfig{})
	// Another pair through the same relay, for the round trips.
	d := newNode(t, tr.network, tendril.Config{})
	e := newNode(t, tr.network, tendril.Config{})
	ecl := newClient(t, e, ClientConfig{})
	eres, err := ecl.Reserve(ctxT(t, 10*time.Second), tr.a.addr)
	if err != nil {
		t.Fatal(err)
	}
	other, err := Dial(ctxT(t, 10*time.Second), d.svc, eres.Addr())
	if err != nil {
		t.Fatal(err)
	}
	before := rtts(t, other, 15, 0)

	sess, err := Dial(ctxT(t, 10*time.Second), tr.c.svc, tr.circuitToB())
	if err != nil {
		t.Fatal(err)
	}
	st, _, err := sess.OpenStream(ctxT(t, 10*time.Second), sinkProto)
	if err != nil {
		t.Fatal(err)
	}
	var during []time.Duration
	var peakMem int64
	flooded := make(chan int64, 1)
	go func() {
		buf := make([]byte, 64<<10)
		var n int64
		start := time.Now()
		for time.Since(start) < 10*time.Second {
			k, err := st.Write(buf)
			n += int64(k)
			if err != nil {
				break
			}
		}
		flooded <- n
	}()
	for len(during) < 15 {
		select {
		case <-sess.Done():
		default:
			during = append(during, echo(t, other, "ping"))
			peakMem = max(peakMem, tr.a.svc.MemoryUsed())
			continue
		}
		break
	}
	sent := <-flooded
	select {
	case <-sess.Done():
	case <-time.After(5 * time.Second):
		t.Fatalf("the flooding session still lives after %d bytes", sent)
	}
	// The relay's notice says why; once in about 40 runs the target's own close (it got its
	// notice first) reaches the dialer before, and the relay's count below still says why.
	if err := sess.Err(); !errors.Is(err, ErrCircuitBytes) && !errors.Is(err, tendril.ErrPeerClosed) {
		t.Fatalf("the flooding dialer's session ended with %v, want ErrCircuitBytes", err)
	}
	waitFor(t, "B's session with C to end", func() bool { return tr.b.svc.Session(tr.c.svc.ID()) == nil })
	stats := tr.relay.Stats()
	if stats.ClosedBytes != 1 {
		t.Fatalf("relay stats %+v: want one circuit closed at its byte limit", stats)
	}
	if stats.Bytes > 2*limit {
		t.Fatalf("relay carried %d bytes, above 2 x %d", stats.Bytes, limit)
	}
	echo(t, other, "still up")
	t.Logf("flood: the dialer wrote %d bytes, the relay carried %d (limit %d each way) and closed the circuit: %v; relay memory peak %d KiB; other relayed session RTT median before %v, during %v (%d samples)",
		sent, stats.Bytes, limit, sess.Err(), peakMem>>10, median(before), median(sortD(during)), len(during))
}

func sortD(d []time.Duration) []time.Duration {
	out := append([]time.Duration(nil), d...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	if len(out) == 0 {
		return []time.Duration{0}
	}
	return out
}

// TestCircuitDuration: a circuit is closed at MaxCircuitDuration, and the relayed
// session's error says so on both ends.
func TestCircuitDuration(t *testing.T) {
	tr := newTrio(t, RelayConfig{MaxCircuitDuration: time.Second}, ClientConfig{})
	sess, err := Dial(ctxT(t, 10*time.Second), tr.c.svc, tr.circuitToB())
	if err != nil {
		t.Fatal(err)
	}
	var back *tendril.Session
	waitFor(t, "B's session with C", func() bool { back = tr.b.svc.Session(tr.c.svc.ID()); return back != nil })
	start := time.Now()
	select {
	case <-sess.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the circuit outlived its duration limit")
	}
	<-back.Done()
	if !errors.Is(sess.Err(), ErrCircuitDuration) || !errors.Is(back.Err(), ErrCircuitDuration) {
		t.Fatalf("sessions ended with %v (dialer) and %v (target), want ErrCircuitDuration", sess.Err(), back.Err())
	}
	t.Logf("closed after %v", time.Since(start))
}

// TestRelayClose: closing the relay ends its circuits; the ends see ErrRelayClosing.
func TestRelayClose(t *testing.T) {
	tr := newTrio(t, RelayConfig{}, ClientConfig{})
	sess, err := Dial(ctxT(t, 10*time.Second), tr.c.svc, tr.circuitToB())
	if err != nil {
		t.Fatal(err)
	}
	tr.relay.Close()
	<-sess.Done()
	if !errors.Is(sess.Err(), ErrRelayClosing) {
		t.Fatalf("session ended with %v, want ErrRelayClosing", sess.Err())
	}
}

// TestReservationFlood: many identities ask for reservations, each many times: the relay
// holds at most MaxReservations, grants new ones at most at ReservationRate after its
// burst, refuses the rest with a typed error, and B's reservation, made before, still
// brings C's circuit.
func TestReservationFlood(t *testing.T) {
	const identities, each, maxRes = 100, 10, 20
	tr := newTrio(t, RelayConfig{MaxReservations: maxRes, ReservationBurst: 30, ReservationRate: 4}, ClientConfig{})
	start := time.Now()
	var (
		mu      sync.Mutex
		granted int
		refused = map[string]int{}
	)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for range identities {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			n := newNode(t, tr.network, tendril.Config{})
			cl, err := NewClient(n.svc, ClientConfig{})
			if err != nil {
				t.Error(err)
				return
			}
			defer cl.Close()
			for range each {
				g, _, err := cl.reserveOnce(context.Background(), tr.a.addr)
				mu.Lock()
				switch {
				case err == nil && g.ttl > 0:
					granted++
				case errors.Is(err, ErrRateLimited):
					refused["rate limited"]++
				case errors.Is(err, ErrReservationRefused):
					refused["refused"]++
				default:
					refused[err.Error()]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	st := tr.relay.Stats()
	if st.Reservations > maxRes {
		t.Fatalf("relay holds %d reservations, above %d", st.Reservations, maxRes)
	}
	// Refreshes by the same identity are granted too; new reservations are what the rate
	// bounds: at most the burst plus the rate times the time.
	newAllowed := 30 + int(4*elapsed.Seconds()) + 1
	if refused["refused"] == 0 {
		t.Fatalf("no request refused for room: %v", refused)
	}
	if int(st.Reservations) > newAllowed {
		t.Fatalf("%d reservations in %v, above the rate's %d", st.Reservations, elapsed, newAllowed)
	}
	if granted+refused["rate limited"]+refused["refused"] != identities*each {
		t.Fatalf("answers: %d granted, %v: want every request answered with a typed status", granted, refused)
	}
	sess, err := Dial(ctxT(t, 10*time.Second), tr.c.svc, tr.circuitToB())
	if err != nil {
		t.Fatalf("B's reservation after the flood: %v", err)
	}
	echo(t, sess, "reachable")
	t.Logf("%d requests from %d identities in %v: %d granted (refreshes included), %v; relay holds %d reservations (cap %d)",
		identities*each, identities, elapsed.Round(time.Millisecond), granted, refused, st.Reservations, maxRes)
}

// TestTargetMaxCircuits: the target's own bound holds whatever the relay allows: beyond
// ClientConfig.MaxCircuits it refuses, and the dialer gets ErrResourceLimit.
func TestTargetMaxCircuits(t *testing.T) {
	tr := newTrio(t, RelayConfig{MaxCircuitsPerPeer: 100, RequestBurst: 100}, ClientConfig{MaxCircuits: 2})
	var conns []*Conn
	for i := range 2 {
		c, err := DialConn(ctxT(t, 10*time.Second), tr.c.svc, tr.circuitToB())
		if err != nil {
			t.Fatalf("circuit %d: %v", i, err)
		}
		conns = append(conns, c)
	}
	waitFor(t, "B to count its circuits", func() bool { return tr.client.Stats().Circuits == 2 })
	if _, err := DialConn(ctxT(t, 10*time.Second), tr.c.svc, tr.circuitToB()); !errors.Is(err, ErrResourceLimit) {
		t.Fatalf("a third circuit: %v, want ErrResourceLimit from the target", err)
	}
	for _, c := range conns {
		c.Close()
	}
}

// TestRelayCloseIdleCircuit: Close returns even when a circuit's ends are silent (a dialer
// that opened a circuit and sends nothing), and the end reads ErrRelayClosing.
func TestRelayCloseIdleCircuit(t *testing.T) {
	tr := newTrio(t, RelayConfig{}, ClientConfig{})
	c, err := DialConn(ctxT(t, 10*time.Second), tr.c.svc, tr.circuitToB())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	closed := make(chan struct{})
	go func() {
		tr.relay.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Relay.Close blocked by a silent circuit")
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, ErrRelayClosing) && !errors.Is(err, ErrCircuitClosed) {
		t.Logf("the silent end read %v", err)
	}
}

// TestTargetGivesUp: a dialer that sends the target garbage instead of a handshake, and
// goes on sending, loses its circuit once the target gives up on it: the target's Close
// of a stream with data unread resets it, so the relay's splice ends and the dialer's
// writes fail, long before MaxCircuitDuration. (The target used to drop what came
// without returning window: the relay's stream to it stayed full and the circuit, and
// its slot, lasted until the duration limit.)
func TestTargetGivesUp(t *testing.T) {
	tr := newTrio(t, RelayConfig{MaxCircuitDuration: time.Hour}, ClientConfig{})
	c, err := DialConn(ctxT(t, 10*time.Second), tr.c.svc, tr.circuitToB())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	flood := make(chan error, 1)
	go func() {
		junk := bytes.Repeat([]byte{0xff}, 64<<10)
		for {
			if _, err := c.Write(junk); err != nil {
				flood <- err
				return
			}
		}
	}()
	select {
	case err := <-flood:
		t.Logf("the dialer's writes failed with %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the dialer still writes into a circuit whose target gave up")
	}
	waitFor(t, "the circuit to end", func() bool { return tr.relay.Stats().Circuits == 0 })
}
