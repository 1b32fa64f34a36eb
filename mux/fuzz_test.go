package mux

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"testing"
)

// readerConn is a net.Conn reading from r in pieces of random size.
type readerConn struct {
	net.Conn // nil: only Read and Write are used
	r        io.Reader
	rng      *rand.Rand
	written  bytes.Buffer
}

func (c *readerConn) Read(p []byte) (int, error) {
	return c.r.Read(p[:min(len(p), 1+c.rng.IntN(40))])
}

func (c *readerConn) Write(p []byte) (int, error) { return c.written.Write(p) }

// FuzzInspect feeds arbitrary peer bytes through the read side: it must
// never panic, deliver every byte, and change nothing but SYN flags of
// refused streams and pings.
func FuzzInspect(f *testing.F) {
	var seed []byte
	seed = append(seed, hdr(typeWindowUpdate, flagSYN, 1, 0)...)
	seed = append(seed, hdr(typeData, flagSYN, 3, 2)...)
	seed = append(seed, "hi"...)
	seed = append(seed, hdr(typeData, flagSYN|flagFIN, 5, 0)...)
	seed = append(seed, hdr(typePing, flagSYN, 0, 1)...)
	seed = append(seed, hdr(typeWindowUpdate, flagRST|flagACK, 1, 0)...)
	f.Add(seed, uint64(1), uint8(2))
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff}, uint64(2), uint8(0))
	f.Fuzz(func(t *testing.T, in []byte, seed uint64, limit uint8) {
		rng := rand.New(rand.NewPCG(seed, 7))
		rc := &readerConn{r: bytes.NewReader(in), rng: rng}
		fc := newFrameConn(rc, newTracker(int(limit%8), int(limit%8)), 1<<10)
		var out []byte
		for {
			buf := make([]byte, 1+rng.IntN(64))
			n, err := fc.Read(buf)
			out = append(out, buf[:n]...)
			if err != nil {
				break
			}
		}
		fc.wg.Wait()
		if len(out) != len(in) {
			t.Fatalf("delivered %d of %d bytes", len(out), len(in))
		}
		// Walk the frames of the input: only the low byte of the flags of a
		// header may differ, and only by the SYN bit.
		changed := map[int]bool{}
		for i := 0; i+FrameHeaderSize <= len(in); {
			changed[i+3] = true
			i += FrameHeaderSize + bodyLen(in[i:])
		}
		for i := range in {
			if out[i] != in[i] && (!changed[i] || out[i]^in[i] != flagSYN) {
				t.Fatalf("byte %d changed from %#x to %#x", i, in[i], out[i])
			}
		}
		if rc.written.Len()%FrameHeaderSize != 0 {
			t.Fatalf("wrote %d bytes of resets", rc.written.Len())
		}
	})
}

// FuzzCoalesce writes an arbitrary byte stream in arbitrary pieces: the
// bytes on the wire must be the same stream, and every write of a frame that
// fits the limit must be exactly one frame.
func FuzzCoalesce(f *testing.F) {
	var seed []byte
	seed = append(seed, hdr(typeData, 0, 1, 5)...)
	seed = append(seed, "hello"...)
	seed = append(seed, hdr(typeWindowUpdate, 0, 1, 100)...)
	seed = append(seed, hdr(typeData, 0, 1, 300)...)
	seed = append(seed, make([]byte, 300)...)
	f.Add(seed, uint64(1))
	f.Fuzz(func(t *testing.T, in []byte, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 9))
		fc, rc := newTestFrameConn(256)
		for rest := in; len(rest) > 0; {
			n := min(len(rest), 1+rng.IntN(100))
			if k, err := fc.Write(rest[:n]); k != n || err != nil {
				t.Fatalf("Write = %d, %v", k, err)
			}
			rest = rest[n:]
		}
		writes := rc.take()
		var out []byte
		pass := 0 // bytes of a passed-through frame still expected
		for _, w := range writes {
			out = append(out, w...)
			if pass > 0 {
				pass -= len(w)
				continue
			}
			// Stream openings and acceptances held for the next frame come first.
			for len(w) > FrameHeaderSize && isEarly(w) {
				w = w[FrameHeaderSize:]
			}
			if n := FrameHeaderSize + bodyLen(w); n > 256 {
				pass = n - len(w)
			} else if len(w) != n {
				t.Fatalf("a write of %d bytes for a frame of %d", len(w), n)
			}
		}
		// The wire may lack only held frames and an incomplete last frame.
		if !bytes.HasPrefix(in, out) {
			t.Fatal("wire bytes differ from the written stream")
		}
		held := len(in) - len(out)
		if held > 0 && fc.whdrN == 0 && fc.hold == nil && len(fc.early) == 0 {
			t.Fatalf("%d bytes missing with nothing held", held)
		}
		fc.Close()
		fc.wait()
	})
}
