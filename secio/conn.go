package secio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tendril-p2p/tendril/cipher/aead"
	"github.com/tendril-p2p/tendril/cipher/tea"
	"github.com/tendril-p2p/tendril/internal/deadline"
)

// Frame layout constants.
const (
	// frameHeaderSize is the 4-byte big-endian length prefix of every frame
	// and handshake message.
	frameHeaderSize = 4
	// nonceSize is the AEAD nonce: the record IV with the sequence number
	// XORed in (recordKey.nextNonce).
	nonceSize = 12
	// smallRead is the size of the array each Conn owns for reading. A read
	// that starts with nothing buffered goes into it, so that an idle
	// connection (a reader blocked waiting for the next frame) holds no
	// other buffer, and a small frame (a request, a window update) arrives
	// with one read. Larger frames move to a pooled buffer sized to the
	// frame once their length prefix is known.
	smallRead = 256
	// exactReadThreshold: a frame at least this long is read up to its end
	// and no further, so that no partial next frame has to be moved.
	exactReadThreshold = 8 << 10
	// greedyBuffer is the smallest buffer borrowed for a frame shorter
	// than exactReadThreshold, so that a burst of small frames is read a
	// few KiB per system call.
	greedyBuffer = 8 << 10
)

// Conn is a framed connection over another net.Conn: authenticated and
// encrypted (made by Client or Server), or legacy TEA (made by LegacyTEA).
//
// Conn implements net.Conn. One goroutine may Read while another Writes;
// concurrent Reads (or Writes) are serialised. Deadlines are those of the
// underlying connection, and a call made once its deadline has passed fails at
// once, as net.Conn's do, even when it could go through without blocking. A
// deadline that expires leaves the Conn usable (a partly received frame is
// kept; a partly sent one goes out first, see Write); any other read or write
// error is permanent for that direction and is returned by every later call.
//
// An idle Conn holds no frame buffer: frames are sealed into, and read
// into, buffers borrowed from pools shared by all connections and given
// back as soon as the frame has been written, or read and consumed.
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
	dialer    bool // this side dialled (ran Client): it sends its FIN first when closing (see linger)
	// handshakeRTT is the handshake's round trip as this side measured it, in microseconds
	// (HandshakeRTT), packed beside the four bytes above.
	handshakeRTT uint32

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// inHalf is the read direction.
//
// buf is either small[:] or a pooled buffer (then pooled points to it).
// A pooled buffer is held only while it contains bytes not yet consumed
// (buffered input or plaintext not yet returned by Read); settle gives it
// back, moving a short unread tail into small first.
type inHalf struct {
	mu        sync.Mutex
	recordKey             // aead is nil in legacy mode
	tea       *tea.Cipher // nil in secure mode
	maxLen    int         // largest frame body (after the length prefix) accepted

	buf    []byte  // raw bytes from the connection; buf[r:w] is unread
	r, w   int     //
	pooled *[]byte // buf when it is borrowed from a pool
	plain  []byte  // authenticated plaintext not yet returned by Read
	err    error   // sticky
	// mem is charged for every pooled buffer the read side holds (nil:
	// nothing is charged); charged is what it holds now.
	mem     MemoryBudget
	charged int64
	// A record too long for one buffer yet (see stage): staging is set
	// while it arrives, pending is its length (prefix included), staged
	// holds its first chunks in order (full), stagedLen their bytes; buf
	// is the chunk being filled.
	pending   int
	staged    []*[]byte
	stagedLen int
	// queue tells how many bytes wait in the socket, if it can (nil: it
	// cannot): a long record that has arrived there takes its own buffer
	// at once, without chunks (see socketQueue). copied counts the bytes
	// copied out of chunks into records' buffers (tests read it).
	queue  *socketQueue
	copied int64
	// reset is set when a read failed with a connection reset: the peer
	// is gone, so Close sends no close record (the write could only fail,
	// with EPIPE and a SIGPIPE to the process).
	reset atomic.Bool
	// nonData counts the records in a row that delivered no data (see
	// control).
	nonData int32
	// deadline is the user's read deadline: a Read with a frame or plaintext already buffered does not reach the
	// connection, which would fail it once the deadline has passed.
	deadline    deadline.Deadline
	eof         bool // the connection returned io.EOF
	staging     bool // a long record is arriving in chunks (see pending)
	queueLooked bool // queue was looked up (at the first long record)
	small       [smallRead]byte
}

