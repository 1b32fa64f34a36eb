package relay

// One end of a circuit: the stream to the relay, carrying data frames, seen as a
// net.Conn on which the two ends run their own handshake.

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/internal/deadline"
	"github.com/tendril-p2p/tendril/secio"
)

const (
	// maxFrame bounds a data frame's body. The relay forwards whole frames, so this is
	// also the buffer it holds per direction of a circuit.
	maxFrame = 16 << 10
	// readBuffer is the bufio size on every stream: control messages, frame headers, and
	// the batch of small frames the relay forwards in one write.
	readBuffer = 4 << 10
)

// Conn is one end of a circuit: a net.Conn whose bytes travel, framed, over a stream to
// the relay and on to the other end. The two ends run their own handshake on it
// (tendril.Service.DialConn and ServeConn), so the relay carries only ciphertext.
// When the relay ends the circuit, Read returns a *CircuitError saying why (byte or
// duration limit, the relay closing, the other end gone); a clean close by the other end
// is io.EOF. Conn implements transport.Addressed: its remote multiaddr is
// RELAYTRANSPORT/p2p-circuit, which a relayed Session's RemoteAddr reports.
//
// Its deadlines are the stream's, and a timeout leaves it usable, as a net.Conn's: a Read
// that times out in a frame header keeps it for the next, a Write that times out in the
// middle of a frame sends the rest of it first at the next Write.
type Conn struct {
	st     net.Conn
	relay  secio.PeerID
	peer   secio.PeerID // the other end, as the relay named it (verified by the handshake only)
	limits Limits
	local  ma.Multiaddr
	remote ma.Multiaddr

	rmu  sync.Mutex // guards r, left, rerr
	r    *bufio.Reader
	left int   // bytes of the current data frame not yet read
	rerr error // sticky
	// rdl is the read deadline: a Read that finds its bytes in r does not reach the
	// stream, which would fail it once the deadline has passed.
	rdl deadline.Deadline

	wmu  sync.Mutex // guards wbuf, unsent and serializes frames
	wbuf []byte
	// unsent is the tail of a frame whose write timed out part-way (in wbuf): the other
	// end expects it before any other frame.
	unsent []byte
}

func newConn(st net.Conn, r *bufio.Reader, relay, peer secio.PeerID, limits Limits, local, remote ma.Multiaddr) *Conn {
	return &Conn{st: st, r: r, relay: relay, peer: peer, limits: limits, local: local, remote: remote}
}

// Read reads data frames; a close notice from the relay ends the circuit with its
// *CircuitError.
func (c *Conn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if c.rerr != nil {
		return 0, c.rerr
	}
	if len(p) == 0 {
		return 0, nil
	}
	if c.rdl.Passed() {
		return 0, os.ErrDeadlineExceeded
	}
	for c.left == 0 {
		// Peeked, not consumed, until whole: a timeout in the middle leaves it for the
		// next Read.
		n, k, err := peekFrameHeader(c.r)
		if err != nil {
			return 0, c.readFailed(err)
		}
		if n == 0 {
			b, err := c.r.Peek(k + 1)
			if err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return 0, c.readFailed(err)
			}
			c.rerr = &CircuitError{Code: CloseCode(b[k])}
			return 0, c.rerr
		}
		c.r.Discard(k)
		c.left = n
	}
	n, err := c.r.Read(p[:min(len(p), c.left)])
	c.left -= n
	if err == io.EOF {
		err = io.ErrUnexpectedEOF // inside a frame
	}
	if err != nil {
		return n, c.readFailed(err)
	}
	return n, nil
}

// readFailed makes err sticky, unless it is a timeout, after which the stream is intact.
func (c *Conn) readFailed(err error) error {
	if !deadline.TimedOut(err) {
		c.rerr = err
	}
	return err
}

// readFrameHeader reads a frame's length: a body length in (0, maxFrame], or 0 for a
// close notice. io.EOF means the stream ended cleanly between frames. maxFrame fits in a
// three-byte uvarint; a longer header is malformed.
func readFrameHeader(r *bufio.Reader) (int, error) {
	n, k, err := peekFrameHeader(r)
	if err != nil {
		return 0, err
	}
	r.Discard(k)
	return n, nil
}

