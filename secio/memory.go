package secio

import (
	"fmt"
	"net"
)

// MemoryBudget is charged for the memory a peer makes a Conn hold: the
// buffers its read side holds beyond the Conn's own small array (the record
// being received, a burst of small records read at once, the plaintext of a
// record until Read has returned all of it). Set it in Config.Memory (and
// LegacyConfig.Memory); one budget may serve many Conns (the root package
// passes its shared memory budget, a mux.Budget).
//
// A Conn reserves the whole size of a buffer before it reads into it, and
// releases exactly that amount when it gives the buffer back: once the
// record it holds has been read and delivered, when the Conn fails, and at
// Close (a Conn that is never closed keeps its reservation). An idle Conn, a
// Read blocked waiting for a record, holds nothing. A record whose bytes are
// still arriving never holds more than 64 KiB beyond what has arrived of it:
// a peer that sends only a length prefix claiming the largest record makes
// the Conn hold 64 KiB, not the record's size. (Once a record above 1 MiB
// has wholly arrived, its buffer may exceed it by its size class's rounding,
// less than a sixteenth of the record.) What has arrived includes the bytes
// waiting in the socket where the Conn can ask it (TCP and Unix sockets on
// Linux, macOS and the BSDs, reached through SyscallConn): a long record
// that is there when its length prefix is read takes one buffer and is read
// straight into it. Otherwise it is received in 64 KiB chunks; while its
// last 64 KiB arrive, the chunks are copied into one buffer for the record,
// and for the length of that copy both are held (and charged).
//
// When Reserve refuses, the Read (or the handshake) fails with an error
// wrapping ErrMemoryBudget and the Conn is closed without a close record.
// Waiting for memory instead would keep the connection and the part of the
// record that arrived, with no bound on when memory frees, and a record's
// bytes cannot be skipped to read on.
//
// The write side is not charged: it holds a sealed frame only while a Write
// is in progress or queued behind one (at most three frames of at most the
// local MaxFrameSize), sized by this side's writes, not by the peer.
type MemoryBudget interface {
	// Reserve takes n bytes from the budget if all of them are free, and
	// reports whether it did; it takes nothing otherwise. It must be safe
	// for concurrent use.
	Reserve(n int64) bool
	// Release gives back n bytes that Reserve took.
	Release(n int64)
}

// readAhead is the most a read buffer commits beyond what has arrived of
// the record it is for (buffer sizes counted whole), and the size of the
// chunks a long record is received in.
const readAhead = 64 << 10

// take borrows a pooled buffer of at least size bytes for the read side,
// first charging its whole size to the memory budget.
func (in *inHalf) take(size int) (*[]byte, error) {
	n := int64(classSize(bufferClass(size)))
	if in.mem != nil && !in.mem.Reserve(n) {
		return nil, fmt.Errorf("%w: a %d-byte read buffer", ErrMemoryBudget, n)
	}
	in.charged += n
	return getBuffer(size), nil
}

// give returns a buffer from take to its pool and its charge to the budget.
func (in *inHalf) give(b *[]byte) {
	n := int64(cap(*b))
	putBuffer(b)
	in.charged -= n
	if in.mem != nil {
		in.mem.Release(n)
	}
}

// arrived reports whether a buffer of full bytes for a pending record of n
// bytes (in.buf[in.r:] starts it) commits at most readAhead beyond what has
// arrived of the record, or the whole record has arrived (see stage). What
// has arrived is what is buffered and, if that falls short, what waits in
// the socket, counted up to the record's end: the socket is asked once per
// long record, and only when a buffer would be borrowed for it.
func (in *inHalf) arrived(conn net.Conn, full, n int) bool {
	have := in.w - in.r
	if have >= n || full-have <= readAhead {
		return true
	}
	if !in.queueLooked {
		// Looked up at the first long record, not per Conn: an idle or chatty Conn never
		// pays for it.
		in.queueLooked = true
		in.queue = newSocketQueue(conn)
	}
	q, ok := in.queue.waiting()
	if !ok {
		return false
	}
	have = min(have+q, n)
	return have == n || full-have <= readAhead
}