// outHalf is the write direction. It keeps no buffer between frames.
type outHalf struct {
	mu sync.Mutex
	recordKey
	tea    *tea.Cipher
	maxLen int   // largest plaintext per frame
	err    error // sticky
	// sealed counts the blocks sealed under the current key (see
	// recordBlocks); at updateAt (0 means keyUpdateBlocks) the next frame
	// is preceded by a key update.
	sealed, updateAt uint64
	// wb is made at the first large frame (see writeBehind); deadline
	// is the user's write deadline, which bounds Close's wait for it.
	wb       atomic.Pointer[writeBehind]
	deadline deadline.Deadline
	// retired is set by Close once it no longer needs the key (its close
	// record is out or will not be sent): a Write that then finds the Conn
	// closed overwrites the key material Close could not reach.
	retired atomic.Bool
	// unsent is a frame a timed-out write left part-way, from unsentOff on
	// (nil: none). Its nonce is spent and its first bytes are on the wire,
	// so it goes out whole before any other frame, or the peer would read
	// the next frame's bytes as the rest of this one.
	unsent    *[]byte
	unsentOff int
}

// Buffer pools. Class i holds buffers of classSize(i) bytes: up to 64 KiB,
// 512 bytes, then alternately 3<<k and 1<<(k+2) bytes (768, 1 KiB, 1.5 KiB,
// 2 KiB, ..., 48 KiB, 64 KiB), so that a frame wastes at most a third of its
// buffer; above 64 KiB, sixteen classes per doubling (68 KiB, 72 KiB, ...,
// 128 KiB, 136 KiB, ...), so that a large buffer is at most a sixteenth more
// than it holds (a read buffer must not commit much beyond what has arrived,
// see readAhead), up to 17 MiB, which holds the largest frame
// (MaxFrameSizeLimit plus framing).
const (
	minClassShift = 9                               // the smallest class is 1<<minClassShift bytes
	fineShift     = 16                              // classes above 1<<fineShift are sixteen per doubling
	fineFirst     = 2 * (fineShift - minClassShift) // the class of 1<<fineShift
	numClasses    = fineFirst + 1 + (24-fineShift)*16 + 1
)

var bufferPools [numClasses]sync.Pool

// classSize returns the buffer size of class i.
func classSize(i int) int {
	if i > fineFirst {
		k, s := fineShift+(i-fineFirst-1)/16, (i-fineFirst-1)%16+1
		return 1<<k + s<<(k-4)
	}
	if i == 0 {
		return 1 << minClassShift
	}
	j := (i - 1) / 2
	if i%2 == 1 {
		return 3 << (minClassShift - 1 + j)
	}
	return 1 << (minClassShift + 1 + j)
}

// bufferClass returns the smallest class whose buffers hold n bytes.
func bufferClass(n int) int {
	if n <= 1<<minClassShift {
		return 0
	}
	k := bits.Len(uint(n - 1)) // 1<<(k-1) < n <= 1<<k, k > minClassShift
	if k > fineShift {
		k-- // 1<<k < n <= 1<<(k+1): step s of sixteen
		s := (n - 1<<k + 1<<(k-4) - 1) >> (k - 4)
		return fineFirst + 1 + (k-fineShift)*16 + s - 1
	}
	i := 2 * (k - minClassShift)
	if n <= 3<<(k-2) {
		i--
	}
	return i
}

// getBuffer returns a pooled buffer of at least n bytes (n at most
// classSize(numClasses-1)).
func getBuffer(n int) *[]byte {
	c := bufferClass(n)
	if b, ok := bufferPools[c].Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, classSize(c))
	return &b
}

// putBuffer returns a buffer obtained from getBuffer (possibly resliced).
func putBuffer(b *[]byte) {
	*b = (*b)[:cap(*b)]
	bufferPools[bufferClass(len(*b))].Put(b)
}

func newConn(conn net.Conn) *Conn {
	c := &Conn{conn: conn}
	c.in.buf = c.in.small[:]
	return c
}

// fill makes at least n unread bytes available in in.buf[in.r:in.w],
// reading from conn. It reads greedily (as much as fits) unless exact is
// set, in which case it reads no further than the n-th byte. An EOF before
// n bytes is io.EOF if nothing at all was buffered and io.ErrUnexpectedEOF
// otherwise. The caller has checked n against its limit; in.plain is empty.
//
// A buffer borrowed for the bytes in hand never commits more than readAhead
// beyond what has arrived (buffered here or waiting in the socket, see
// arrived): a longer record is read in chunks (stage) until its buffer can
// be.
func (in *inHalf) fill(conn net.Conn, n int, exact bool) error {
	if in.w-in.r >= n {
		return nil
	}
	switch {
	case in.staging:
		if err := in.stage(conn, n); err != nil {
			return err
		}
	case len(in.buf)-in.r >= n:
		// Room after the unread bytes.
	case len(in.buf) >= n:
		// Move the unread tail to the front.
		in.w = copy(in.buf, in.buf[in.r:in.w])
		in.r = 0
	default:
		// Borrow a buffer for the frame in hand (and, for a short one,
		// what follows it); settle gives it back once no unread byte is
		// left in it.
		size := n
		if !exact {
			size = max(n, greedyBuffer)
		}
		if !in.arrived(conn, classSize(bufferClass(size)), n) {
			if err := in.stage(conn, n); err != nil {
				return err
			}
		} else if err := in.borrow(size); err != nil {
			return err
		}
	}
	limit := len(in.buf)
	if exact {
		limit = in.r + n
	}
	return in.readUntil(conn, n, limit)
}

