//go:build !js

package ws

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"
)

// frame returns a frame with the first byte b0 (FIN, opcode) and payload, masked with key
// if masked is set.
func frame(b0 byte, masked bool, key uint32, payload []byte) []byte {
	f := []byte{b0}
	m := byte(0)
	if masked {
		m = 0x80
	}
	switch n := len(payload); {
	case n < 126:
		f = append(f, m|byte(n))
	case n < 1<<16:
		f = binary.BigEndian.AppendUint16(append(f, m|126), uint16(n))
	default:
		f = binary.BigEndian.AppendUint64(append(f, m|127), uint64(n))
	}
	if !masked {
		return append(f, payload...)
	}
	f = binary.LittleEndian.AppendUint32(f, key)
	for i, b := range payload {
		f = append(f, b^byte(key>>(8*(i%4))))
	}
	return f
}

// randomStream returns a stream of valid frames as a client (masked) or a server sends
// them: binary messages, some fragmented, of every header size, with pings and pongs
// between frames; the data they carry; and the payload of the last ping.
func randomStream(rng *rand.Rand, masked bool) (stream, data, lastPing []byte) {
	sizes := []int{0, 1, 3, 31, 32, 33, 125, 126, 127, 1000, 65535, 65536, 70000}
	for range 40 {
		parts := 1 + rng.IntN(3)
		for j := range parts {
			p := make([]byte, sizes[rng.IntN(len(sizes))])
			for k := range p {
				p[k] = byte(rng.Uint32())
			}
			data = append(data, p...)
			op := byte(opBinary)
			if j > 0 {
				op = opContinuation
			}
			if j == parts-1 {
				op |= 0x80
			}
			stream = append(stream, frame(op, masked, rng.Uint32(), p)...)
			if rng.IntN(4) == 0 {
				c := make([]byte, rng.IntN(maxControl+1))
				for k := range c {
					c[k] = byte(rng.Uint32())
				}
				op := byte(opPong)
				if rng.IntN(2) == 0 {
					op, lastPing = opPing, c
				}
				stream = append(stream, frame(0x80|op, masked, rng.Uint32(), c)...)
			}
		}
	}
	return stream, data, lastPing
}

// TestParse feeds random streams of frames to a frameReader in pieces of every size, as
// reads would put them in a buffer, and checks that the data comes out whole and in
// order, unmasked, and that the latest ping is the one to answer.
func TestParse(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, server := range []bool{true, false} {
		stream, data, lastPing := randomStream(rng, server)
		for _, piece := range []int{1, 2, 5, 13, 64, 1000, 4096, 65536, 200000, len(stream)} {
			r := frameReader{server: server, maxMessage: MaxMessageLimit}
			var got []byte
			var ping []byte
			buf := make([]byte, piece)
			for off := 0; off < len(stream); {
				n := copy(buf, stream[off:])
				off += n
				m, err := r.parse(buf[:n])
				if err != nil {
					t.Fatalf("server=%v piece=%d: at %d: %v", server, piece, off, err)
				}
				got = append(got, buf[:m]...)
				if r.pongDue {
					ping = append(ping[:0], r.pong[:r.pongLen]...)
					r.pongDue = false
				}
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("server=%v piece=%d: %d bytes out, want the %d sent", server, piece, len(got), len(data))
			}
			if !r.atBoundary() {
				t.Errorf("server=%v piece=%d: not at a boundary at the end", server, piece)
			}
			if !bytes.Equal(ping, lastPing) {
				t.Errorf("server=%v piece=%d: pong payload %x, want the last ping's %x", server, piece, ping, lastPing)
			}
		}
	}
}

// TestParseBad: every frame that breaks the protocol, or tendril's use of it, is refused
// with its error and status, after the data before it.
func TestParseBad(t *testing.T) {
	ok := frame(0x82, true, 7, []byte("ok"))
	long := make([]byte, 1025)
	cases := []struct {
		name   string
		server bool
		in     []byte
		want   error
		code   int
	}{
		{"reserved bit", true, frame(0xc2, true, 1, []byte("x")), ErrBadFrame, 1002},
		{"unknown opcode", true, frame(0x83, true, 1, []byte("x")), ErrBadFrame, 1002},
		{"unknown control opcode", true, frame(0x8b, true, 1, nil), ErrBadFrame, 1002},
		{"unmasked from a client", true, frame(0x82, false, 0, []byte("x")), ErrBadFrame, 1002},
		{"masked from a server", false, frame(0x82, true, 1, []byte("x")), ErrBadFrame, 1002},
		{"fragmented ping", true, frame(0x09, true, 1, []byte("x")), ErrBadFrame, 1002},
		{"ping of 126 bytes", true, frame(0x89, true, 1, make([]byte, 126)), ErrBadFrame, 1002},
		{"continuation outside a message", true, frame(0x80, true, 1, []byte("x")), ErrBadFrame, 1002},
		{"message inside a message", true, append(frame(0x02, true, 1, []byte("a")), frame(0x82, true, 1, []byte("b"))...), ErrBadFrame, 1002},
		{"length top bit", true, []byte{0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4}, ErrBadFrame, 1002},
		{"text", true, frame(0x81, true, 1, []byte("hello")), ErrTextMessage, 1008},
		{"too big in one frame", true, frame(0x82, true, 1, long), ErrMessageTooBig, 1009},
		{"too big in fragments", true, append(frame(0x02, true, 1, long[:600]), frame(0x80, true, 1, long[:600])...), ErrMessageTooBig, 1009},
	}
	for _, c := range cases {
		in := c.in
		prefix := ok
		if !c.server {
			prefix = frame(0x82, false, 0, []byte("ok"))
		}
		in = append(append([]byte(nil), prefix...), in...)
		r := frameReader{server: c.server, maxMessage: 1024}
		buf := append([]byte(nil), in...)
		n, err := r.parse(buf)
		var fe *frameError
		if !errors.As(err, &fe) || !errors.Is(err, c.want) || int(fe.code) != c.code {
			t.Errorf("%s: %v, want %v with status %d", c.name, err, c.want, c.code)
			continue
		}
		// The data before the bad frame comes out: "ok", and a first fragment's.
		want := "ok"
		switch c.name {
		case "message inside a message":
			want = "oka"
		case "too big in fragments":
			want = "ok" + string(long[:600])
		}
		if string(buf[:n]) != want {
			t.Errorf("%s: %d bytes of data before the error, want %d", c.name, n, len(want))
		}
	}
}
