package secio

import (
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tendril-p2p/tendril/cipher/aead"
	"github.com/tendril-p2p/tendril/cipher/tea"
)

// Frame layout constants.
const (
	// frameHeaderSize is the 4-byte big-endian length prefix of every frame
	// and handshake message.
	frameHeaderSize = 4
	// nonceSize is the AEAD nonce: a 96-bit big-endian counter.
	nonceSize = 12
	// minReadBuffer is the first size of a connection's read buffer, so
	// that many small frames are read with one system call.
	minReadBuffer = 8 << 10
	// minWriteBuffer is the first size of a connection's write buffer.
	minWriteBuffer = 4 << 10
	// keepBuffer is the most a connection keeps per direction between
	// frames; larger frames use pooled buffers.
	keepBuffer = 64<<10 + 64
	// exactReadThreshold: a frame at least this long is read up to its end
	// and no further, so that no partial next frame has to be moved.
	exactReadThreshold = 8 << 10
)

// Conn is a framed connection over another net.Conn: authenticated and
// encrypted (made by Client or Server), or legacy TEA (made by LegacyTEA).
//
// Conn implements net.Conn. One goroutine may Read while another Writes;
// concurrent Reads (or Writes) are serialised. Deadlines are those of the
// underlying connection. A read deadline that expires leaves the Conn usable
// (a partly received frame is kept); any other read or write error is
// permanent for that direction and is returned by every later call.
type Conn struct {
	conn net.Conn

	in  inHalf
	out outHalf

	local     PeerID
	remote    PeerID
	remotePub *PublicKey
	suite     aead.Suite
	kex       KeyExchange
	secure    bool

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// counter is a 96-bit big-endian per-direction frame counter used as the
// AEAD nonce.
type counter struct {
	n         [nonceSize]byte // next value
	cur       [nonceSize]byte // value returned by the last next
	exhausted bool
}

// next returns the nonce to use for the next frame and advances the
// counter; it fails once every value has been used.
func (c *counter) next() ([]byte, error) {
	if c.exhausted {
		return nil, ErrNonceExhausted
	}
	c.cur = c.n
	for i := nonceSize - 1; i >= 0; i-- {
		c.n[i]++
		if c.n[i] != 0 {
			break
		}
		if i == 0 {
			c.exhausted = true
		}
	}
	return c.cur[:], nil
}

// inHalf is the read direction.
type inHalf struct {
	mu     sync.Mutex
	aead   cipher.AEAD // nil in legacy mode
	tea    *tea.Cipher // nil in secure mode
	ctr    counter
	maxLen int // largest frame body (after the length prefix) accepted

	buf    []byte  // raw bytes from the connection; buf[r:w] is unread
	r, w   int     //
	own    []byte  // the connection's own buffer, at most keepBuffer bytes
	pooled *[]byte // buf when it is borrowed from a pool for a large frame
	plain  []byte  // authenticated plaintext not yet returned by Read
	eof    bool    // the connection returned io.EOF
	err    error   // sticky
}

// outHalf is the write direction.
type outHalf struct {
	mu     sync.Mutex
	aead   cipher.AEAD
	tea    *tea.Cipher
	ctr    counter
	maxLen int // largest plaintext per frame
	buf    []byte
	err    error // sticky
}

// bufferPools hold buffers of 128 KiB << i bytes, for frames larger than
// keepBuffer (up to MaxFrameSizeLimit plus framing).
var bufferPools [9]sync.Pool

func bufferClass(n int) int {
	c := 0
	for (128<<10)<<c < n {
		c++
	}
	return c
}

// getBuffer returns a pooled buffer of at least n bytes (n at most
// 32 MiB).
func getBuffer(n int) *[]byte {
	c := bufferClass(n)
	if b, ok := bufferPools[c].Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, (128<<10)<<c)
	return &b
}

// putBuffer returns a buffer obtained from getBuffer.
func putBuffer(b *[]byte) {
	bufferPools[bufferClass(len(*b))].Put(b)
}

func newConn(conn net.Conn) *Conn {
	return &Conn{conn: conn}
}

