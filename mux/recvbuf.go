package mux

import "sync"

// chunkSize is the largest unit of a stream's receive buffer. A stream holds at most one
// partly filled chunk beyond its data, so the budget charges each stream its window plus
// one chunk; small frames share a chunk, so a peer gains nothing by sending tiny ones. A
// small frame arriving on an empty buffer gets a small chunk: a stream holding a few bytes
// nobody has read yet (a negotiation answer, say) holds 512 bytes, not 16 KiB.
const chunkSize = 16 << 10

// chunkClasses are the chunk sizes, smallest first.
var chunkClasses = [...]int{512, 2 << 10, chunkSize}

var chunkPools [len(chunkClasses)]sync.Pool

// chunkClass returns the size of the chunk getChunk(want) returns.
func chunkClass(want int) int {
	for _, size := range chunkClasses {
		if want <= size {
			return size
		}
	}
	return chunkSize
}

func getChunk(want int) []byte {
	size := chunkClass(want)
	for i, c := range chunkClasses {
		if c == size {
			if p, ok := chunkPools[i].Get().(*[]byte); ok {
				return (*p)[:size]
			}
		}
	}
	return make([]byte, size)
}

func putChunk(c []byte) {
	for i, size := range chunkClasses {
		if cap(c) == size {
			c = c[:size]
			chunkPools[i].Put(&c)
			return
		}
	}
}

// recvBuf holds the bytes received on a stream and not yet read: a queue of pieces, each a
// chunk from a pool or a segment of a record's slab (records.go), returned as soon as they
// are read, so an idle stream holds none.
//
// The receive goroutine fills it without holding the stream's lock during network reads:
// under the lock it takes the free space of the last chunk (space), reads into it unlocked,
// and then, locked again, commits what it read. While a fill is in progress the last chunk
// stays in place even if everything before it is read or the buffer is dropped. Every
// method must be called with the owner's lock held.
type recvBuf struct {
	chunks  []piece
	head    int  // read offset in chunks[0]
	tail    int  // write offset in the last piece (a segment's is its length: it is full)
	n       int  // bytes held
	held    int  // the chunks' size in all, which the stream's reservation covers (not segments)
	filling bool // the receive goroutine is reading into the last chunk
	dropped bool // free was called during a fill: free once it ends
}

// piece is part of a recvBuf: a pooled chunk (slab nil), or a segment of a slab. Every
// piece but the last is full to its length. A chunk's capacity is what it holds of the
// stream's reservation; a segment holds none of it (its slab's reservation covers it).
type piece struct {
	b    []byte
	slab *slab
}

// release gives the piece back to its pool or its slab.
func (p piece) release() {
	if p.slab != nil {
		p.slab.unref()
	} else {
		putChunk(p.b)
	}
}

// Len returns the bytes held.
func (b *recvBuf) Len() int { return b.n }

// lastFull reports whether the last piece has no room (or there is none).
func (b *recvBuf) lastFull() bool {
	return len(b.chunks) == 0 || b.tail == len(b.chunks[len(b.chunks)-1].b)
}

// growth returns the bytes of the chunk that space(max) would add (0 if the last chunk has
// room), so that the caller can reserve them first.
func (b *recvBuf) growth(max int) int {
	if b.lastFull() {
		return chunkClass(max)
	}
	return 0
}

// space returns the free part of the last chunk, adding a chunk if there is none, at most
// max bytes, and marks a fill in progress; commit ends it.
func (b *recvBuf) space(max int) []byte {
	if b.lastFull() {
		c := getChunk(max)
		b.chunks = append(b.chunks, piece{b: c})
		b.held += cap(c)
		b.tail = 0
	}
	b.filling = true
	sp := b.chunks[len(b.chunks)-1].b[b.tail:]
	return sp[:min(len(sp), max)]
}

// commit ends a fill that put k bytes into the space returned by space.
func (b *recvBuf) commit(k int) {
	b.filling = false
	if b.dropped {
		b.dropped = false
		b.free()
		return
	}
	b.tail += k
	b.n += k
}

// push appends seg, a segment of slab that the caller has taken a reference to (cap(seg)
// is len(seg)); held does not count it. A chunk it follows is cut to what it holds:
// nothing more is put into it.
func (b *recvBuf) push(seg []byte, slab *slab) {
	if last := len(b.chunks) - 1; last >= 0 {
		b.chunks[last].b = b.chunks[last].b[:b.tail]
	}
	b.chunks = append(b.chunks, piece{b: seg, slab: slab})
	b.tail = len(seg)
	b.n += len(seg)
}

// Read moves up to len(p) bytes into p.
func (b *recvBuf) Read(p []byte) int {
	total := 0
	for len(p) > 0 && b.n > 0 {
		c := b.chunks[0].b
		end := len(c)
		if len(b.chunks) == 1 {
			end = b.tail
		}
		k := copy(p, c[b.head:end])
		b.head += k
		b.n -= k
		total += k
		p = p[k:]
		if b.head == end && len(b.chunks) > 1 {
			if b.chunks[0].slab == nil {
				b.held -= cap(c)
			}
			b.chunks[0].release()
			b.chunks[0] = piece{}
			b.chunks = b.chunks[1:]
			b.head = 0
		}
	}
	if b.n == 0 && !b.filling {
		b.free() // an idle stream keeps no chunk
	}
	return total
}

// free returns every piece to its pool or slab, dropping unread data; during a fill, once
// it ends.
func (b *recvBuf) free() {
	if b.filling {
		// The last chunk is being read into: keep it until commit, drop the rest.
		last := len(b.chunks) - 1
		for i, c := range b.chunks[:last] {
			c.release()
			b.chunks[i] = piece{}
		}
		b.chunks = b.chunks[last:]
		b.held = cap(b.chunks[0].b)
		b.head, b.n, b.dropped = b.tail, 0, true
		return
	}
	for i, c := range b.chunks {
		c.release()
		b.chunks[i] = piece{}
	}
	b.chunks, b.head, b.tail, b.n, b.held = nil, 0, 0, 0, 0
}
