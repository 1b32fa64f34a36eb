package mux

import (
	"io"
	"math/bits"
	"sync"
	"sync/atomic"
)

// Record input: over a connection that authenticates its input a record at a time (a
// secio.Conn), the session reads each record whole into a buffer of its own, a slab, and
// parses frames out of it. The connection decrypts straight into the slab (a read of a
// 12-byte header would have it decrypt the record into its own buffer and copy the record
// out piece by piece), and a large data frame is not copied at all on its way to the
// application: its stream keeps a reference to its part of the slab (a segment), which the
// stream's Read copies from. Small frames are copied into the stream's chunks (recvbuf.go),
// so that a few bytes never keep a large slab alive.
//
// What the slabs hold is charged to the session's budget: a slab is reserved whole before
// the record is read into it, and stays reserved whole until the last of its references
// (the parser's, a segment's) goes and the slab goes back to its pool. A segment is part of
// its slab's reservation, not of its stream's: while any segment is held, every byte of its
// slab is (a segment read, or dropped with its stream, does not free its bytes while
// another segment keeps the slab alive), so the reservation is the slab's, released once,
// by its last holder. A slab the budget refuses is not made: that record is read through
// the connection's own buffer instead, as over a plain connection.

// recordReader is a connection whose input arrives in records: NextRecord waits for the
// next one and returns the size of buffer a Read needs to take all of its data at once.
type recordReader interface {
	NextRecord() (int, error)
}

// shareMin is the smallest part of a data frame handed to a stream as a segment of its
// slab; shorter parts are copied. A segment must also be at least 1/shareFraction of its
// slab, so that the rest of the slab that a segment keeps alive (and reserved) is at most a
// few times its own size.
const (
	shareMin      = chunkSize
	shareFraction = 8
)

// slab is a buffer holding one record's plaintext.
type slab struct {
	buf   []byte
	owner *Session
	// refs counts the parser (while the session has unparsed bytes in it) and every
	// segment a stream holds; the last to let go gives the slab's reservation back.
	refs atomic.Int32
}

// slabs is the session's record input state shared with streams and shutdown.
type slabs struct {
	mu     sync.Mutex
	live   int64 // the size of every live slab: reserved until the session closed
	closed bool  // the session closed: live was given back, and no more is taken
}

// Slab sizes: the smallest is 1 KiB; above, sixteen classes per doubling, so that a slab
// is at most a sixteenth larger than its record, up to the largest record a secio.Conn
// accepts (16 MiB and its framing).
const (
	slabMinShift = 10
	slabClasses  = (25-slabMinShift)*16 + 1
)

var slabPools [slabClasses]sync.Pool

// slabClass returns the class of the smallest slab that holds n bytes, and its size.
func slabClass(n int) (class, size int) {
	if n <= 1<<slabMinShift {
		return 0, 1 << slabMinShift
	}
	k := bits.Len(uint(n-1)) - 1 // 1<<k < n <= 1<<(k+1)
	step := (n - 1<<k + 1<<(k-4) - 1) >> (k - 4)
	return (k-slabMinShift)*16 + step, 1<<k + step<<(k-4)
}

// newSlab returns a slab of at least n bytes, its whole size reserved from the session's
// budget, or nil if the budget refuses it or the session has closed.
func (s *Session) newSlab(n int) *slab {
	class, size := slabClass(n)
	if class >= slabClasses || !s.budget.reserve(int64(size)) {
		return nil
	}
	sl := &s.slabs
	sl.mu.Lock()
	if sl.closed {
		sl.mu.Unlock()
		s.budget.release(int64(size))
		return nil
	}
	sl.live += int64(size)
	sl.mu.Unlock()
	b, _ := slabPools[class].Get().(*slab)
	if b == nil {
		b = &slab{buf: make([]byte, size)}
	}
	b.owner = s
	b.refs.Store(1)
	return b
}

// unref drops a reference; the last one gives the slab's reservation back and the slab to
// its pool.
func (b *slab) unref() {
	if b.refs.Add(-1) > 0 {
		return
	}
	s := b.owner
	sl := &s.slabs
	size := int64(len(b.buf))
	sl.mu.Lock()
	sl.live -= size
	if !sl.closed {
		s.budget.release(size)
	}
	sl.mu.Unlock()
	b.owner = nil
	class, _ := slabClass(len(b.buf))
	slabPools[class].Put(b)
}

// closeSlabs gives back what live slabs hold reserved, once the session has closed and its
// streams have let go of their reservations (segments a stream still holds stay readable,
// as its chunks do); slabs still referenced go back to their pools, unreserved, when their
// last segment is read or dropped.
func (s *Session) closeSlabs() {
	sl := &s.slabs
	sl.mu.Lock()
	if !sl.closed {
		sl.closed = true
		s.budget.release(sl.live)
	}
	sl.mu.Unlock()
}

// input makes the unparsed bytes of a record available in s.in, reading the next record
// if none are left. It returns false if that record is to be read from the connection
// directly (the budget refused its slab, or the connection does not deliver records).
// Called by the holder of the read turn.
func (s *Session) input() (bool, error) {
	if s.rr == nil {
		return false, nil
	}
	if s.in != nil {
		return true, nil
	}
	size, err := s.rr.NextRecord()
	if err != nil {
		return false, err
	}
	b := s.newSlab(size)
	if b == nil {
		return false, nil
	}
	n, err := s.conn.Read(b.buf[:size])
	if n == 0 {
		b.unref()
		if err == nil {
			err = io.ErrNoProgress
		}
		return false, err
	}
	s.in, s.inR, s.inW = b, 0, n
	return true, nil
}

// unparsed returns the bytes of the current record not parsed yet.
func (s *Session) unparsed() []byte { return s.in.buf[s.inR:s.inW] }

// parsed moves past k parsed bytes of the current record, letting go of its slab at its
// end.
func (s *Session) parsed(k int) {
	s.inR += k
	if s.inR == s.inW {
		s.dropInput()
	}
}

// dropInput lets go of the current record's slab, if any: parsed, or the session failed or
// closed.
func (s *Session) dropInput() {
	if s.in != nil {
		s.in.unref()
		s.in, s.inR, s.inW = nil, 0, 0
	}
}

// shareLocked hands the next k bytes of the current record to st as a segment of its slab,
// if k is large enough for that; otherwise it reports false and the caller copies them.
// The segment stays charged as part of its slab (st's reservation does not cover it): the
// slab's reservation goes back only once its last segment has. st.mu is held.
func (s *Session) shareLocked(st *Stream, k int) bool {
	b := s.in
	if k < shareMin || k < len(b.buf)/shareFraction {
		return false
	}
	b.refs.Add(1)
	st.buf.push(b.buf[s.inR:s.inR+k:s.inR+k], b)
	s.parsed(k)
	return true
}
