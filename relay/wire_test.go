package relay

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"
)

// TestWireRoundTrip: each message decodes to what was encoded.
func TestWireRoundTrip(t *testing.T) {
	p := testPeer(t)
	l := Limits{Bytes: 1 << 20, Duration: 2 * time.Minute}
	if r, err := parseHopRequest(appendHopRequest(nil, hopRequest{typ: msgConnect, target: p})); err != nil || r.target != p {
		t.Fatalf("connect request: %+v, %v", r, err)
	}
	if r, err := parseHopRequest(appendHopRequest(nil, hopRequest{typ: msgReserve})); err != nil || r.typ != msgReserve {
		t.Fatalf("reserve request: %+v, %v", r, err)
	}
	if g, err := parseReserveAnswer(appendReserveAnswer(nil, StatusOK, grant{ttl: time.Hour, limits: l})); err != nil || g.ttl != time.Hour || g.limits != l {
		t.Fatalf("reserve answer: %+v, %v", g, err)
	}
	if _, err := parseReserveAnswer(appendReserveAnswer(nil, StatusReservationRefused, grant{})); !errors.Is(err, ErrReservationRefused) {
		t.Fatalf("refused reserve answer: %v", err)
	}
	if got, err := parseConnectAnswer(appendConnectAnswer(nil, StatusOK, l)); err != nil || got != l {
		t.Fatalf("connect answer: %+v, %v", got, err)
	}
	obs := ma.StringCast("/ip4/1.2.3.4/tcp/5")
	if r, err := parseStopRequest(appendStopRequest(nil, stopRequest{dialer: p, observed: obs, limits: l})); err != nil || r.dialer != p || !r.observed.Equal(obs) || r.limits != l {
		t.Fatalf("stop request: %+v, %v", r, err)
	}
	for s := range Status(8) {
		if err := parseStatus([]byte{byte(s)}); (s == StatusOK) != (err == nil) {
			t.Fatalf("status %d: %v", s, err)
		}
	}
}