// stage receives the first part of a pending record of n bytes whose buffer
// would commit more than readAhead beyond what has arrived: in chunks of
// readAhead bytes, each borrowed when the one before is full, so that what
// is committed grows with what arrives. Once the record's buffer is at most
// readAhead beyond what has arrived, it copies the chunks into it and
// returns, and fill reads the rest straight into it. The buffer of a record
// above 1 MiB may be rounded up by more than readAhead (classes are a
// sixteenth apart there): it is borrowed once the whole record has arrived,
// and commits at most that rounding. A read that fails (a deadline) leaves
// the chunks in place for the next call.
//
// A record that is in the socket when its length prefix is read does not
// come here (arrived): where the socket can tell, the chunks and their copy
// are left to records whose bytes are still on their way.
//
// Growing one buffer as bytes arrive would copy what arrived at every step:
// under a fixed bound beyond arrival the steps are linear, and the copies
// quadratic (640 KiB for a 263 KiB record). Chunks copy each byte once, all
// but the last readAhead bytes of the record's buffer (208 KiB of a 256 KiB
// record, whose buffer is 272 KiB).
func (in *inHalf) stage(conn net.Conn, n int) error {
	full := classSize(bufferClass(n))
	if !in.staging {
		in.pending = n
	}
	for {
		if have := in.stagedLen + in.w - in.r; have == n || full-have <= readAhead {
			return in.assemble(n)
		}
		if !in.staging || in.w == len(in.buf) {
			if err := in.nextChunk(); err != nil {
				return err
			}
		}
		// At least one more byte, no further than the chunk, the record, or
		// the point where the record's buffer may be borrowed: what
		// arrives after it is read straight into that buffer, not copied.
		limit := min(len(in.buf), in.r+n-in.stagedLen, in.r+full-readAhead-in.stagedLen)
		if err := in.readUntil(conn, in.w-in.r+1, limit); err != nil {
			return err
		}
	}
}

// nextChunk borrows a chunk for a staged record: the first one takes the
// record's bytes already buffered (in the small array or a smaller pooled
// buffer, which goes back); a later one follows a full chunk, which is kept.
func (in *inHalf) nextChunk() error {
	c, err := in.take(max(readAhead, in.w-in.r))
	if err != nil {
		return err
	}
	if in.staging {
		in.staged = append(in.staged, in.pooled)
		in.stagedLen += in.w
		in.w = 0
	} else {
		in.w = copy(*c, in.buf[in.r:in.w])
		if in.pooled != nil {
			in.give(in.pooled)
		}
		in.staging = true
	}
	in.r = 0
	in.pooled = c
	in.buf = *c
	return nil
}

// assemble moves a staged record's chunks and the bytes of the current one
// into one buffer for the record, and gives the chunks back.
func (in *inHalf) assemble(n int) error {
	b, err := in.take(n)
	if err != nil {
		return err
	}
	dst := *b
	off := 0
	for _, c := range in.staged {
		off += copy(dst[off:], *c)
	}
	off += copy(dst[off:], in.buf[in.r:in.w])
	in.copied += int64(off)
	in.unstage()
	in.pooled, in.buf, in.r, in.w = b, dst, 0, off
	return nil
}

// unstage gives back a staged record's chunks and the current one.
func (in *inHalf) unstage() {
	if !in.staging {
		return
	}
	for i, c := range in.staged {
		in.give(c)
		in.staged[i] = nil
	}
	in.staged = in.staged[:0]
	if cap(in.staged) > 8 {
		in.staged = nil // more than a 512 KiB record's worth
	}
	in.give(in.pooled)
	in.pooled, in.buf, in.r, in.w = nil, in.small[:], 0, 0
	in.staging, in.pending, in.stagedLen = false, 0, 0
}