// peekFrameHeader is readFrameHeader leaving the header, k bytes, in r.
func peekFrameHeader(r *bufio.Reader) (n, k int, err error) {
	var v uint64
	for i := range maxHeader {
		p, err := r.Peek(i + 1)
		if err != nil {
			if i > 0 && err == io.EOF {
				return 0, 0, io.ErrUnexpectedEOF
			}
			return 0, 0, err
		}
		b := p[i]
		v |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			if v > maxFrame {
				return 0, 0, fmt.Errorf("%w: frame of %d bytes, above %d", ErrMalformed, v, maxFrame)
			}
			return int(v), i + 1, nil
		}
	}
	return 0, 0, fmt.Errorf("%w: frame header longer than %d bytes", ErrMalformed, maxHeader)
}

// maxHeader is the longest frame header: maxFrame in a uvarint.
const maxHeader = 3

// Write sends p in frames of at most maxFrame bytes, each in one write to the stream. A
// Write that times out part-way through a frame counts the frame as written: the rest of
// it goes out first at the next Write or CloseWrite, since the other end reads it as that
// frame's. Close does not wait to send it (the other end then reads io.ErrUnexpectedEOF,
// as for a circuit cut mid-frame).
func (c *Conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.flushLocked(); err != nil {
		return 0, err
	}
	written := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), maxFrame)]
		if c.wbuf == nil {
			c.wbuf = make([]byte, 0, maxFrame+binary.MaxVarintLen32)
		}
		b := binary.AppendUvarint(c.wbuf[:0], uint64(len(chunk)))
		b = append(b, chunk...)
		if m, err := c.st.Write(b); err != nil {
			if m > 0 && m < len(b) && deadline.TimedOut(err) {
				c.unsent = b[m:]
				written += len(chunk)
			}
			return written, err
		}
		written += len(chunk)
		p = p[len(chunk):]
	}
	return written, nil
}

// Close closes the stream to the relay; the relay passes the end on.
func (c *Conn) Close() error { return c.st.Close() }

// flushLocked writes the rest of a frame that a timed-out Write left part-way, if any.
// c.wmu is held.
func (c *Conn) flushLocked() error {
	if len(c.unsent) == 0 {
		return nil
	}
	m, err := c.st.Write(c.unsent)
	c.unsent = c.unsent[m:]
	return err
}

// CloseWrite half-closes the circuit: the other end reads io.EOF after the data written,
// a frame a timed-out Write left part-way included (if its rest cannot be sent before the
// write deadline, CloseWrite returns that timeout and does not half-close). It waits for a
// Write in progress.
func (c *Conn) CloseWrite() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.flushLocked(); err != nil {
		return err
	}
	if cw, ok := c.st.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.st.Close()
}

// SetDeadline sets the stream's deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	c.rdl.Set(t)
	return c.st.SetDeadline(t)
}

// SetReadDeadline sets the stream's read deadline.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.rdl.Set(t)
	return c.st.SetReadDeadline(t)
}

// SetWriteDeadline sets the stream's write deadline.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.st.SetWriteDeadline(t) }

// LocalAddr returns this end's circuit address.
func (c *Conn) LocalAddr() net.Addr { return circuitNetAddr{c.local} }

// RemoteAddr returns the other end's circuit address: not an IP address, so that the
// Service's admission counts a relayed connection against its global limits only (the
// relay, not the dialer, is at the IP address below it).
func (c *Conn) RemoteAddr() net.Addr { return circuitNetAddr{c.remote} }

// LocalMultiaddr implements transport.Addressed.
func (c *Conn) LocalMultiaddr() ma.Multiaddr { return c.local }

// RemoteMultiaddr implements transport.Addressed: RELAYTRANSPORT/p2p-circuit.
func (c *Conn) RemoteMultiaddr() ma.Multiaddr { return c.remote }

// Relayed implements transport.Relayed: a Service prefers a direct session with the
// peer to the one on this circuit.
func (c *Conn) Relayed() bool { return true }

// Relay returns the relay's peer ID.
func (c *Conn) Relay() secio.PeerID { return c.relay }

// Limits returns what the relay allows this circuit.
func (c *Conn) Limits() Limits { return c.limits }

// circuitNetAddr is a circuit's net.Addr.
type circuitNetAddr struct{ m ma.Multiaddr }

func (a circuitNetAddr) Network() string { return "p2p-circuit" }
func (a circuitNetAddr) String() string {
	if a.m == nil {
		return "/p2p-circuit"
	}
	return a.m.String()
}