// readUntil reads from conn into in.buf[in.w:limit] until at least n
// unread bytes are buffered. An EOF before that is io.EOF if nothing at
// all was buffered and io.ErrUnexpectedEOF otherwise; a Reader that keeps
// returning nothing is io.ErrNoProgress.
func (in *inHalf) readUntil(conn net.Conn, n, limit int) error {
	for empty := 0; in.w-in.r < n; {
		if in.eof {
			if in.w == in.r {
				return io.EOF
			}
			return io.ErrUnexpectedEOF
		}
		m, err := conn.Read(in.buf[in.w:limit])
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

// borrow moves the unread bytes into a pooled buffer of at least size
// bytes (giving back a pooled one in use), so that the next reads go into
// it. It fails if the memory budget refuses the buffer.
func (in *inHalf) borrow(size int) error {
	pooled, err := in.take(size)
	if err != nil {
		return err
	}
	nb := *pooled
	in.w = copy(nb, in.buf[in.r:in.w])
	in.r = 0
	if in.pooled != nil {
		in.give(in.pooled)
	}
	in.pooled = pooled
	in.buf = nb
	return nil
}

// settle gives a pooled read buffer back once no plaintext is pending in
// it, moving an unread tail of at most smallRead bytes into the Conn's own
// array first, so that a Read that blocks for the next frame holds no
// pooled buffer unless a longer part of that frame is already buffered.
func (in *inHalf) settle() {
	if in.pooled == nil || len(in.plain) != 0 {
		return
	}
	n := in.w - in.r
	if n > len(in.small) {
		return
	}
	copy(in.small[:], in.buf[in.r:in.w])
	in.give(in.pooled)
	in.pooled = nil
	in.buf = in.small[:]
	in.r, in.w = 0, n
}

// drop forgets everything buffered and gives pooled buffers back, after a
// permanent error or at Close.
func (in *inHalf) drop() {
	in.plain = nil
	in.r, in.w = 0, 0
	in.unstage()
	if in.pooled != nil {
		in.give(in.pooled)
		in.pooled = nil
		in.buf = in.small[:]
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
// leaves the stream intact. After a permanent error the read side's buffers
// go back and its key material is overwritten.
func (in *inHalf) setErr(err error) error {
	if deadline.TimedOut(err) {
		return err
	}
	in.err = err
	if errors.Is(err, syscall.ECONNRESET) {
		in.reset.Store(true)
	}
	in.drop()
	in.wipe()
	return err
}

// nextFrame makes the next whole frame available in the buffer and
// returns its length prefix and body (aliasing in.buf) and its total
// length. In secure mode a connection that ends where a frame would start
// is ErrTruncated: only a close record ends the stream cleanly.
func (in *inHalf) nextFrame(conn net.Conn) (hdr, body []byte, total int, err error) {
	if in.staging {
		// A long record is arriving in chunks; its length prefix is in
		// the first.
		total = in.pending
	} else {
		if err := in.fill(conn, frameHeaderSize, false); err != nil {
			if err == io.EOF && in.tea == nil {
				err = ErrTruncated
			}
			return nil, nil, 0, err
		}
		length := binary.BigEndian.Uint32(in.buf[in.r:])
		if length > uint32(in.maxLen) {
			return nil, nil, 0, fmt.Errorf("%w: length prefix %d, limit %d", ErrFrameTooLarge, length, in.maxLen)
		}
		total = frameHeaderSize + int(length)
	}
	if err := in.fill(conn, total, total >= exactReadThreshold); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, nil, 0, err
	}
	hdr = in.buf[in.r : in.r+frameHeaderSize]
	body = in.buf[in.r+frameHeaderSize : in.r+total]
	if in.tea == nil && len(body) < in.aead.Overhead()+recordTypeSize {
		return nil, nil, 0, fmt.Errorf("%w: %d bytes, shorter than the tag and record type", ErrInvalidFrame, len(body))
	}
	return hdr, body, total, nil
}

// readFrame reads, authenticates and decrypts the next frame. If it carries
// data that fits in p it is decrypted straight into p and its length
// returned; otherwise it is decrypted in place and its data left in in.plain
// (n = 0). A record that carries no data (control) returns 0 and nothing in
// in.plain: a key update moves to the peer's next key, a close record
// returns io.EOF.
func (in *inHalf) readFrame(conn net.Conn, p []byte) (int, error) {
	if in.tea != nil {
		_, body, total, err := in.nextFrame(conn)
		if err != nil {
			return 0, err
		}
		return in.openTEA(body, total)
	}
	hdr, body, total, err := in.nextFrame(conn)
	if err != nil {
		return 0, err
	}
	seq := in.seq
	nonce, err := in.nextNonce()
	if err != nil {
		return 0, err
	}
	var typ byte
	n := len(body) - in.aead.Overhead() - recordTypeSize
	if n > 0 && n < len(p) {
		// The record type lands in p[n], scratch space beyond the data.
		if _, err := in.aead.Open(p[:0], nonce, body, hdr); err != nil {
			return 0, ErrAuthFailed
		}
		in.consume(total)
		in.settle()
		if typ = p[n]; typ == recordData {
			in.nonData = 0
			return n, nil
		}
	} else {
		pt, err := in.aead.Open(body[:0], nonce, body, hdr)
		if err != nil {
			return 0, ErrAuthFailed
		}
		in.consume(total)
		if typ = pt[n]; typ == recordData && n > 0 {
			// The plaintext stays in the buffer until Read has returned
			// all of it; the buffer is not refilled or given back before
			// then.
			in.nonData = 0
			in.plain = pt[:n]
			in.settle()
			return 0, nil
		}
		in.settle()
	}
	return 0, in.control(typ, n, seq)
}

// control acts on a record that delivers no data, whose content has n bytes
// and whose sequence number under the current key is seq: an empty data
// record, a key update or a close record; any other type is invalid here.
// Empty data records and key updates count as non-data records: more than
// maxNonDataRecords in a row end the connection, and a key update is refused
// before the current key has protected keyUpdateMinRecords records, so that
// a peer cannot make this side work (each key update derives a key) without
// sending data.
func (in *inHalf) control(typ byte, n int, seq uint64) error {
	switch typ {
	case recordData, recordKeyUpdate:
		if n != 0 {
			return fmt.Errorf("%w: record type 0x%02x with %d bytes of content", ErrInvalidFrame, typ, n)
		}
		if in.nonData++; in.nonData > maxNonDataRecords {
			return fmt.Errorf("%w: %d in a row, limit %d", ErrTooManyNonDataRecords, in.nonData, maxNonDataRecords)
		}
		if typ == recordData {
			return nil
		}
		if seq < keyUpdateMinRecords {
			return fmt.Errorf("%w: after %d records under the current key, minimum %d", ErrKeyUpdateTooSoon, seq, keyUpdateMinRecords)
		}
		return in.update()
	case recordClose:
		if n != 0 {
			return fmt.Errorf("%w: record type 0x%02x with %d bytes of content", ErrInvalidFrame, typ, n)
		}
		return io.EOF
	}
	return fmt.Errorf("%w: record type 0x%02x", ErrInvalidFrame, typ)
}

// openTEA decrypts a legacy frame body.
func (in *inHalf) openTEA(body []byte, total int) (int, error) {
	if len(body) < tea.CiphertextLen(0) || len(body)%8 != 0 {
		return 0, fmt.Errorf("%w: TEA ciphertext of %d bytes", ErrInvalidFrame, len(body))
	}
	pt, err := in.tea.Decrypt(body[:0], body)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrInvalidFrame, err)
	}
	in.plain = pt
	in.consume(total)
	in.settle()
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
	n, err := c.read(p)
	in.mu.Unlock()
	if c.closed.Load() && in.mu.TryLock() {
		// Close could not take the lock from this Read (or another): the
		// last Read to let go gives the buffers and their charge back.
		in.drop()
		in.wipe()
		in.mu.Unlock()
	}
	return n, err
}

// read is Read with c.in.mu held.
func (c *Conn) read(p []byte) (int, error) {
	in := &c.in
	if err := in.expired(c.closed.Load()); err != nil {
		return 0, err
	}
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
			return 0, c.readFailed(err)
		}
		if n > 0 {
			return n, nil
		}
	}
	if c.closed.Load() {
		return 0, ErrClosed
	}
	n := copy(p, in.plain)
	in.plain = in.plain[n:]
	in.settle()
	return n, nil
}

