//go:build !js

package ws

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"math/bits"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tendril-p2p/tendril/internal/deadline"
)

// wire is the connection under the WebSocket framing (TCP, TLS over TCP, a trusted
// proxy's connection). It is how a Conn has deadlines that behave as TCP's do.
//
// coder/websocket bounds each call by a context, and a context that ends closes the whole
// WebSocket connection: a read deadline used that way would turn every expiry into the
// end of the connection, and tendril moves read deadlines into the past routinely (the
// mux wakes a reader that way, then reads on). So the deadlines are the underlying
// connection's own, set directly (no timer, context or goroutine of ours), and the
// WebSocket calls run with a context that never ends.
//
// The data frames are the wire's in both directions: Conn.Read reads them (readData, a
// frameReader), which loses nothing when a deadline interrupts a read, and Conn.Write
// writes them (writeMessage). coder/websocket writes the control frames it sends (a
// close frame, the answer to the peer's) through Write, and reads through Read only to
// run the close handshake, after the frameReader has handed the stream over (handOff).
type wire struct {
	net.Conn

	// The read side, under rmu, which whoever reads the connection holds (readData for a
	// Conn.Read, Read for coder/websocket), so that the stream is read in order. pre holds
	// bytes to read before the connection's: what was read past the HTTP exchange, and
	// after the hand-over what the frameReader had of a frame. skip counts bytes of a data
	// frame to drop before coder/websocket reads (the rest of a frame being read when it
	// took over). rerr is the read side's permanent error (the stream is lost).
	rmu       sync.Mutex
	pre       []byte
	fr        frameReader
	handedOff bool // coder/websocket reads from now on
	skip      uint64
	rerr      error

	// The write side's, under wmu (coder/websocket's control frames and Conn.Write's data
	// frames come from different goroutines): out follows the frames written, so that a
	// data frame never lands inside a control frame; pend holds bytes accepted and not
	// yet written, in order (see Write); cut reports that a write deadline cut a frame
	// since Conn.Write last looked; tcp is the connection if it is a *net.TCPConn, which
	// writes several buffers with one system call.
	wmu  sync.Mutex
	out  frameCursor
	pend *[]byte
	cut  bool
	tcp  *net.TCPConn
	// tls is set if the connection is a *tls.Conn, whose writes cannot be resumed after
	// a deadline interrupts one ("the TLS state is corrupt"): the timeout is permanent.
	tls bool
	// vec and bufs are writev's arguments, fields so that nothing is allocated per write
	// (WriteTo consumes bufs and takes its address).
	vec  [3][]byte
	bufs net.Buffers

	// mu orders the user's deadlines against Close's.
	mu sync.Mutex
	// closing is set once Close (or a refused message) has set the deadlines: the user's
	// no longer apply, and nothing more is written but the close frame. Set under mu,
	// read without it by Conn.Write.
	closing atomic.Bool
	// wd is the write deadline last set by the user, in Unix nanoseconds (0: none), for
	// Conn.Write to check before it writes: a write that times out part-way leaves a
	// partial frame behind, so one that cannot even start must not be tried.
	wd atomic.Int64
}

// newWire returns the wire of c, with pre read past the HTTP exchange already; its
// frameReader is set up by newConn.
func newWire(c net.Conn, pre []byte) *wire {
	w := &wire{Conn: c, pre: pre}
	w.tcp, _ = c.(*net.TCPConn)
	_, w.tls = c.(*tls.Conn)
	return w
}

// maxPending bounds the bytes a wire holds back because write deadlines left them
// unwritten: the rest of a message, and the control frames coder/websocket wrote after it.
const maxPending = 1 << 20

// pendBuffers are the buffers of masked frames (writeMessage) and of bytes held back,
// shared by all connections: a wire holds one only while it writes a frame, or while a
// deadline left bytes unwritten.
var pendBuffers = sync.Pool{New: func() any { b := make([]byte, 0, DefaultMaxMessage+64); return &b }}

