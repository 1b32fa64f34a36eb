package tendril

import (
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tendril-p2p/tendril/secio"
)

// readErrConn passes reads and writes to the secure connection, remembers the first read
// error and counts the bytes each way (Session.Stats).
type readErrConn struct {
	net.Conn
	sc      *secio.Conn // Conn
	read    atomic.Uint64
	written atomic.Uint64
	err     atomic.Pointer[error]
	once    sync.Once
	failed  chan struct{} // closed when err is set
}

func newReadErrConn(c *secio.Conn) *readErrConn {
	return &readErrConn{Conn: c, sc: c, failed: make(chan struct{})}
}

func (c *readErrConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written.Add(uint64(n))
	return n, err
}

func (c *readErrConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(uint64(n))
	if err != nil {
		c.noteErr(err)
	}
	return n, err
}

// NextRecord passes the secure connection's NextRecord on: the mux reads whole records into
// buffers of its own when its connection offers it (see secio.Conn.NextRecord).
func (c *readErrConn) NextRecord() (int, error) {
	n, err := c.sc.NextRecord()
	if err != nil {
		c.noteErr(err)
	}
	return n, err
}

// noteErr remembers err as the first read error, unless it is a deadline: that is how the mux
// wakes a Read that reads its frames itself, not a failure.
func (c *readErrConn) noteErr(err error) {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return
	}
	first := err // a copy: taking err's own address would move it to the heap on every Read
	c.err.CompareAndSwap(nil, &first)
	c.once.Do(func() { close(c.failed) })
}

// cause returns the first read error, waiting up to wait for the reader to report it: when
// the mux has closed, the connection is closed and a read in progress returns promptly.
func (c *readErrConn) cause(wait time.Duration) error {
	if c == nil {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-c.failed:
		return *c.err.Load()
	case <-t.C:
		return nil
	}
}