// expired returns the timeout error of a Read made after the read deadline
// passed (nil if none has, or if an earlier error or Close takes precedence).
func (in *inHalf) expired(closed bool) error {
	if in.err != nil || closed {
		return nil
	}
	if in.deadline.Passed() {
		return os.ErrDeadlineExceeded
	}
	return nil
}

// readFailed makes err permanent for the read side and returns it; a refusal
// of what the peer sent closes the Conn. c.in.mu is held.
func (c *Conn) readFailed(err error) error {
	if c.closed.Load() {
		return c.in.setErr(ErrClosed)
	}
	if refused(err) {
		c.close(false)
	}
	return c.in.setErr(err)
}

// NextRecord waits until the next record's data is here, authenticated or
// ready to be, and returns the size of buffer a Read needs to take all of it
// in one call: a Read with a buffer at least that long returns the record's
// data whole, decrypted straight into the buffer rather than through the
// Conn's own. Records without data (key updates, empty records) are dealt
// with on the way, as Read deals with them; a close record is io.EOF, and
// every error is what Read would return.
//
// It is for a reader that parses its own framing out of what it reads (the
// mux): sizing its buffer to each record, it decrypts every byte once, where
// reads of the framing's own sizes would decrypt a record in place and copy
// it out piece by piece. Data a shorter Read left behind counts as a record
// of its own. A read deadline that expires leaves the Conn usable, as in
// Read, with the partly received record kept.
func (c *Conn) NextRecord() (int, error) {
	in := &c.in
	in.mu.Lock()
	n, err := c.nextRecord()
	in.mu.Unlock()
	if c.closed.Load() && in.mu.TryLock() {
		in.drop() // as in Read: Close could not take the lock
		in.wipe()
		in.mu.Unlock()
	}
	return n, err
}

