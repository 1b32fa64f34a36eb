package tendril

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/internal/faultnet"
	"github.com/tendril-p2p/tendril/mux"
	"github.com/tendril-p2p/tendril/protocol"
	"github.com/tendril-p2p/tendril/secio"
)

// The fault matrix: every fault of internal/faultnet, in each direction, at each phase of a
// connection (secio handshake, protocol negotiation, data). A proxy sits between a dialer A
// and a listener B; a third peer C is connected to B directly and must not notice anything.
// For each case the test checks that the fault is detected by the side that receives the
// faulty bytes as the right typed error, that an event reports it, that no corrupt, replayed
// or truncated message reaches a handler (every message carries a BLAKE3 of its content and a
// sequence number), that C's session keeps working, and that no goroutine or descriptor is
// left behind.

type phase int

const (
	phaseHandshake phase = iota
	phaseNegotiation
	phaseData
)

func (p phase) String() string {
	return [...]string{"handshake", "negotiation", "data"}[p]
}

const (
	faultHandshakeTimeout   = 2 * time.Second
	faultNegotiationTimeout = 2 * time.Second
	faultStall              = 4 * time.Second // longer than both timeouts
	faultDataMsgs           = 20
	faultDataSkip           = 5 // data messages that pass before the fault
	faultDataSize           = 2000
)

// faultCase is one fault and what must come of it.
type faultCase struct {
	name string
	// fault builds the fault for a phase and direction; nil means the case does not apply.
	fault func(ph phase) *faultnet.Fault
	// want is the error the receiving side must report, per phase; nil: the fault is
	// transparent (everything must be delivered).
	want func(ph phase) []error
}

var errReset = []error{syscall.ECONNRESET, syscall.EPIPE}

func faultCases() []faultCase {
	// at places a fault: in the handshake at record rec, later on the first record that
	// carries data (negotiation) or a data message (data), after faultDataSkip of them.
	at := func(k faultnet.Kind, rec, off int, bit uint) func(ph phase) *faultnet.Fault {
		return func(ph phase) *faultnet.Fault {
			f := &faultnet.Fault{Kind: k, Offset: off, Bit: bit, Delay: 300 * time.Millisecond}
			switch ph {
			case phaseHandshake:
				f.Record = rec
			case phaseNegotiation:
				// Records 0-1 each way are the handshake (ClientHello then DialerAuth up,
				// ServerHello then ListenerAuth down); header-only mux frames
				// (stream open, window updates, pings) have a 28-byte body, the negotiation
				// message more.
				f.Record, f.MinLen = 2, mux.FrameHeaderSize+16+1
			case phaseData:
				f.Record, f.MinLen, f.Skip = 2, faultDataSize, faultDataSkip
			}
			return f
		}
	}
	same := func(errs ...error) func(phase) []error { return func(phase) []error { return errs } }
	split := func(hs, later []error) func(ph phase) []error {
		return func(ph phase) []error {
			if ph == phaseHandshake {
				return hs
			}
			return later
		}
	}
	auth := []error{secio.ErrAuthFailed}
	invalid := []error{secio.ErrInvalidMessage}
	stall := at(faultnet.Delay, 1, 0, 0)
	return []faultCase{
		// A bit flipped in a length prefix: an oversize handshake message or frame.
		{"flip-length", at(faultnet.FlipBit, 0, 0, 7), split(invalid, []error{secio.ErrFrameTooLarge})},
		// A bit flipped in a body: an Auth record (AEAD) in the handshake, ciphertext later.
		{"flip-body", at(faultnet.FlipBit, 1, 10, 0), same(secio.ErrAuthFailed)},
		{"truncate", at(faultnet.Truncate, 1, 6, 0), same(io.ErrUnexpectedEOF)},
		// A duplicated hello is read where the Auth record is due: too long for one.
		{"duplicate", at(faultnet.Duplicate, 0, 0, 0), split(invalid, auth)},
		// A dropped ServerHello makes the dialer read the ListenerAuth as one; a dropped
		// ClientHello leaves the listener waiting (the dialer speaks again only after an
		// answer): its hello timeout ends it, or the dialer's handshake timeout, which closes
		// the connection under the listener's read (whichever of the two fires first).
		{"drop", at(faultnet.Drop, 0, 0, 0), split([]error{secio.ErrInvalidMessage, secio.ErrHandshakeTimeout, io.ErrUnexpectedEOF}, auth)},
		{"reset", at(faultnet.Reset, 1, 0, 0), same(errReset...)},
		{"delay", at(faultnet.Delay, 1, 0, 0), same()},
		{"split", at(faultnet.Split, 0, 0, 0), same()},
		{"stall", func(ph phase) *faultnet.Fault {
			if ph == phaseData {
				return nil // no timeout applies to a slow but live stream
			}
			f := stall(ph)
			f.Delay = faultStall
			return f
		}, split([]error{secio.ErrHandshakeTimeout}, []error{protocol.ErrNegotiationTimeout})},
	}
}

