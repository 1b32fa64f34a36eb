package mux

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// fill appends p as the receive goroutine does: space, copy unlocked, commit.
func fill(b *recvBuf, p []byte) {
	for len(p) > 0 {
		sp := b.space(len(p))
		k := copy(sp, p)
		b.commit(k)
		p = p[k:]
	}
}

// TestRecvBufOrder writes frames of random sizes and reads them back in pieces of random
// sizes: the bytes come out in order, and an empty buffer holds no chunk.
func TestRecvBufOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var b recvBuf
	var want, got []byte
	for range 500 {
		if rng.IntN(2) == 0 {
			p := make([]byte, rng.IntN(40<<10))
			for i := range p {
				p[i] = byte(rng.Uint32())
			}
			fill(&b, p)
			want = append(want, p...)
		} else {
			p := make([]byte, rng.IntN(50<<10))
			n := b.Read(p)
			got = append(got, p[:n]...)
		}
		if b.Len() != len(want)-len(got) {
			t.Fatalf("Len %d, want %d", b.Len(), len(want)-len(got))
		}
	}
	rest := make([]byte, b.Len())
	got = append(got, rest[:b.Read(rest)]...)
	if !bytes.Equal(got, want) {
		t.Fatal("bytes out of order")
	}
	if b.chunks != nil {
		t.Fatalf("an empty buffer holds %d chunks", len(b.chunks))
	}
}

// TestRecvBufSmallFrames: a few bytes take a small chunk, and a flood of tiny frames costs
// no more than its bytes and one chunk of slack.
func TestRecvBufSmallFrames(t *testing.T) {
	var b recvBuf
	fill(&b, []byte("answer"))
	if len(b.chunks) != 1 || cap(b.chunks[0].b) != chunkClasses[0] {
		t.Fatalf("6 bytes took a chunk of %d", cap(b.chunks[0].b))
	}
	for range 100000 {
		fill(&b, []byte{1})
	}
	held := 0
	for _, c := range b.chunks {
		held += cap(c.b)
	}
	if held > b.Len()+chunkSize {
		t.Fatalf("%d bytes held for %d bytes of data", held, b.Len())
	}
	b.free()
	if b.chunks != nil || b.Len() != 0 {
		t.Fatal("free left data")
	}
}

// TestRecvBufFreeDuringFill: dropping the buffer while the receive goroutine fills its last
// chunk keeps that chunk until the fill ends, then frees everything.
func TestRecvBufFreeDuringFill(t *testing.T) {
	var b recvBuf
	fill(&b, make([]byte, 40<<10))
	sp := b.space(100)
	b.free()
	copy(sp, "still writable")
	b.commit(14)
	if b.chunks != nil || b.Len() != 0 {
		t.Fatalf("after the fill: %d chunks, %d bytes", len(b.chunks), b.Len())
	}
}