// fill makes at least n unread bytes available in in.buf[in.r:in.w],
// reading from conn. It reads greedily (as much as fits) unless exact is
// set, in which case it reads no further than the n-th byte. An EOF before
// n bytes is io.EOF if nothing at all was buffered and io.ErrUnexpectedEOF
// otherwise.
func (in *inHalf) fill(conn net.Conn, n int, exact bool) error {
	if in.w-in.r >= n {
		return nil
	}
	if len(in.buf)-in.r < n {
		if len(in.buf) >= n {
			// Move the unread tail to the front.
			in.w = copy(in.buf, in.buf[in.r:in.w])
			in.r = 0
		} else {
			// Grow to the frame in hand, rounded up to 4 KiB, never past
			// the largest acceptable frame: a small buffer stays in cache.
			// Frames above keepBuffer borrow a pooled buffer that
			// release returns once the frame has been read.
			var nb []byte
			var pooled *[]byte
			if n > keepBuffer {
				pooled = getBuffer(n)
				nb = *pooled
			} else {
				size := max(minReadBuffer, (n+4095)&^4095)
				size = min(size, max(n, in.maxLen+frameHeaderSize))
				nb = make([]byte, size)
				in.own = nb
			}
			in.w = copy(nb, in.buf[in.r:in.w])
			in.r = 0
			if in.pooled != nil {
				putBuffer(in.pooled)
			}
			in.pooled = pooled
			in.buf = nb
		}
	}
	for empty := 0; in.w-in.r < n; {
		if in.eof {
			if in.w == in.r {
				return io.EOF
			}
			return io.ErrUnexpectedEOF
		}
		end := len(in.buf)
		if exact {
			end = in.r + n
		}
		m, err := conn.Read(in.buf[in.w:end])
		in.w += m
		if m == 0 && err == nil {
			// A Reader that keeps returning nothing would spin forever.
			if empty++; empty >= 100 {
				return io.ErrNoProgress
			}
		}
		if err != nil {
			if in.w-in.r >= n {
				if err == io.EOF {
					in.eof = true
				}
				return nil
			}
			if err == io.EOF {
				in.eof = true
				continue
			}
			return err
		}
	}
	return nil
}

// release returns a pooled read buffer once nothing in it is pending, so
// that an idle connection holds at most keepBuffer bytes.
func (in *inHalf) release() {
	if in.pooled != nil && in.r == in.w && len(in.plain) == 0 {
		putBuffer(in.pooled)
		in.pooled = nil
		in.buf = in.own
		in.r, in.w = 0, 0
	}
}

// consume discards n buffered bytes.
func (in *inHalf) consume(n int) {
	in.r += n
	if in.r == in.w {
		in.r, in.w = 0, 0
	}
}

// setErr records a permanent read error, unless the error is a timeout that
// leaves the stream intact.
func (in *inHalf) setErr(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return err
	}
	in.err = err
	return err
}

// readFrame reads, authenticates and decrypts one frame. If the plaintext
// fits in p it is decrypted straight into p and its length returned;
// otherwise it is decrypted in place and left in in.plain (n = 0).
func (in *inHalf) readFrame(conn net.Conn, p []byte) (int, error) {
	if err := in.fill(conn, frameHeaderSize, false); err != nil {
		return 0, err
	}
	hdr := in.buf[in.r : in.r+frameHeaderSize]
	length := binary.BigEndian.Uint32(hdr)
	if length > uint32(in.maxLen) {
		return 0, fmt.Errorf("%w: length prefix %d, limit %d", ErrFrameTooLarge, length, in.maxLen)
	}
	total := frameHeaderSize + int(length)
	if err := in.fill(conn, total, total >= exactReadThreshold); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, err
	}
	hdr = in.buf[in.r : in.r+frameHeaderSize]
	body := in.buf[in.r+frameHeaderSize : in.r+total]
	if in.tea != nil {
		return in.openTEA(p, body, total)
	}
	if len(body) < in.aead.Overhead() {
		return 0, fmt.Errorf("%w: %d bytes, shorter than the tag", ErrInvalidFrame, len(body))
	}
	nonce, err := in.ctr.next()
	if err != nil {
		return 0, err
	}
	if plainLen := len(body) - in.aead.Overhead(); plainLen <= len(p) && plainLen > 0 {
		if _, err := in.aead.Open(p[:0], nonce, body, hdr); err != nil {
			return 0, ErrAuthFailed
		}
		in.consume(total)
		in.release()
		return plainLen, nil
	}
	pt, err := in.aead.Open(body[:0], nonce, body, hdr)
	if err != nil {
		return 0, ErrAuthFailed
	}
	// The plaintext stays in the buffer until Read has returned all of it;
	// the buffer is not refilled before then.
	in.plain = pt
	in.consume(total)
	return 0, nil
}

// openTEA decrypts a legacy frame body.
func (in *inHalf) openTEA(p, body []byte, total int) (int, error) {
	if len(body) < tea.CiphertextLen(0) || len(body)%8 != 0 {
		return 0, fmt.Errorf("%w: TEA ciphertext of %d bytes", ErrInvalidFrame, len(body))
	}
	pt, err := in.tea.Decrypt(body[:0], body)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrInvalidFrame, err)
	}
	in.plain = pt
	in.consume(total)
	return 0, nil
}

// Read reads authenticated plaintext. It returns data as soon as one frame
// has been authenticated; it never returns part of a frame that failed
// authentication. A stream that ends inside a frame yields
// io.ErrUnexpectedEOF; a failed frame yields an error wrapping ErrAuthFailed
// and closes the connection.
func (c *Conn) Read(p []byte) (int, error) {
	in := &c.in
	in.mu.Lock()
	defer in.mu.Unlock()
	for len(in.plain) == 0 {
		if in.err != nil {
			return 0, in.err
		}
		if c.closed.Load() {
			return 0, ErrClosed
		}
		if len(p) == 0 {
			return 0, nil
		}
		n, err := in.readFrame(c.conn, p)
		if err != nil {
			if c.closed.Load() {
				return 0, in.setErr(ErrClosed)
			}
			if errors.Is(err, ErrAuthFailed) || errors.Is(err, ErrFrameTooLarge) ||
				errors.Is(err, ErrInvalidFrame) || errors.Is(err, ErrNonceExhausted) {
				c.Close()
			}
			return 0, in.setErr(err)
		}
		if n > 0 {
			return n, nil
		}
	}
	n := copy(p, in.plain)
	in.plain = in.plain[n:]
	in.release()
	return n, nil
}

