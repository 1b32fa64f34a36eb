package relay

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/net/nettest"

	"github.com/tendril-p2p/tendril"
)

// TestNettest runs the net.Conn conformance tests of golang.org/x/net/nettest (I/O,
// ping-pong, deadlines in the past, present and future, Close during I/O, concurrent
// methods) over a circuit's two Conns, each way round: the dialer's from DialConn and the
// target's, which serveStop hands to the Service's handshake and which the target's stop
// handler is replaced here to catch. Each pair is a new circuit over the same sessions
// (C to relay A, A to target B), so a pair costs a stream each way, not a handshake. The
// Conns' deadlines reach the mux streams below, but their framing sits between: a timeout
// in the middle of a frame must leave both directions usable.
func TestNettest(t *testing.T) {
	tr := newTrio(t, RelayConfig{
		MaxCircuitBytes: 1 << 30, RequestBurst: 64, MaxCircuitsPerPeer: 64, // a circuit per subtest
	}, ClientConfig{})
	targets := catchCircuits(t, tr.b.svc)
	for _, dialerFirst := range []bool{true, false} {
		name := "dialer-first"
		if !dialerFirst {
			name = "target-first"
		}
		t.Run(name, func(t *testing.T) {
			nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
				d, err := DialConn(ctxT(t, 10*time.Second), tr.c.svc, tr.circuitToB())
				if err != nil {
					return nil, nil, nil, err
				}
				var target *Conn
				select {
				case target = <-targets:
				case <-time.After(10 * time.Second):
					d.Close()
					return nil, nil, nil, errors.New("the target did not get the circuit")
				}
				c1, c2 = d, target
				if !dialerFirst {
					c1, c2 = c2, c1
				}
				return c1, c2, func() { d.Close(); target.Close() }, nil
			})
		})
	}
}

// catchCircuits replaces svc's stop handler (its Client's serveStop) with one that
// accepts every circuit as serveStop does but hands its Conn to the test rather than to a
// handshake, and holds the stream until both ends close it.
func catchCircuits(t *testing.T, svc *tendril.Service) <-chan *Conn {
	conns := make(chan *Conn, 1)
	if err := svc.RemoveProtocol(StopProtocol); err != nil {
		t.Fatal(err)
	}
	err := svc.AddProtocol(tendril.Protocol{Name: StopProtocol, Versions: []string{Version},
		StreamHandler: tendril.StreamHandlerFunc(func(c *tendril.Context, _ string, st net.Conn) {
			br := bufio.NewReaderSize(st, readBuffer)
			body, err := readMsg(br)
			if err != nil {
				return
			}
			req, err := parseStopRequest(body)
			if err != nil || writeMsg(st, []byte{byte(StatusOK)}) != nil {
				return
			}
			conns <- newConn(st, br, c.Peer(), req.dialer, req.limits, nil, nil)
			<-c.Done()
		})})
	if err != nil {
		t.Fatal(err)
	}
	return conns
}

// TestDeadlinePassedBuffered: a Read made after the read deadline passed fails at once
// with a timeout even with the rest of a frame already buffered, as a net.Conn's Read does
// with data waiting in the socket (nettest's Reads after a passed deadline find nothing
// buffered); the data is still there once the deadline is cleared.
func TestDeadlinePassedBuffered(t *testing.T) {
	tr := newTrio(t, RelayConfig{}, ClientConfig{})
	targets := catchCircuits(t, tr.b.svc)
	d, err := DialConn(ctxT(t, 10*time.Second), tr.c.svc, tr.circuitToB())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	target := <-targets
	defer target.Close()
	if _, err := d.Write([]byte("hello, world")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(target, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("first Read: %q, %v", buf, err)
	}
	target.SetReadDeadline(time.Now().Add(-time.Second))
	if n, err := target.Read(make([]byte, 10)); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read after the deadline: %d, %v; want 0, os.ErrDeadlineExceeded", n, err)
	}
	target.SetReadDeadline(time.Time{})
	buf = make([]byte, 7)
	if _, err := io.ReadFull(target, buf); err != nil || string(buf) != ", world" {
		t.Fatalf("Read once the deadline is cleared: %q, %v", buf, err)
	}
}

// TestCloseWriteAfterCutFrame: a Write that a deadline cuts part-way through a frame counts
// the frame as written, so a CloseWrite after it sends the frame's rest before the end: the
// other end reads every byte the Writes counted, then io.EOF. Before, the end came in the
// middle of the frame, and the relay reset the circuit: the target read the frames before
// it, then the reset, never the end.
func TestCloseWriteAfterCutFrame(t *testing.T) {
	tr := newTrio(t, RelayConfig{MaxCircuitBytes: 1 << 30}, ClientConfig{})
	targets := catchCircuits(t, tr.b.svc)
	d, err := DialConn(ctxT(t, 10*time.Second), tr.c.svc, tr.circuitToB())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var target *Conn
	select {
	case target = <-targets:
	case <-time.After(10 * time.Second):
		t.Fatal("the target did not get the circuit")
	}
	defer target.Close()
	// Nobody reads at the target, so the windows fill and a deadline cuts a Write; until
	// one cuts a frame rather than falling between two.
	buf := make([]byte, 64<<10)
	total := 0
	for try := 0; len(d.unsent) == 0; try++ {
		if try == 20 {
			t.Fatal("no write deadline cut a frame in 20 tries")
		}
		d.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
		for {
			n, err := d.Write(buf)
			total += n
			if err != nil {
				if !errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatalf("Write: %v, want a timeout", err)
				}
				break
			}
		}
	}
	d.SetWriteDeadline(time.Time{})
	type result struct {
		n   int
		err error
	}
	read := make(chan result, 1)
	go func() {
		n, err := io.Copy(io.Discard, target)
		read <- result{int(n), err}
	}()
	if err := d.CloseWrite(); err != nil {
		t.Fatalf("CloseWrite: %v", err)
	}
	select {
	case r := <-read:
		if r.err != nil || r.n != total {
			t.Fatalf("the target read %d bytes and %v; want the %d written and io.EOF", r.n, r.err, total)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the target's read did not end")
	}
}
