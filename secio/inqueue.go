package secio

import (
	"net"
	"syscall"
)

// A record longer than a read buffer may commit ahead of arrival (readAhead)
// is received in chunks and then copied into one buffer for the whole record
// (memory.go, stage). When its length prefix is read, though, much of it may
// already be here: in the socket's receive queue, received by this host and
// not yet read. Where the socket can say how much that is (FIONREAD, on
// Linux, macOS and the BSDs), a record that has arrived to within readAhead
// of its buffer's end takes that buffer at once and is read straight into
// it: no chunks, no copy, and what the buffer commits beyond what has
// arrived is still at most readAhead.
//
// The socket is the one the net.Conn given to Client, Server or LegacyTEA
// reaches through SyscallConn (as *net.TCPConn and *net.UnixConn do). A
// wrapper keeps this only if it forwards SyscallConn, and it should forward
// it only when its Read returns the socket's bytes, in order: bytes the
// wrapper buffers itself merely go uncounted, but a wrapper whose stream is
// longer than the socket's (one that decompresses, say) would overstate what
// has arrived.

// syscallConn is a net.Conn that reaches its socket (*net.TCPConn,
// *net.UnixConn, and wrappers that forward the method).
type syscallConn interface {
	SyscallConn() (syscall.RawConn, error)
}

// socketQueue asks a Conn's socket how many received bytes wait in it.
type socketQueue struct {
	raw syscall.RawConn
	ask func(fd uintptr) // q.control, bound once so that asking allocates nothing
	n   int
	err error
}

// newSocketQueue returns the socketQueue of c's socket, or nil if c has none
// or the platform cannot ask (then every record longer than readAhead is
// received in chunks).
func newSocketQueue(c net.Conn) *socketQueue {
	if !canAskQueue {
		return nil
	}
	sc, ok := c.(syscallConn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	q := &socketQueue{raw: raw}
	q.ask = q.control
	return q
}

// waiting returns how many bytes have arrived on the socket and not been
// read, and whether the socket could tell (q may be nil: it cannot).
func (q *socketQueue) waiting() (int, bool) {
	if q == nil {
		return 0, false
	}
	if err := q.raw.Control(q.ask); err != nil || q.err != nil || q.n < 0 {
		return 0, false
	}
	return q.n, true
}

func (q *socketQueue) control(fd uintptr) { q.n, q.err = queuedBytes(fd) }