// nextRecord is NextRecord with c.in.mu held.
func (c *Conn) nextRecord() (int, error) {
	in := &c.in
	if err := in.expired(c.closed.Load()); err != nil {
		return 0, err
	}
	for {
		if in.err != nil {
			return 0, in.err
		}
		if c.closed.Load() {
			return 0, ErrClosed
		}
		if len(in.plain) > 0 {
			return len(in.plain), nil
		}
		if in.tea == nil {
			// The record stays buffered for the Read that takes it; its
			// type is known only once it is opened (a Read of a record
			// that turns out not to carry data fails as it would here).
			_, body, _, err := in.nextFrame(c.conn)
			if err != nil {
				return 0, c.readFailed(err)
			}
			if n := len(body) - in.aead.Overhead() - recordTypeSize; n > 0 {
				// Read opens straight into a buffer longer than the data:
				// the record type lands in the byte beyond it.
				return n + recordTypeSize, nil
			}
		}
		// A record without data, or a legacy frame (decrypted in place into
		// in.plain): opened here.
		if _, err := in.readFrame(c.conn, nil); err != nil {
			return 0, c.readFailed(err)
		}
	}
}

// refused reports whether a read error is this side's refusal of what the
// peer sent (rather than an I/O error or the end of the stream): the Conn is
// then closed at once, without a close record.
func refused(err error) bool {
	for _, e := range []error{ErrAuthFailed, ErrFrameTooLarge, ErrInvalidFrame, ErrNonceExhausted,
		ErrKeyUpdateTooSoon, ErrTooManyNonDataRecords, ErrMemoryBudget} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Write encrypts p and sends it. A Write of at most the negotiated maximum
// frame size (MaxFrameSize, or the peer's smaller value) is sent as exactly
// one frame with one Write on the underlying connection; a longer Write is
// split into frames of that size. A failed Write is permanent, unless it
// timed out: a frame a deadline cut part-way is sealed and partly sent, so it
// counts as written (n includes its data) and the rest of it goes out ahead of
// the next Write's data, or of Close's close record.
//
// Frames of 16 KiB or more are written behind: Write returns once they are
// sealed and queued (at most two wait), and a goroutine that lives while
// frames are queued writes them, so that sealing overlaps sending. An error
// writing them is returned by the next Write, and is permanent, timeouts
// included. Close writes out queued frames first, for at most 5 s or until an
// earlier write deadline.
func (c *Conn) Write(p []byte) (int, error) {
	out := &c.out
	out.mu.Lock()
	defer out.mu.Unlock()
	if out.err != nil {
		return 0, out.err
	}
	if c.closed.Load() {
		if out.retired.Load() {
			out.dropUnsent()
			out.wipe() // Close could not take the lock from an earlier Write
		}
		return 0, ErrClosed
	}
	if out.deadline.Passed() {
		return 0, os.ErrDeadlineExceeded
	}
	if err := out.flush(c.conn); err != nil {
		return 0, c.writeFailed(err)
	}
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), out.maxLen)]
		if sent, err := out.writeFrame(c.conn, chunk); err != nil {
			if sent {
				n += len(chunk)
			}
			return n, c.writeFailed(err)
		}
		n += len(chunk)
		p = p[len(chunk):]
	}
	return n, nil
}