// TestWireMalformed: truncated, oversize, out-of-range and trailing input is ErrMalformed.
func TestWireMalformed(t *testing.T) {
	p := testPeer(t)
	good := appendStopRequest(nil, stopRequest{dialer: p, limits: Limits{Bytes: 1, Duration: time.Second}})
	for name, fn := range map[string]func() error{
		"empty hop":        func() error { _, err := parseHopRequest(nil); return err },
		"trailing reserve": func() error { _, err := parseHopRequest([]byte{msgReserve, 0}); return err },
		"bad id":           func() error { _, err := parseHopRequest([]byte{msgConnect, 2, 1, 2}); return err },
		"long id": func() error {
			_, err := parseHopRequest(append([]byte{msgConnect, 100}, make([]byte, 100)...))
			return err
		},
		"zero limits":    func() error { _, err := parseConnectAnswer([]byte{0, 0, 0}); return err },
		"long duration":  func() error { _, err := parseConnectAnswer([]byte{0, 1, 0xff, 0xff, 0x7f}); return err },
		"zero ttl":       func() error { _, err := parseReserveAnswer([]byte{0, 0, 1, 1}); return err },
		"unknown status": func() error { return parseStatus([]byte{99}) },
		"truncated stop": func() error { _, err := parseStopRequest(good[:len(good)-1]); return err },
		"trailing stop":  func() error { _, err := parseStopRequest(append(good, 0)); return err },
		"bad addr":       func() error { _, err := parseStopRequest([]byte{msgConnect, 0, 2, 0xff, 0xff, 1, 1}); return err },
		"long message": func() error {
			_, err := readMsg(bufio.NewReader(bytes.NewReader([]byte{0x80, 0x08})))
			return err
		},
	} {
		if err := fn(); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

// TestParseCircuit: the circuit address form, and what it refuses.
func TestParseCircuit(t *testing.T) {
	r, tg := testPeer(t), testPeer(t)
	s := "/ip4/1.2.3.4/tcp/4001/p2p/" + r.String() + "/p2p-circuit/p2p/" + tg.String()
	c, err := ParseCircuit(s)
	if err != nil || c.Relay.Peer != r || c.Target != tg || c.String() != s {
		t.Fatalf("ParseCircuit(%s) = %v, %v", s, c, err)
	}
	for _, bad := range []string{
		"/ip4/1.2.3.4/tcp/4001/p2p/" + tg.String(),                                   // no circuit
		"/ip4/1.2.3.4/tcp/4001/p2p-circuit/p2p/" + tg.String(),                       // no relay ID
		"/ip4/1.2.3.4/tcp/4001/p2p/" + r.String() + "/p2p-circuit/p2p/",              // no target
		"/ip4/1.2.3.4/tcp/4001/p2p/" + r.String() + "/p2p-circuit/p2p/" + r.String(), // relay is target
		"/ip4/1.2.3.4/tcp/4001/p2p/" + r.String() + "/p2p-circuit/p2p/" + tg.String() + "/x",
		"/ip4/1.2.3.4/tcp/4001/p2p/" + r.String() + "/p2p-circuit/p2p/nonsense",
	} {
		if _, err := ParseCircuit(bad); !errors.Is(err, ErrInvalidCircuit) {
			t.Errorf("ParseCircuit(%s): %v, want ErrInvalidCircuit", bad, err)
		}
	}
	if !IsRelayed(c.Relay.WithPeer(tg)) == IsRelayed(c.Relay) {
		t.Fatal("unreachable")
	}
	if m := circuitMultiaddr(c.Relay.Transport); !strings.HasSuffix(m.String(), "/p2p-circuit") {
		t.Fatalf("circuit multiaddr %s", m)
	}
}

// TestReadFramesBatches: small frames buffered together are forwarded in one batch, and a
// close notice from an end is malformed.
func TestReadFramesBatches(t *testing.T) {
	var in []byte
	for range 100 {
		in = append(in, 1, 'x')
	}
	r := bufio.NewReaderSize(bytes.NewReader(in), readBuffer)
	out, err := readFrames(r, make([]byte, 0, maxFrame+maxHeader))
	if err != nil || len(out) != len(in) {
		t.Fatalf("one call forwarded %d of %d bytes: %v", len(out), len(in), err)
	}
	if _, err := readFrames(r, nil); err != io.EOF {
		t.Fatalf("at the end: %v", err)
	}
	r = bufio.NewReader(bytes.NewReader([]byte{0, 1}))
	if _, err := readFrames(r, nil); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a close notice from an end: %v", err)
	}
	r = bufio.NewReader(bytes.NewReader([]byte{0xff, 0xff, 0x01}))
	if _, err := readFrames(r, nil); !errors.Is(err, ErrMalformed) {
		t.Fatalf("an oversize frame: %v", err)
	}
}

// TestConnFrames: a Conn splits writes into frames and reads them back, and a close
// notice ends it with the typed error.
func TestConnFrames(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	ca := newConn(a, bufio.NewReader(a), testPeer(t), testPeer(t), Limits{}, nil, nil)
	msg := bytes.Repeat([]byte("0123456789"), 4000) // 40 kB: three frames
	go ca.Write(msg)
	// Read the frames off b and play them back to a Conn on the other side.
	c2a, c2b := net.Pipe()
	defer c2a.Close()
	go func() {
		io.CopyN(c2b, b, int64(len(msg))+3+3+2) // headers of 16384, 16384 and 7232
		c2b.Write([]byte{0, byte(CloseBytes)})
	}()
	cb := newConn(c2a, bufio.NewReader(c2a), testPeer(t), testPeer(t), Limits{}, nil, nil)
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(cb, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("read back: %v", err)
	}
	if _, err := cb.Read(got); !errors.Is(err, ErrCircuitBytes) || !errors.Is(err, ErrCircuitClosed) {
		t.Fatalf("after the notice: %v, want ErrCircuitBytes", err)
	}
}