func TestFaultMatrix(t *testing.T) {
	needTCP(t)
	for _, fc := range faultCases() {
		for _, ph := range []phase{phaseHandshake, phaseNegotiation, phaseData} {
			for _, dir := range []faultnet.Direction{faultnet.Up, faultnet.Down} {
				f := fc.fault(ph)
				if f == nil {
					continue
				}
				f.Dir = dir
				t.Run(fmt.Sprintf("%s/%s/%s", fc.name, ph, dir), func(t *testing.T) {
					runFault(t, *f, ph, fc.want(ph))
				})
			}
		}
	}
}

func matchesAny(err error, want []error) bool {
	for _, w := range want {
		if errors.Is(err, w) {
			return true
		}
	}
	return false
}

func runFault(t *testing.T, f faultnet.Fault, ph phase, want []error) {
	checkNoLeaks(t)
	const proto = "/rel"
	muxCfg := mux.DefaultConfig()
	muxCfg.KeepAliveInterval = 500 * time.Millisecond // so that a dropped frame is noticed
	cfg := func(h Handler) Config {
		return Config{
			Protocols:          []Protocol{{Name: proto, Versions: []string{"1.0"}, Handler: h}},
			HandshakeTimeout:   faultHandshakeTimeout,
			NegotiationTimeout: faultNegotiationTimeout,
			ShutdownTimeout:    2 * time.Second,
			Mux:                muxCfg,
		}
	}
	ca, cb, cc := newChecker(), newChecker(), newChecker()
	a, b, c := newService(t, cfg(ca)), newService(t, cfg(cb)), newService(t, cfg(cc))
	la, lb := collectEvents(a), collectEvents(b)
	bAddr := listen(t, b)
	ctx := context.Background()

	// C: a well-behaved peer on B, before and after the fault.
	sc := dialOpen(t, c, bAddr, proto)
	if err := sendSeq(sc, proto, 0, 10, 500); err != nil {
		t.Fatal(err)
	}
	bc := b.Session(c.ID())
	cb.waitCount(t, bc, 10)

	_, target, err := bAddr.hostPort()
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := faultnet.New(target, f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	pAddr := MustParseAddr("/ip4/127.0.0.1/tcp/" + strconv.Itoa(proxy.Port())).WithPeer(b.ID())

	// The receiver of the faulty bytes, and the one that reports a negotiation timeout.
	recvLog, recvSvc := lb, b
	if f.Dir == faultnet.Down {
		recvLog, recvSvc = la, a
	}
	detector := recvLog
	if f.Kind == faultnet.Delay && len(want) > 0 && ph == phaseNegotiation {
		detector = la // the opener's negotiation times out, whichever direction stalls
	}
	peerOf := func(svc *Service) secio.PeerID {
		if svc == a {
			return b.ID()
		}
		return a.ID()
	}

	var opErr error // what A's calls returned
	var sa *Session
	sa, opErr = a.Dial(ctx, pAddr)
	if opErr == nil && ph >= phaseNegotiation {
		opErr = sa.OpenProtocol(ctx, proto)
	}
	sentAB, sentBA := 0, 0 // messages sent by A to B and by B to A
	if opErr == nil && ph == phaseData {
		// The first faultDataSkip messages go one at a time, each delivered before the
		// next is sent, so that each is one frame (the Service coalesces queued messages);
		// the fault hits the first frame after them, which holds some of the rest.
		ba := waitProtocol(t, b, a.ID(), proto)
		sender, receiver, ck := sa, ba, cb
		if f.Dir == faultnet.Down {
			sender, receiver, ck = ba, sa, ca
		}
		for i := 0; i < faultDataSkip && opErr == nil; i++ {
			opErr = sendSeq(sender, proto, i, i+1, faultDataSize)
			ck.waitCount(t, receiver, i+1)
		}
		if opErr == nil {
			opErr = sendSeq(sender, proto, faultDataSkip, faultDataMsgs, faultDataSize)
		}
		if f.Dir == faultnet.Up {
			sentAB = faultDataMsgs
		} else {
			sentBA = faultDataMsgs
		}
	}

	if len(want) == 0 {
		// A transparent fault: everything works, and messages flow both ways.
		if opErr != nil {
			t.Fatalf("fault %v should be harmless: %v", f, opErr)
		}
		if ph < phaseData {
			if err := sa.OpenProtocol(ctx, proto); err != nil {
				t.Fatal(err)
			}
		}
		if err := sendSeq(sa, proto, sentAB, sentAB+5, faultDataSize); err != nil {
			t.Fatal(err)
		}
		ba := waitProtocol(t, b, a.ID(), proto)
		if err := sendSeq(ba, proto, sentBA, sentBA+5, faultDataSize); err != nil {
			t.Fatal(err)
		}
		cb.waitCount(t, ba, sentAB+5)
		ca.waitCount(t, sa, sentBA+5)
	} else {
		typ := EventSessionClosed
		switch {
		case ph == phaseHandshake:
			typ = EventHandshakeFailed
		case detector == la && f.Kind == faultnet.Delay:
			typ = EventNegotiationFailed
		}
		e := detector.waitFor(t, fmt.Sprintf("%s event with %v", typ, want), func(e Event) bool {
			return e.Type == typ && matchesAny(e.Err, want)
		})
		t.Logf("detected: %v", e.Err)
		if typ == EventSessionClosed && e.Peer != peerOf(recvSvc) {
			t.Fatalf("session-closed event for the wrong peer: %v", e)
		}
		// The dialer's own call fails with the typed error when A is the receiver.
		if f.Dir == faultnet.Down && ph == phaseHandshake && !matchesAny(opErr, want) {
			t.Fatalf("Dial: %v, want %v", opErr, want)
		}
		if typ == EventNegotiationFailed && !matchesAny(opErr, want) {
			t.Fatalf("OpenProtocol: %v, want %v", opErr, want)
		}
		if typ == EventNegotiationFailed {
			// A negotiation timeout ends the stream, not the session.
			if a.Session(b.ID()) == nil {
				t.Fatal("a negotiation timeout closed the session")
			}
		} else {
			// The broken session is gone on both sides.
			waitGone(t, a, b.ID())
			waitGone(t, b, a.ID())
		}
		if ph == phaseData && f.Kind != faultnet.Duplicate {
			// Only messages before the fault may have arrived. (A duplicated frame is
			// delivered once; the checker reports its replay as a sequence violation.)
			ck, others := cb, cb.count(bc) // B's checker also counts C's messages
			if f.Dir == faultnet.Down {
				ck, others = ca, 0
			}
			ck.mu.Lock()
			n := ck.total - others
			ck.mu.Unlock()
			if n > faultDataSkip {
				t.Fatalf("%d messages delivered, only %d were before the fault", n, faultDataSkip)
			}
		}
	}
	if proxy.Fired() != 1 {
		t.Fatalf("the fault fired %d times, want 1", proxy.Fired())
	}

	// C never noticed.
	if b.Session(c.ID()) != bc {
		t.Fatal("C's session was closed by a fault on another session")
	}
	if err := sendSeq(sc, proto, 10, 20, 500); err != nil {
		t.Fatal(err)
	}
	cb.waitCount(t, bc, 20)
	if _, ok := lb.find(func(e Event) bool { return e.Type == EventSessionClosed && e.Peer == c.ID() }); ok {
		t.Fatal("B reported C's session closed")
	}
	ca.assertClean(t)
	cb.assertClean(t)
	cc.assertClean(t)
}

// waitProtocol waits until svc's session with peer has the protocol open, and returns the
// session. (Session.OpenProtocol can return on the opener before the acceptor has
// registered its end of the stream.)
func waitProtocol(t *testing.T, svc *Service, peer secio.PeerID, name string) *Session {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if sess := svc.Session(peer); sess != nil {
			for _, p := range sess.Protocols() {
				if p.Name == name {
					return sess
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("protocol %s never opened with %s", name, peer)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitGone waits until svc has no session with peer.
func waitGone(t *testing.T, svc *Service, peer secio.PeerID) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for svc.Session(peer) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("session with %s still open", peer)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