// Write writes p, a frame that coder/websocket sends: a control frame (a pong, a close
// frame), the only frames it writes, whole, since each fits its bufio.Writer and it
// flushes at the end of every frame. The data frames are writeMessage's.
//
// A write that a deadline interrupts may have sent part of a frame, and coder/websocket
// would take the error for good. Instead the wire keeps what was not written, reports
// success, and sets cut; Conn.Write then returns the timeout, and its next call writes
// the rest first (settle), so that the stream stays whole and the connection usable, as
// TCP's is after a write timeout. Over TLS this cannot be: crypto/tls fails every write
// after one that timed out, and so does the wire.
func (w *wire) Write(p []byte) (int, error) {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	if w.pend != nil && len(*w.pend)+len(p) > maxPending {
		return 0, errors.New("ws: too many bytes held back by write deadlines")
	}
	w.out.advance(p)
	if err := w.send(w.pend, p, nil); err != nil {
		return 0, err
	}
	return len(p), nil
}

// send writes what pend holds (if not nil), then a, then b, and gives pend back. A
// deadline that interrupts it leaves the unwritten rest in a new pend, and cut set.
func (w *wire) send(pend *[]byte, a, b []byte) error {
	w.pend = nil
	if pend != nil && len(*pend) == 0 {
		pendBuffers.Put(pend)
		pend = nil
	}
	var held []byte
	if pend != nil {
		held = *pend
	}
	var n int64
	var err error
	switch {
	case w.tcp != nil:
		w.vec = [3][]byte{held, a, b}
		w.bufs = w.vec[:]
		n, err = w.bufs.WriteTo(w.tcp)
		w.vec = [3][]byte{}
	case pend == nil && len(b) == 0:
		var k int
		k, err = w.Conn.Write(a)
		n = int64(k)
	default:
		// One Write: over TLS, one record rather than one per piece.
		if pend == nil {
			pend = pendBuffers.Get().(*[]byte)
			*pend = (*pend)[:0]
		}
		*pend = append(append(*pend, a...), b...)
		held, a, b = *pend, nil, nil
		var k int
		k, err = w.Conn.Write(held)
		n = int64(k)
	}
	if err != nil && deadline.TimedOut(err) && !w.tls {
		// Keep the unwritten rest of held, a and b, in order.
		rest := pendBuffers.Get().(*[]byte)
		*rest = (*rest)[:0]
		for _, part := range [3][]byte{held, a, b} {
			k := min(n, int64(len(part)))
			*rest = append(*rest, part[k:]...)
			n -= k
		}
		w.pend, w.cut, err = rest, true, nil
	}
	if pend != nil && cap(*pend) <= maxPending {
		pendBuffers.Put(pend)
	}
	return err
}

// writeMessage writes p as one binary frame, masked with a new random key if mask is set
// (as a client must), behind what write deadlines left unwritten: with one system call,
// and, unmasked, without copying p. coder/websocket would copy p into its bufio.Writer,
// and mask it there in a second pass, in pieces of the buffer's size.
func (w *wire) writeMessage(p []byte, mask bool) error {
	var hb [14]byte
	var key uint32
	if mask {
		if _, err := rand.Read(hb[10:]); err != nil {
			return err
		}
		key = binary.LittleEndian.Uint32(hb[10:])
	}
	hdr := appendHeader(hb[:0], len(p), mask, key)
	w.wmu.Lock()
	defer w.wmu.Unlock()
	if !w.out.atBoundary() {
		// coder/websocket split a control frame across writes, which v1.8.15 never does
		// (its buffers are larger than any): refuse rather than interleave.
		return errors.New("ws: a message written in the middle of a frame")
	}
	if !mask {
		return w.send(w.pend, hdr, p)
	}
	buf := pendBuffers.Get().(*[]byte)
	*buf = append((*buf)[:0], hdr...)
	*buf = slices.Grow(*buf, len(p))[:len(hdr)+len(p)]
	maskCopy((*buf)[len(hdr):], p, key)
	err := w.send(w.pend, *buf, nil)
	if cap(*buf) <= maxPending {
		pendBuffers.Put(buf)
	}
	return err
}

