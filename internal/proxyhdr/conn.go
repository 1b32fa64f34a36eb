package proxyhdr

import (
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"
)

// Accept reads a PROXY header from c if trusted is set and c starts with one, and returns
// the connection to use from then on:
//   - not trusted: c itself, unread (a PROXY header is then just bytes of the stream);
//   - a header with the client's address: a wrapper of c whose RemoteAddr is the header's
//     Source, as a *net.TCPAddr;
//   - a Local header (a health check, UNKNOWN): c itself, its own RemoteAddr kept;
//   - no header: a wrapper of c that first returns the bytes read to find that out.
//
// The wrappers' LocalAddr, deadlines, Write and Close are c's, and they pass on the
// CloseWrite, SetLinger and SyscallConn methods of *net.TCPConn when c has them.
//
// Accept blocks on c's reads until the header has arrived: the caller bounds it with a
// read deadline on c (and clears it afterwards). On error, which wraps ErrMalformed if
// the header is invalid, the caller closes c.
func Accept(c net.Conn, trusted bool) (net.Conn, error) {
	if !trusted {
		return c, nil
	}
	h, prefix, isProxy, err := Read(c)
	switch {
	case err != nil && !isProxy:
		return nil, fmt.Errorf("proxyhdr: reading the connection's first bytes: %w", err)
	case err != nil:
		return nil, err
	case !isProxy:
		pc := &prefixConn{Conn: c}
		start := len(pc.buf) - len(prefix)
		copy(pc.buf[start:], prefix)
		pc.next.Store(uint32(start))
		return pc, nil
	case h.Local:
		return c, nil
	}
	return &addrConn{Conn: c, remote: net.TCPAddrFromAddrPort(h.Source)}, nil
}

// addrConn is a connection whose client a trusted proxy named. It reads nothing itself,
// so it passes everything on, SyscallConn included. 24 bytes, and the address, built
// once so that RemoteAddr, asked on every admission check and event, allocates nothing.
type addrConn struct {
	net.Conn
	remote *net.TCPAddr
}

// RemoteAddr returns the client's address, as the proxy's header gave it.
func (c *addrConn) RemoteAddr() net.Addr { return c.remote }

// CloseWrite half-closes the connection if it can (secio's close waits for the peer's
// after its close record).
func (c *addrConn) CloseWrite() error { return closeWrite(c.Conn) }

// SetLinger sets the socket's linger if it has one (a refused connection is reset rather
// than left in TIME_WAIT).
func (c *addrConn) SetLinger(sec int) error { return setLinger(c.Conn, sec) }

// SyscallConn returns the socket's: addrConn's Read returns the socket's bytes unchanged,
// so what the socket holds is what a reader will read.
func (c *addrConn) SyscallConn() (syscall.RawConn, error) { return syscallConn(c.Conn) }

// prefixConn is a trusted connection that did not start with a PROXY header: its Read
// returns the bytes Read consumed to find that out, then the connection's own. 32 bytes.
type prefixConn struct {
	net.Conn
	// next is the index in buf of the first prefix byte not yet read, len(buf) once all
	// are. Atomic, because a net.Conn's methods may be called from several goroutines:
	// concurrent Reads each take their bytes with a compare-and-swap, and SyscallConn
	// can ask whether any are left without a lock.
	next atomic.Uint32
	buf  [maxPrefix]byte // the prefix, at the end of buf; never written after Accept
}

// Read returns the pending prefix bytes, alone (waiting for the socket's while holding
// them could stall a reader for nothing), then reads the connection.
func (c *prefixConn) Read(p []byte) (int, error) {
	for {
		i := c.next.Load()
		if int(i) >= len(c.buf) {
			return c.Conn.Read(p)
		}
		n := copy(p, c.buf[i:])
		if c.next.CompareAndSwap(i, i+uint32(n)) {
			return n, nil
		}
	}
}

// CloseWrite half-closes the connection if it can.
func (c *prefixConn) CloseWrite() error { return closeWrite(c.Conn) }

// SetLinger sets the socket's linger if it has one.
func (c *prefixConn) SetLinger(sec int) error { return setLinger(c.Conn, sec) }

// SyscallConn returns the socket's once the prefix has been read, and
// errors.ErrUnsupported before. A caller of SyscallConn may ask the socket how many bytes
// wait to be read (secio does, to take a long record's buffer at once), wait for it to
// be readable, or read it directly: while prefix bytes are pending, the socket would
// understate what is readable, wait while bytes are ready here, or skip the prefix
// altogether. Once they are read, Read returns the socket's bytes unchanged. (secio
// looks the socket up at its first long record, long after the handshake has read the
// prefix.)
func (c *prefixConn) SyscallConn() (syscall.RawConn, error) {
	if int(c.next.Load()) < len(c.buf) {
		return nil, fmt.Errorf("proxyhdr: bytes read before the socket's are pending: %w", errors.ErrUnsupported)
	}
	return syscallConn(c.Conn)
}

func closeWrite(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return fmt.Errorf("proxyhdr: %T cannot half-close: %w", c, errors.ErrUnsupported)
}

func setLinger(c net.Conn, sec int) error {
	if l, ok := c.(interface{ SetLinger(int) error }); ok {
		return l.SetLinger(sec)
	}
	return fmt.Errorf("proxyhdr: %T has no linger: %w", c, errors.ErrUnsupported)
}

func syscallConn(c net.Conn) (syscall.RawConn, error) {
	if sc, ok := c.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, fmt.Errorf("proxyhdr: %T has no socket: %w", c, errors.ErrUnsupported)
}
