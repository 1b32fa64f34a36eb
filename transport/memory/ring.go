package memory

// ring is a byte queue in a circular buffer, allocated on the first write and grown by
// doubling up to the limit its caller gives: a connection that carries little holds
// little.
type ring struct {
	b    []byte
	r, n int // read offset and length of the bytes held
}

// minRing is the first allocation: room for small messages without regrowing.
const minRing = 4 << 10

// write appends p; the caller has checked that q.n+len(p) <= limit.
func (q *ring) write(p []byte, limit int) {
	if q.n+len(p) > len(q.b) {
		q.grow(q.n+len(p), limit)
	}
	w := q.r + q.n
	if w >= len(q.b) {
		w -= len(q.b)
	}
	// The free space runs from w, wrapping at the end: copying in order fills only it.
	c := copy(q.b[w:], p)
	copy(q.b, p[c:])
	q.n += len(p)
}

// read moves up to len(p) bytes into p and returns how many.
func (q *ring) read(p []byte) int {
	k := min(len(p), q.n)
	c := copy(p[:k], q.b[q.r:])
	copy(p[c:k], q.b)
	q.r += k
	if q.r >= len(q.b) {
		q.r -= len(q.b)
	}
	q.n -= k
	if q.n == 0 {
		q.r = 0 // keep the next writes contiguous
	}
	return k
}

// grow makes room for need bytes (need <= limit).
func (q *ring) grow(need, limit int) {
	size := max(len(q.b)*2, minRing)
	for size < need {
		size *= 2
	}
	size = min(size, limit)
	b := make([]byte, size)
	n := q.read(b)
	q.b, q.r, q.n = b, 0, n
}

// release drops the buffer of a queue that will hold nothing more.
func (q *ring) release() { *q = ring{} }
