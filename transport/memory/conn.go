package memory

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/transport"
)

// Conn is one end of an in-memory connection. It is a net.Conn with the semantics of a
// TCP connection over its links: bytes written are held (up to Link.Buffer each way)
// until the peer reads them, and readable once they have arrived; Write blocks while the
// buffer is full. Its errors are *net.OpError, as a TCP connection's: a timeout wraps
// os.ErrDeadlineExceeded (Timeout() is true), a use after Close net.ErrClosed, a write
// after the peer's Close ErrReset; the end of the peer's stream is io.EOF itself.
type Conn struct {
	local, remote Addr
	in, out       *pipe // what this end reads, and writes

	wmu     sync.Mutex // one Write at a time, so that concurrent Writes do not interleave
	closed  atomic.Bool
	release func() // frees the local number of a dialled connection; nil for an accepted one
}

var (
	_ net.Conn            = (*Conn)(nil)
	_ transport.Addressed = (*Conn)(nil)
)

// newConnPair connects a dialer at d to a listener at l over the paths from d's host to
// l's (out) and back (in).
func newConnPair(d, l Addr, out, in *path) (dialer, acceptor *Conn) {
	dl, ld := newPipe(out), newPipe(in)
	return &Conn{local: d, remote: l, in: ld, out: dl}, &Conn{local: l, remote: d, in: dl, out: ld}
}

// Read reads bytes that have arrived, waiting for some. It returns io.EOF once the peer
// has closed or half-closed the connection and everything it wrote before has been read.
func (c *Conn) Read(b []byte) (int, error) {
	n, err := c.in.read(b)
	if err != nil && err != io.EOF {
		err = c.opError("read", err)
	}
	return n, err
}

// Write copies b into the connection, waiting while its buffer is full; it keeps no
// reference to b. Concurrent Writes do not interleave.
func (c *Conn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	n, err := c.out.write(b)
	c.wmu.Unlock()
	if err != nil {
		err = c.opError("write", err)
	}
	return n, err
}

// Close closes both directions: reads and writes on this end fail with net.ErrClosed,
// pending ones included; the peer reads what was written before, then io.EOF, and its
// writes fail with ErrReset at once (over TCP, the first would succeed and the reset
// come back a round trip later). Closing again returns an error wrapping net.ErrClosed.
func (c *Conn) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return c.opError("close", net.ErrClosed)
	}
	c.in.closeRead()
	c.out.closeWrite()
	if c.release != nil {
		c.release()
	}
	return nil
}

// CloseWrite half-closes the connection, as TCP's shutdown(SHUT_WR): the peer reads what
// was written before, then io.EOF; this end may still read. Later writes fail with
// net.ErrClosed.
func (c *Conn) CloseWrite() error {
	if c.closed.Load() {
		return c.opError("close", net.ErrClosed)
	}
	c.out.closeWrite()
	return nil
}

// LocalAddr returns this end's address, an Addr.
func (c *Conn) LocalAddr() net.Addr { return c.local }

// RemoteAddr returns the peer's address, an Addr.
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// LocalMultiaddr returns /memory/N of this end.
func (c *Conn) LocalMultiaddr() ma.Multiaddr { return c.local.Multiaddr() }

// RemoteMultiaddr returns /memory/N of the peer.
func (c *Conn) RemoteMultiaddr() ma.Multiaddr { return c.remote.Multiaddr() }

// SetDeadline sets the read and write deadlines, as net.Conn's.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// SetReadDeadline sets the time after which reads fail with a timeout (the zero time:
// never). It may be changed at any time, a pending Read included, and extended after it
// passed.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if c.closed.Load() || !c.in.setReadDeadline(t) {
		return c.opError("set", net.ErrClosed)
	}
	return nil
}

// SetWriteDeadline is SetReadDeadline for writes. A Write that times out may have
// written part of its bytes; it returns how many.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	if c.closed.Load() {
		return c.opError("set", net.ErrClosed)
	}
	c.out.setWriteDeadline(t)
	return nil
}

func (c *Conn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "memory", Source: c.local, Addr: c.remote, Err: err}
}