// Write encrypts p and sends it. A Write of at most the negotiated maximum
// frame size (MaxFrameSize, or the peer's smaller value) is sent as exactly
// one frame with one Write on the underlying connection; a longer Write is
// split into frames of that size. A failed Write is permanent.
func (c *Conn) Write(p []byte) (int, error) {
	out := &c.out
	out.mu.Lock()
	defer out.mu.Unlock()
	if out.err != nil {
		return 0, out.err
	}
	if c.closed.Load() {
		return 0, ErrClosed
	}
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), out.maxLen)]
		if err := out.writeFrame(c.conn, chunk); err != nil {
			if c.closed.Load() {
				err = ErrClosed
			}
			out.err = err
			return n, err
		}
		n += len(chunk)
		p = p[len(chunk):]
	}
	return n, nil
}

// writeFrame seals one frame into the reused buffer and writes it with one
// call on conn.
func (out *outHalf) writeFrame(conn net.Conn, chunk []byte) error {
	var bodyLen int
	if out.tea != nil {
		bodyLen = tea.CiphertextLen(len(chunk))
	} else {
		bodyLen = len(chunk) + out.aead.Overhead()
	}
	total := frameHeaderSize + bodyLen
	var frame []byte
	if total > keepBuffer {
		// Large frames borrow a pooled buffer for the duration of the
		// write, so that an idle connection keeps at most keepBuffer.
		pooled := getBuffer(total)
		defer putBuffer(pooled)
		frame = (*pooled)[:total]
	} else {
		if cap(out.buf) < total {
			out.buf = make([]byte, max((total+4095)&^4095, minWriteBuffer))
		}
		frame = out.buf[:total]
	}
	binary.BigEndian.PutUint32(frame, uint32(bodyLen))
	if out.tea != nil {
		out.tea.Encrypt(frame[frameHeaderSize:frameHeaderSize], chunk)
	} else {
		nonce, err := out.ctr.next()
		if err != nil {
			return err
		}
		out.aead.Seal(frame[frameHeaderSize:frameHeaderSize], nonce, chunk, frame[:frameHeaderSize])
	}
	_, err := conn.Write(frame)
	return err
}

// Close closes the underlying connection and returns its error. It is safe
// to call more than once and from any goroutine; calls after the first
// return nil. Blocked Reads and Writes return an error wrapping
// net.ErrClosed.
func (c *Conn) Close() error {
	first := false
	c.closeOnce.Do(func() {
		first = true
		c.closed.Store(true)
		c.closeErr = c.conn.Close()
	})
	if first {
		return c.closeErr
	}
	return nil
}

// LocalAddr returns the underlying connection's local address.
func (c *Conn) LocalAddr() net.Addr { return c.conn.LocalAddr() }

// RemoteAddr returns the underlying connection's remote address.
func (c *Conn) RemoteAddr() net.Addr { return c.conn.RemoteAddr() }

// SetDeadline sets the underlying connection's read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error { return c.conn.SetDeadline(t) }

// SetReadDeadline sets the underlying connection's read deadline.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.conn.SetReadDeadline(t) }

// SetWriteDeadline sets the underlying connection's write deadline. A
// write that times out leaves the stream mid-frame, so it is permanent.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.conn.SetWriteDeadline(t) }

// NetConn returns the underlying connection. Reading or writing it directly
// corrupts the framed stream.
func (c *Conn) NetConn() net.Conn { return c.conn }

// RemotePeer returns the authenticated peer ID of the remote side, or the
// zero PeerID for a legacy TEA connection.
func (c *Conn) RemotePeer() PeerID { return c.remote }

// LocalPeer returns the local peer ID, or the zero PeerID for a legacy TEA
// connection.
func (c *Conn) LocalPeer() PeerID { return c.local }

// RemotePublicKey returns the remote identity key, or nil for a legacy TEA
// connection.
func (c *Conn) RemotePublicKey() *PublicKey { return c.remotePub }

// Suite returns the negotiated AEAD suite, or 0 for a legacy TEA
// connection.
func (c *Conn) Suite() aead.Suite { return c.suite }

// KeyExchange returns the negotiated key exchange, or 0 for a legacy TEA
// connection.
func (c *Conn) KeyExchange() KeyExchange { return c.kex }

// MaxFrameSize returns the largest Write that is sent as one frame (one
// write on the underlying connection): the smaller of the two sides'
// Config.MaxFrameSize, or LegacyConfig.MaxFrameSize in legacy mode.
func (c *Conn) MaxFrameSize() int { return c.out.maxLen }

// Secure reports whether the connection is authenticated and encrypted with
// an AEAD (true for Client and Server, false for LegacyTEA).
func (c *Conn) Secure() bool { return c.secure }
