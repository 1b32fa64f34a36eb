package protocol

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"sync"
)

const (
	// DefaultMaxMessageSize is the default cap on one message's payload.
	DefaultMaxMessageSize = 4 << 20
	// MessageHeaderSize is the size of a message's length prefix: a 4-byte
	// big-endian payload length.
	MessageHeaderSize = 4

	// growStep is how much of a message buffer is allocated before the bytes
	// are there: larger messages grow their buffer as data arrives, so a peer
	// announcing a large message and sending nothing costs little memory.
	growStep = 64 << 10
	// retainSize is the largest buffer a Reader or Writer keeps between calls.
	retainSize = 256 << 10
)

// AppendFrame appends msg to dst as one message: a 4-byte big-endian length
// followed by msg. It does not check any size limit; msg must be shorter than
// 4 GiB.
func AppendFrame(dst, msg []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(msg)))
	return append(dst, msg...)
}

// Reader reads length-delimited messages (see AppendFrame). It is not safe for
// concurrent use.
type Reader struct {
	r       io.Reader
	maxSize int
	hdr     [MessageHeaderSize]byte
	buf     []byte  // kept between calls, at most retainSize
	big     *[]byte // a pooled buffer holding the last large message
	err     error   // sticky: after a size violation the stream is out of step
}

// NewReader returns a Reader of messages of at most maxSize bytes from r;
// maxSize <= 0 means DefaultMaxMessageSize.
func NewReader(r io.Reader, maxSize int) *Reader {
	if maxSize <= 0 {
		maxSize = DefaultMaxMessageSize
	}
	return &Reader{r: r, maxSize: maxSize}
}

// MaxSize returns the largest message the Reader accepts.
func (r *Reader) MaxSize() int { return r.maxSize }

// ReadMessage reads the next message. The returned slice is valid until the
// next call. At a clean end of stream between messages it returns io.EOF; a
// stream cut inside a message returns io.ErrUnexpectedEOF. A length above the
// maximum returns ErrMessageTooLarge before anything is allocated, and every
// later call returns the same error.
//
// The Reader keeps a buffer of up to 256 KiB between calls; a larger message
// is read into a buffer shared through a pool, taken back at the next call.
func (r *Reader) ReadMessage() ([]byte, error) {
	if r.big != nil {
		putBuf(r.big)
		r.big = nil
	}
	n, err := r.readHeader()
	if err != nil {
		return nil, err
	}
	if n <= retainSize {
		msg, err := readBody(r.r, r.buf, n, false)
		if cap(msg) > cap(r.buf) {
			r.buf = msg[:0]
		}
		return msg, err
	}
	var dst []byte
	p := pooledBuf(n)
	if p != nil {
		dst = *p
	}
	msg, err := readBody(r.r, dst, n, true)
	if c := cap(msg); c >= n && c == 1<<poolClass(c) {
		if p == nil {
			p = new([]byte)
		}
		*p = msg[:0]
		r.big = p
	}
	return msg, err
}

// ReadMessageAlloc reads the next message into a new slice owned by the
// caller. Errors are as for ReadMessage.
func (r *Reader) ReadMessageAlloc() ([]byte, error) {
	n, err := r.readHeader()
	if err != nil {
		return nil, err
	}
	return readBody(r.r, nil, n, false)
}

// readHeader reads a length prefix and checks it against the limit.
func (r *Reader) readHeader() (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if _, err := io.ReadFull(r.r, r.hdr[:]); err != nil {
		return 0, err // io.EOF at a boundary, io.ErrUnexpectedEOF inside the prefix
	}
	n := binary.BigEndian.Uint32(r.hdr[:])
	if uint64(n) > uint64(r.maxSize) {
		r.err = fmt.Errorf("%w: %d bytes, limit %d", ErrMessageTooLarge, n, r.maxSize)
		return 0, r.err
	}
	return int(n), nil
}

// readBody reads n bytes into dst[:0]. If dst is too small, the buffer grows
// as bytes arrive (at most growStep, or doubling, beyond what has been
// received), so a peer announcing a large message and sending little costs
// little memory. With pow2 the grown capacities are powers of two (for the
// pool).
func readBody(r io.Reader, dst []byte, n int, pow2 bool) ([]byte, error) {
	if dst == nil {
		dst = []byte{}
	}
	dst = dst[:0]
	if cap(dst) < min(n, growStep) {
		dst = make([]byte, 0, min(n, growStep))
	}
	for len(dst) < n {
		if len(dst) == cap(dst) {
			size := min(n, max(2*cap(dst), len(dst)+growStep))
			if pow2 {
				size = 1 << poolClass(size)
			}
			grown := make([]byte, len(dst), size)
			copy(grown, dst)
			dst = grown
		}
		want := min(n, cap(dst))
		m, err := io.ReadFull(r, dst[len(dst):want])
		dst = dst[:len(dst)+m]
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return dst, err
		}
	}
	return dst, nil
}

// Writer writes length-delimited messages. It is not safe for concurrent use.
type Writer struct {
	w       io.Writer
	maxSize int
	buf     []byte
}

// NewWriter returns a Writer of messages of at most maxSize bytes to w;
// maxSize <= 0 means DefaultMaxMessageSize.
func NewWriter(w io.Writer, maxSize int) *Writer {
	if maxSize <= 0 {
		maxSize = DefaultMaxMessageSize
	}
	return &Writer{w: w, maxSize: maxSize}
}

// MaxSize returns the largest message the Writer accepts.
func (w *Writer) MaxSize() int { return w.maxSize }

// WriteMessage writes msg with its length prefix in a single Write call, so
// that over a mux stream a small message travels in one frame. A message
// larger than the maximum returns ErrMessageTooLarge and writes nothing.
func (w *Writer) WriteMessage(msg []byte) error {
	if len(msg) > w.maxSize {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrMessageTooLarge, len(msg), w.maxSize)
	}
	total := MessageHeaderSize + len(msg)
	var frame []byte
	if total <= retainSize {
		if cap(w.buf) < total {
			w.buf = make([]byte, 0, max(total, 512))
		}
		frame = AppendFrame(w.buf[:0], msg)
	} else {
		p := getBuf(total)
		defer putBuf(p)
		frame = AppendFrame((*p)[:0], msg)
	}
	_, err := w.w.Write(frame)
	return err
}

// Pools of large frame buffers by power-of-two size class, so that writers of
// large messages neither keep megabytes per stream nor allocate per message.
const (
	minPoolClass = 18 // 256 KiB
	maxPoolClass = 26 // 64 MiB
)

var bufPools [maxPoolClass - minPoolClass + 1]sync.Pool

func poolClass(n int) int {
	c := bits.Len(uint(n - 1))
	return max(c, minPoolClass)
}

func getBuf(n int) *[]byte {
	c := poolClass(n)
	if c > maxPoolClass {
		b := make([]byte, 0, n)
		return &b
	}
	if p, ok := bufPools[c-minPoolClass].Get().(*[]byte); ok {
		return p
	}
	b := make([]byte, 0, 1<<c)
	return &b
}

// pooledBuf returns a pooled buffer of at least n bytes, or nil if the pool
// has none (it never allocates).
func pooledBuf(n int) *[]byte {
	c := poolClass(n)
	if c > maxPoolClass {
		return nil
	}
	p, _ := bufPools[c-minPoolClass].Get().(*[]byte)
	return p
}

func putBuf(p *[]byte) {
	c := poolClass(cap(*p))
	if c > maxPoolClass || cap(*p) != 1<<c {
		return
	}
	*p = (*p)[:0]
	bufPools[c-minPoolClass].Put(p)
}