// writeFailed makes err permanent for the write side and returns it, unless it
// is a timeout of a direct write, which leaves at most a frame's tail in unsent.
// c.out.mu is held.
func (c *Conn) writeFailed(err error) error {
	out := &c.out
	if c.closed.Load() {
		err = ErrClosed
	} else if deadline.TimedOut(err) && !out.behindFailed() {
		return err
	}
	out.err = err
	out.dropUnsent()
	out.wipe()
	return err
}

// behindFailed reports whether the write-behind goroutine has failed: its
// error, a timeout included, is permanent, since frames queued behind the one
// it cut are gone.
func (out *outHalf) behindFailed() bool {
	wb := out.wb.Load()
	if wb == nil {
		return false
	}
	_, err := wb.active()
	return err != nil
}

// flush writes out the rest of a frame a timed-out write left part-way, if any.
func (out *outHalf) flush(conn net.Conn) error {
	if out.unsent == nil {
		return nil
	}
	m, err := conn.Write((*out.unsent)[out.unsentOff:])
	out.unsentOff += m
	if err != nil && out.unsentOff < len(*out.unsent) {
		return err
	}
	out.dropUnsent()
	return nil
}

// dropUnsent gives back the buffer of a frame left part-way.
func (out *outHalf) dropUnsent() {
	if out.unsent != nil {
		putBuffer(out.unsent)
		out.unsent, out.unsentOff = nil, 0
	}
}

// writeFrame seals one data frame into a pooled buffer and sends it,
// preceded by a key update record when the current key has sealed its
// share of blocks. The key has then sealed at least keyUpdateMinRecords
// records (TestKeyUpdateThreshold; a test's small updateAt waits for them),
// so that the peer never refuses the update, and the update is followed by
// this data record: a sender following this never makes the peer count more
// than one record in a row without data.
//
// sent reports whether chunk's frame will reach the peer whole (written,
// queued, or left in unsent by a timeout), even if err is set.
func (out *outHalf) writeFrame(conn net.Conn, chunk []byte) (sent bool, err error) {
	if out.tea == nil {
		limit := out.updateAt
		if limit == 0 {
			limit = keyUpdateBlocks
		}
		if out.sealed >= limit && out.seq >= keyUpdateMinRecords {
			frame, err := out.sealRecord(nil, recordKeyUpdate)
			if err != nil {
				return false, err
			}
			sent, err := out.send(conn, frame, false)
			if !sent {
				return false, err
			}
			// The peer moves to the next key at this record, even one a
			// timeout left in unsent: so does this side.
			if err := out.update(); err != nil {
				return false, err
			}
			out.sealed = 0
			if err != nil {
				return false, err
			}
		}
	}
	frame, err := out.sealRecord(chunk, recordData)
	if err != nil {
		return false, err
	}
	return out.send(conn, frame, len(chunk) >= writeBehindMin)
}

// send writes a sealed frame with one call on conn, or queues it for the
// write-behind goroutine: a large frame, or any frame while others are
// queued (the wire order is the sealing order). It owns frame. sent reports
// whether the frame will reach the peer whole: written, queued, or, when a
// deadline cut its write, kept in unsent to go out first.
func (out *outHalf) send(conn net.Conn, frame *[]byte, large bool) (sent bool, err error) {
	wb := out.wb.Load()
	queued := false
	if wb != nil {
		if queued, err = wb.active(); err != nil {
			putBuffer(frame)
			return false, err
		}
	}
	if queued || large {
		if wb == nil {
			wb = newWriteBehind(conn)
			out.wb.Store(wb)
		}
		err = wb.push(frame)
		return err == nil, err
	}
	m, err := conn.Write(*frame)
	whole := m == len(*frame)
	if !whole && err != nil && deadline.TimedOut(err) {
		out.unsent, out.unsentOff = frame, m
		return true, err
	}
	putBuffer(frame)
	return whole, err
}

