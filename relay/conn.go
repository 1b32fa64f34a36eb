package relay

// One end of a circuit: the stream to the relay, carrying data frames, seen as a
// net.Conn on which the two ends run their own handshake.

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	ma "github.com/multiformats/go-multiaddr"

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

	wmu  sync.Mutex // guards wbuf and serializes frames
	wbuf []byte
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
	for c.left == 0 {
		n, err := readFrameHeader(c.r)
		if err != nil {
			c.rerr = err
			return 0, err
		}
		if n == 0 {
			code, err := c.r.ReadByte()
			if err != nil {
				c.rerr = io.ErrUnexpectedEOF
				return 0, c.rerr
			}
			c.rerr = &CircuitError{Code: CloseCode(code)}
			return 0, c.rerr
		}
		c.left = n
	}
	n, err := c.r.Read(p[:min(len(p), c.left)])
	c.left -= n
	if err == io.EOF {
		err = io.ErrUnexpectedEOF // inside a frame
	}
	if err != nil {
		c.rerr = err
	}
	return n, err
}

// readFrameHeader reads a frame's length: a body length in (0, maxFrame], or 0 for a
// close notice. io.EOF means the stream ended cleanly between frames. maxFrame fits in a
// three-byte uvarint; a longer header is malformed.
func readFrameHeader(r *bufio.Reader) (int, error) {
	var n uint64
	for i := range maxHeader {
		b, err := r.ReadByte()
		if err != nil {
			if i > 0 && err == io.EOF {
				return 0, io.ErrUnexpectedEOF
			}
			return 0, err
		}
		n |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			if n > maxFrame {
				return 0, fmt.Errorf("%w: frame of %d bytes, above %d", ErrMalformed, n, maxFrame)
			}
			return int(n), nil
		}
	}
	return 0, fmt.Errorf("%w: frame header longer than %d bytes", ErrMalformed, maxHeader)
}

// maxHeader is the longest frame header: maxFrame in a uvarint.
const maxHeader = 3

// Write sends p in frames of at most maxFrame bytes, each in one write to the stream.
func (c *Conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	written := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), maxFrame)]
		if c.wbuf == nil {
			c.wbuf = make([]byte, 0, maxFrame+binary.MaxVarintLen32)
		}
		b := binary.AppendUvarint(c.wbuf[:0], uint64(len(chunk)))
		b = append(b, chunk...)
		if _, err := c.st.Write(b); err != nil {
			return written, err
		}
		written += len(chunk)
		p = p[len(chunk):]
	}
	return written, nil
}

// Close closes the stream to the relay; the relay passes the end on.
func (c *Conn) Close() error { return c.st.Close() }

// CloseWrite half-closes the circuit: the other end reads io.EOF after the data written.
func (c *Conn) CloseWrite() error {
	if cw, ok := c.st.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.st.Close()
}

// SetDeadline sets the stream's deadlines.
func (c *Conn) SetDeadline(t time.Time) error { return c.st.SetDeadline(t) }

// SetReadDeadline sets the stream's read deadline.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.st.SetReadDeadline(t) }

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