// appendHeader appends the header of a final binary frame of n bytes (RFC 6455, section
// 5.2), with key if mask is set.
func appendHeader(b []byte, n int, mask bool, key uint32) []byte {
	var m byte
	if mask {
		m = 0x80
	}
	b = append(b, 0x82)
	switch {
	case n < 126:
		b = append(b, m|byte(n))
	case n < 1<<16:
		b = binary.BigEndian.AppendUint16(append(b, m|126), uint16(n))
	default:
		b = binary.BigEndian.AppendUint64(append(b, m|127), uint64(n))
	}
	if mask {
		b = binary.LittleEndian.AppendUint32(b, key)
	}
	return b
}

// maskCopy copies src to dst masked with key (its bytes in wire order, little-endian),
// in one pass, 32 bytes at a time: the sub-slices with their capacity set let the
// compiler drop the bounds checks. It returns the key rotated to the byte after src, to
// go on with. dst may be src, or start before it in the same array (the frameReader
// moves payloads down over the headers it takes out): each 32-byte block is loaded before
// it is stored, and stores land below the loads still to come.
func maskCopy(dst, src []byte, key uint32) uint32 {
	k := uint64(key) | uint64(key)<<32
	dst = dst[:len(src)]
	n := len(src) &^ 31
	for i := 0; i < n; i += 32 {
		s, d := src[i:i+32:i+32], dst[i:i+32:i+32]
		binary.LittleEndian.PutUint64(d[0:], binary.LittleEndian.Uint64(s[0:])^k)
		binary.LittleEndian.PutUint64(d[8:], binary.LittleEndian.Uint64(s[8:])^k)
		binary.LittleEndian.PutUint64(d[16:], binary.LittleEndian.Uint64(s[16:])^k)
		binary.LittleEndian.PutUint64(d[24:], binary.LittleEndian.Uint64(s[24:])^k)
	}
	for i := n; i < len(src); i++ {
		dst[i] = src[i] ^ byte(key>>(8*(i%4)))
	}
	return bits.RotateLeft32(key, -8*(len(src)%4))
}

// settle writes what write deadlines left unwritten, so that what follows comes after it.
func (w *wire) settle() error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	if w.pend == nil || !w.out.atBoundary() {
		return nil
	}
	pend := w.pend
	k, err := w.Conn.Write(*pend)
	if err != nil {
		*pend = (*pend)[:copy(*pend, (*pend)[k:])]
		return err
	}
	w.pend = nil
	pendBuffers.Put(pend)
	return nil
}

// takeCut reports whether a write deadline left bytes unwritten since the last call.
func (w *wire) takeCut() bool {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	cut := w.cut
	w.cut = false
	return cut
}

func (w *wire) setReadDeadline(t time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closing.Load() {
		return nil
	}
	return w.Conn.SetReadDeadline(t)
}

func (w *wire) setWriteDeadline(t time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closing.Load() {
		return nil
	}
	var ns int64
	if !t.IsZero() {
		ns = max(t.UnixNano(), 1)
	}
	w.wd.Store(ns)
	return w.Conn.SetWriteDeadline(t)
}

// writeExpired reports whether the user's write deadline has passed.
func (w *wire) writeExpired() bool {
	d := w.wd.Load()
	return d != 0 && time.Now().UnixNano() >= d
}

// beginClose bounds what is left of the connection's life by timeout from now, whatever
// deadlines the user sets from now on; the write deadline stays earlier if the user's is.
// It reports whether there is time left to write a close frame: a write deadline already
// in the past (mux.Session.Abort sets one to drop what is unsent) says not to wait.
func (w *wire) beginClose(timeout time.Duration) bool {
	now := time.Now()
	end := now.Add(timeout)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closing.Store(true)
	_ = w.Conn.SetReadDeadline(end)
	wend := end
	if d := w.wd.Load(); d != 0 && d < end.UnixNano() {
		wend = time.Unix(0, d)
	}
	_ = w.Conn.SetWriteDeadline(wend)
	return now.Before(wend)
}

// isClosing reports whether beginClose has been called.
func (w *wire) isClosing() bool { return w.closing.Load() }