// sealRecord returns the next frame for chunk, length prefix included, in
// a pooled buffer (sliced to the frame) that the caller gives back with
// putBuffer once it is written. In secure mode the plaintext is chunk
// followed by the record type typ; legacy TEA frames have no type.
func (out *outHalf) sealRecord(chunk []byte, typ byte) (*[]byte, error) {
	if out.tea != nil {
		bodyLen := tea.CiphertextLen(len(chunk))
		pooled := getBuffer(frameHeaderSize + bodyLen)
		frame := (*pooled)[:frameHeaderSize+bodyLen]
		*pooled = frame
		binary.BigEndian.PutUint32(frame, uint32(bodyLen))
		out.tea.Encrypt(frame[frameHeaderSize:frameHeaderSize], chunk)
		return pooled, nil
	}
	nonce, err := out.nextNonce()
	if err != nil {
		return nil, err
	}
	ptLen := len(chunk) + recordTypeSize
	bodyLen := ptLen + out.aead.Overhead()
	pooled := getBuffer(frameHeaderSize + bodyLen)
	frame := (*pooled)[:frameHeaderSize+bodyLen]
	*pooled = frame
	binary.BigEndian.PutUint32(frame, uint32(bodyLen))
	if bs := out.byteSealer; bs != nil {
		// The kernels read chunk where the caller has it and the type
		// byte apart: no copy of the data before sealing.
		bs.SealWithByte(frame[frameHeaderSize:frameHeaderSize], nonce, chunk, typ, frame[:frameHeaderSize])
	} else {
		// Sealed in place (the plaintext copied into the frame first), as
		// crypto/tls does: cipher.AEAD takes one contiguous plaintext.
		pt := frame[frameHeaderSize : frameHeaderSize+ptLen]
		copy(pt, chunk)
		pt[len(chunk)] = typ
		out.aead.Seal(pt[:0], nonce, pt, frame[:frameHeaderSize])
	}
	out.sealed += recordBlocks(ptLen)
	return pooled, nil
}

// Close writes out frames still queued behind a Write (see Write), sends
// a close record, so that the peer reads io.EOF rather than ErrTruncated,
// then closes the underlying connection and returns its error. The close
// record is left out when a Write is in progress or has failed, and its
// write is bounded by 1 s or an earlier write deadline. Close is safe to call more
// than once and from any goroutine; calls after the first return nil.
// Blocked Reads and Writes return an error wrapping net.ErrClosed.
//
// After its close record Close waits, up to half a second, for the peer to
// close its side. The dialer half-closes first (CloseWrite); the listener,
// over a connection it can reset (TCP), sends no FIN and resets the
// connection once the peer's FIN has arrived, so that neither end keeps
// the connection's ports in TIME_WAIT (see linger).
func (c *Conn) Close() error { return c.close(true) }

// close closes c, first sending a close record if notify is set; a Conn
// that failed on hostile input closes without one.
func (c *Conn) close(notify bool) error {
	first := false
	c.closeOnce.Do(func() {
		first = true
		c.closed.Store(true)
		if wb := c.out.wb.Load(); wb != nil {
			wb.drain(c.out.deadline.When())
		}
		if notify && c.secure && c.sendClose() {
			c.linger()
		}
		c.closeErr = c.conn.Close()
		// Give back a buffer holding part of a frame and overwrite the
		// keys, unless a Read or Write is in progress (it does so itself
		// when it fails, or the next one when it sees the Conn closed).
		if c.in.mu.TryLock() {
			c.in.drop()
			c.in.wipe()
			c.in.mu.Unlock()
		}
		c.out.retired.Store(true)
		if c.out.mu.TryLock() {
			c.out.dropUnsent()
			c.out.wipe()
			c.out.mu.Unlock()
		}
	})
	if first {
		return c.closeErr
	}
	return nil
}

// closeNotifyTimeout bounds the write of the close record. A socket takes
// the small record at once unless its send buffer is full, which means the
// peer stopped reading; then it will see ErrTruncated, rightly, since it
// did not receive everything. Tests shorten it, as most of them close
// net.Pipe ends whose peer does not read.
var closeNotifyTimeout = time.Second

// sendClose writes a close record unless a Write holds the write side, a
// write has failed, a read has seen the peer reset the connection, or
// frames are still queued after drain. It reports whether the record went out.
func (c *Conn) sendClose() bool {
	out := &c.out
	if c.in.reset.Load() {
		return false
	}
	now := time.Now()
	limit := now.Add(closeNotifyTimeout)
	if d := out.deadline.When(); !d.IsZero() && d.Before(limit) {
		limit = d
	}
	if !now.Before(limit) {
		// The write deadline has passed (mux.Session.Abort moves it into the past to drop
		// what is unsent): the record could not go out, so do not wait for a Write to end.
		return false
	}
	// A Write may be in progress on another goroutine (a stream's data as the session
	// closes): the deadline bounds it, and the close record follows it rather than being
	// skipped, which would make the peer read a clean close as a truncation.
	_ = c.conn.SetWriteDeadline(limit)
	for !out.mu.TryLock() {
		if time.Now().After(limit) {
			return false
		}
		time.Sleep(50 * time.Microsecond)
	}
	defer out.mu.Unlock()
	if out.err != nil || c.in.reset.Load() {
		return false
	}
	if out.flush(c.conn) != nil {
		return false
	}
	if wb := out.wb.Load(); wb != nil {
		if queued, err := wb.active(); queued || err != nil {
			return false
		}
	}
	frame, err := out.sealRecord(nil, recordClose)
	if err != nil {
		return false
	}
	_, err = c.conn.Write(*frame)
	putBuffer(frame)
	return err == nil
}

