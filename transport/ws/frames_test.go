//go:build !js

package ws

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// frameStream returns frames with the given payload lengths (masked or not, as a client's
// or a server's) and the offsets at which each ends.
func frameStream(lengths []int, masked bool) (stream []byte, ends []int) {
	for _, n := range lengths {
		f := []byte{0x82}
		m := byte(0)
		if masked {
			m = 0x80
		}
		switch {
		case n < 126:
			f = append(f, m|byte(n))
		case n < 1<<16:
			f = append(f, m|126)
			f = binary.BigEndian.AppendUint16(f, uint16(n))
		default:
			f = append(f, m|127)
			f = binary.BigEndian.AppendUint64(f, uint64(n))
		}
		if masked {
			f = append(f, 1, 2, 3, 4)
		}
		f = append(f, make([]byte, n)...)
		stream = append(stream, f...)
		ends = append(ends, len(stream))
	}
	return stream, ends
}

// TestFrameCursor feeds streams of frames of every header size to a frameCursor in
// pieces of every size and checks that it is at a boundary exactly where frames end.
func TestFrameCursor(t *testing.T) {
	lengths := []int{0, 1, 125, 126, 127, 65535, 65536, 70000, 0, 3}
	for _, masked := range []bool{false, true} {
		stream, ends := frameStream(lengths, masked)
		isEnd := map[int]bool{0: true}
		for _, e := range ends {
			isEnd[e] = true
		}
		for _, piece := range []int{1, 2, 3, 7, 13, 4096, len(stream)} {
			var f frameCursor
			for off := 0; off < len(stream); {
				n := min(piece, len(stream)-off)
				f.advance(stream[off : off+n])
				off += n
				// Within a piece the cursor cannot tell; at its end it must.
				if f.atBoundary() != isEnd[off] {
					t.Fatalf("masked=%v piece=%d: at %d atBoundary=%v, want %v", masked, piece, off, f.atBoundary(), isEnd[off])
				}
			}
		}
		// Random pieces.
		rng := rand.New(rand.NewPCG(1, 2))
		var f frameCursor
		for off := 0; off < len(stream); {
			n := min(1+rng.IntN(300), len(stream)-off)
			f.advance(stream[off : off+n])
			off += n
			if f.atBoundary() != isEnd[off] {
				t.Fatalf("masked=%v random pieces: at %d atBoundary=%v, want %v", masked, off, f.atBoundary(), isEnd[off])
			}
		}
	}
}

// FuzzFrameCursor checks the cursor against the frame ends computed from lengths the
// fuzzer chooses, cut where it chooses.
func FuzzFrameCursor(f *testing.F) {
	f.Add([]byte{0, 1, 125, 126, 200}, true, uint64(7))
	f.Add([]byte{255, 0, 3}, false, uint64(1))
	f.Fuzz(func(t *testing.T, spec []byte, masked bool, seed uint64) {
		if len(spec) > 64 {
			return
		}
		lengths := make([]int, len(spec))
		for i, b := range spec {
			lengths[i] = int(b) * int(b) // up to 65025: every header size but the longest
		}
		stream, ends := frameStream(lengths, masked)
		isEnd := map[int]bool{0: true}
		for _, e := range ends {
			isEnd[e] = true
		}
		rng := rand.New(rand.NewPCG(seed, seed))
		var c frameCursor
		for off := 0; off < len(stream); {
			n := min(1+rng.IntN(64), len(stream)-off)
			c.advance(stream[off : off+n])
			off += n
			if c.atBoundary() != isEnd[off] {
				t.Fatalf("at %d atBoundary=%v, want %v", off, c.atBoundary(), isEnd[off])
			}
		}
	})
}
