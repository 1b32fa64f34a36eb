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

// TestRecvBufOrder writes frames of random sizes, copied into chunks or pushed as segments
// of slabs (records.go), and reads them back in pieces of random sizes: the bytes come out
// in order, what the buffer holds is the size of its chunks, every slab alive is reserved
// whole, and an empty buffer holds no piece and keeps no slab alive.
func TestRecvBufOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := &Session{budget: NewBudget(1<<30, nil)}
	var b recvBuf
	var want, got []byte
	for range 1000 {
		switch rng.IntN(3) {
		case 0, 1:
			p := make([]byte, rng.IntN(40<<10))
			for i := range p {
				p[i] = byte(rng.Uint32())
			}
			want = append(want, p...)
			if rng.IntN(2) == 0 || len(p) == 0 {
				fill(&b, p)
				break
			}
			sl := s.newSlab(len(p) + 100)
			seg := sl.buf[50 : 50+len(p) : 50+len(p)]
			copy(seg, p)
			sl.refs.Add(1)
			b.push(seg, sl)
			sl.unref() // the parser's reference
		case 2:
			p := make([]byte, rng.IntN(50<<10))
			n := b.Read(p)
			got = append(got, p[:n]...)
		}
		if b.Len() != len(want)-len(got) {
			t.Fatalf("Len %d, want %d", b.Len(), len(want)-len(got))
		}
		held := 0
		for _, p := range b.chunks {
			if p.slab == nil {
				held += cap(p.b)
			}
		}
		if held != b.held {
			t.Fatalf("held %d, the chunks' size %d", b.held, held)
		}
		if live := s.slabs.live; s.budget.Used() != live {
			t.Fatalf("%d bytes of slabs alive, %d reserved", live, s.budget.Used())
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
	if s.slabs.live != 0 || s.budget.Used() != 0 {
		t.Fatalf("an empty buffer keeps %d bytes of slabs alive, %d reserved", s.slabs.live, s.budget.Used())
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
