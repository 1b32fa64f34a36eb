package secio

import (
	"io"
	"net"
	"sync"
	"testing"

	"github.com/tendril-p2p/tendril/cipher/aead"
)

// bufPipe is one direction of an in-memory connection: Write appends to a
// buffer and never blocks; Read blocks until data arrives or it is closed.
type bufPipe struct {
	mu     sync.Mutex
	cond   sync.Cond
	buf    []byte
	r      int
	closed bool
}

func newBufPipe() *bufPipe {
	p := &bufPipe{}
	p.cond.L = &p.mu
	return p
}

// bufConn is an in-memory net.Conn built from two bufPipes.
type bufConn struct {
	memConn // addresses and deadlines
	in, out *bufPipe
}

func newBufPair() (*bufConn, *bufConn) {
	x, y := newBufPipe(), newBufPipe()
	return &bufConn{in: x, out: y}, &bufConn{in: y, out: x}
}

func (c *bufConn) Read(p []byte) (int, error) {
	in := c.in
	in.mu.Lock()
	defer in.mu.Unlock()
	for in.r == len(in.buf) {
		if in.closed {
			return 0, io.EOF
		}
		in.cond.Wait()
	}
	n := copy(p, in.buf[in.r:])
	in.r += n
	if in.r == len(in.buf) {
		in.r = 0
		in.buf = in.buf[:0]
	}
	return n, nil
}

func (c *bufConn) Write(p []byte) (int, error) {
	out := c.out
	out.mu.Lock()
	defer out.mu.Unlock()
	if out.closed {
		return 0, net.ErrClosed
	}
	out.buf = append(out.buf, p...)
	out.cond.Signal()
	return len(p), nil
}

func (c *bufConn) Close() error {
	for _, p := range []*bufPipe{c.in, c.out} {
		p.mu.Lock()
		p.closed = true
		p.cond.Broadcast()
		p.mu.Unlock()
	}
	return nil
}

// rawPair builds two secure Conns over x and y with fixed secrets, without a
// handshake, for tests of the frame layer and benchmarks.
func rawPair(tb testing.TB, x, y net.Conn, s aead.Suite) (*Conn, *Conn) {
	tb.Helper()
	var k1, k2 [secretSize]byte
	for i := range k1 {
		k1[i] = byte(i)
		k2[i] = byte(100 + i)
	}
	mk := func(c net.Conn, out, in *[secretSize]byte) *Conn {
		sc := newConn(c)
		var err error
		if err = sc.out.install(s, out); err != nil {
			tb.Fatal(err)
		}
		if err = sc.in.install(s, in); err != nil {
			tb.Fatal(err)
		}
		sc.out.maxLen = DefaultMaxFrameSize
		sc.in.maxLen = DefaultMaxFrameSize + recordTypeSize + 16
		sc.suite = s
		sc.secure = true
		return sc
	}
	return mk(x, &k1, &k2), mk(y, &k2, &k1)
}