// closeLinger bounds how long Close waits, after its close record, for the peer to close
// its side: about one round trip when the peer follows the protocol.
var closeLinger = 500 * time.Millisecond

// linger ends the connection after the close record: it reads (and drops) what the peer
// still sends until the peer closes its side too, for at most closeLinger. Closing a TCP
// socket while data the peer sent is unread in its receive buffer makes the kernel send a
// reset instead of a FIN, and a reset makes the peer's kernel drop what it received but
// its application has not read yet: the close record and the data before it. A peer's last
// window updates and acknowledgements arrive just then, whenever nobody happens to be
// reading. A Read in progress drains the connection itself; linger waits for it to end.
//
// Only the dialer half-closes (sends its FIN) at once. The listener of a TCP connection
// (one that can be reset) sends no FIN: once the peer's FIN has arrived, after the peer's
// close record, its close is a reset (SO_LINGER 0). A side that sends its FIN first and
// then receives the other's keeps the connection's four-tuple in TIME_WAIT for a minute,
// and a listener's tuple is its listen port and the peer's address: a hole punch between
// the same two listen ports (a peer that reconnects) would find its connect refused with
// EADDRNOTAVAIL wherever the old connection did not use TCP timestamps, and a new SYN
// from a NAT's port is dropped while the tuple lingers. A reset from CLOSE_WAIT leaves no
// TIME_WAIT on either side, and loses nothing: the peer sends its FIN only from its own
// Close, so it reads no more. The roles are fixed by the handshake, so the two ends never
// both wait for the other's FIN, and the close is as quick as the dialer's. If the peer
// has not closed within closeLinger, the listener closes with a FIN after all.
func (c *Conn) linger() {
	cw, ok := c.conn.(interface{ CloseWrite() error })
	if !ok {
		return
	}
	rst, _ := c.conn.(interface{ SetLinger(sec int) error })
	waitFIN := !c.dialer && rst != nil
	if !waitFIN && cw.CloseWrite() != nil {
		return
	}
	end := time.Now().Add(closeLinger)
	if c.conn.SetReadDeadline(end) != nil {
		return
	}
	for !c.in.mu.TryLock() {
		if time.Now().After(end) {
			return
		}
		time.Sleep(time.Millisecond)
	}
	defer c.in.mu.Unlock()
	var buf [2048]byte
	for {
		_, err := c.conn.Read(buf[:])
		if err == nil {
			continue
		}
		if waitFIN && err == io.EOF {
			_ = rst.SetLinger(0)
		}
		return
	}
}

// LocalAddr returns the underlying connection's local address.
func (c *Conn) LocalAddr() net.Addr { return c.conn.LocalAddr() }

// RemoteAddr returns the underlying connection's remote address.
func (c *Conn) RemoteAddr() net.Addr { return c.conn.RemoteAddr() }

// SetDeadline sets the underlying connection's read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	c.in.deadline.Set(t)
	c.out.deadline.Set(t)
	return c.conn.SetDeadline(t)
}

// SetReadDeadline sets the underlying connection's read deadline.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.in.deadline.Set(t)
	return c.conn.SetReadDeadline(t)
}

// SetWriteDeadline sets the underlying connection's write deadline. A write
// that times out part-way through a frame finishes it at the next Write (see
// Write), except behind one (16 KiB or more), where the timeout is permanent.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.out.deadline.Set(t)
	return c.conn.SetWriteDeadline(t)
}

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

// HandshakeRTT returns the time from this side's last handshake flight to the peer's
// answer to it: the round trip, plus the peer's handshake computation (a few hundred
// microseconds: ML-KEM, the signature). It is a first estimate of the round-trip time for
// the layers above, which measure it again as traffic flows. 0 for a legacy TEA Conn.
func (c *Conn) HandshakeRTT() time.Duration {
	return time.Duration(c.handshakeRTT) * time.Microsecond
}

// Secure reports whether the connection is authenticated and encrypted with
// an AEAD (true for Client and Server, false for LegacyTEA).
func (c *Conn) Secure() bool { return c.secure }
