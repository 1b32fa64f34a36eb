package secio

import (
	"context"
	"crypto/mlkem"
	"crypto/mlkem/mlkemtest"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/internal/testutil"
)

// probeConn watches a connection from below a Conn: how many Writes and Reads
// reach it and the longest buffer a Read passed down.
type probeConn struct {
	net.Conn
	writes, reads, maxRead atomic.Int64
}

func (c *probeConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

func (c *probeConn) Read(p []byte) (int, error) {
	c.reads.Add(1)
	for {
		m := c.maxRead.Load()
		if int64(len(p)) <= m || c.maxRead.CompareAndSwap(m, int64(len(p))) {
			break
		}
	}
	return c.Conn.Read(p)
}

// detRand is a deterministic byte stream (SHA-256 in counter mode over a
// label) for reproducible handshakes.
type detRand struct {
	label string
	ctr   uint64
	buf   []byte
}

func newDetRand(label string) *detRand { return &detRand{label: label} }

func (r *detRand) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(r.buf) == 0 {
			h := sha256.New()
			h.Write([]byte(r.label))
			var c [8]byte
			for i := range 8 {
				c[i] = byte(r.ctr >> (56 - 8*i))
			}
			h.Write(c[:])
			r.ctr++
			r.buf = h.Sum(nil)
		}
		m := copy(p[n:], r.buf)
		r.buf = r.buf[m:]
		n += m
	}
	return n, nil
}

// testConfig returns a Config with a fixed key.
func testConfig(label string) *Config {
	return &Config{PrivateKey: testKey(label), HandshakeTimeout: 5 * time.Second}
}

// transport makes a connected pair of raw connections.
type transport struct {
	name string
	pair func(t testing.TB) (net.Conn, net.Conn)
}

var transports = []transport{
	{"pipe", func(t testing.TB) (net.Conn, net.Conn) { return net.Pipe() }},
	{"tcp", testutil.TCPPair},
}

// handshakePair runs Client on a and Server on b concurrently.
func handshakePair(a, b net.Conn, ca, cb *Config) (*Conn, *Conn, error, error) {
	var (
		wg         sync.WaitGroup
		sa, sb     *Conn
		errA, errB error
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		sa, errA = Client(context.Background(), a, ca)
	}()
	go func() {
		defer wg.Done()
		sb, errB = Server(context.Background(), b, cb)
	}()
	wg.Wait()
	return sa, sb, errA, errB
}

// securePair returns two connected secure Conns over tr.
func securePair(t testing.TB, tr transport, ca, cb *Config) (*Conn, *Conn) {
	t.Helper()
	a, b := tr.pair(t)
	sa, sb, errA, errB := handshakePair(a, b, ca, cb)
	if errA != nil || errB != nil {
		t.Fatalf("handshake: client %v, server %v", errA, errB)
	}
	t.Cleanup(func() { sa.Close(); sb.Close() })
	return sa, sb
}

// proxy relays bytes between a side and b side, letting a hook rewrite the
// stream of one direction. Each direction's hook sees the bytes as they
// arrive; msgs are split by the handshake's length prefixes.
type proxy struct {
	wg sync.WaitGroup
}

// relay copies from src to dst applying edit to the whole byte stream
// position by position: edit(off, b) returns the byte to send, or -1 to cut
// the stream (close dst) at that offset.
func (p *proxy) relay(dst, src net.Conn, edit func(off int, b byte) int) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer dst.Close()
		defer src.Close()
		buf := make([]byte, 32<<10)
		off := 0
		for {
			n, err := src.Read(buf)
			for i := 0; i < n; i++ {
				v := edit(off+i, buf[i])
				if v < 0 {
					dst.Write(buf[:i])
					return
				}
				buf[i] = byte(v)
			}
			off += n
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
}

func noEdit(off int, b byte) int { return int(b) }

// mitmHandshake runs a handshake between ca (client) and cb (server) through
// a proxy applying editAB to client->server bytes and editBA to the other
// direction. It returns both errors.
func mitmHandshake(t *testing.T, ca, cb *Config, editAB, editBA func(int, byte) int) (*Conn, *Conn, error, error) {
	t.Helper()
	a, pa := net.Pipe()
	pb, b := net.Pipe()
	var p proxy
	p.relay(pb, pa, editAB)
	p.relay(pa, pb, editBA)
	sa, sb, errA, errB := handshakePair(a, b, ca, cb)
	t.Cleanup(func() {
		if sa != nil {
			sa.Close()
		}
		if sb != nil {
			sb.Close()
		}
		a.Close()
		b.Close()
		p.wg.Wait()
	})
	return sa, sb, errA, errB
}

// memConn gives the in-memory test connections (bufConn, latencyConn, fuzzConn) the
// net.Conn methods they have no use for: a fixed address, and deadlines that are ignored.
type memConn struct{}

func (memConn) LocalAddr() net.Addr              { return &net.UnixAddr{Name: "mem", Net: "mem"} }
func (memConn) RemoteAddr() net.Addr             { return &net.UnixAddr{Name: "mem", Net: "mem"} }
func (memConn) SetDeadline(time.Time) error      { return nil }
func (memConn) SetReadDeadline(time.Time) error  { return nil }
func (memConn) SetWriteDeadline(time.Time) error { return nil }

// skipMemoryTest skips a test that measures retained memory with -short (the test says in
// cost what it does) and under the race detector, which changes what goroutines and
// allocations retain.
func skipMemoryTest(t *testing.T, cost string) {
	t.Helper()
	if testing.Short() {
		t.Skip(cost)
	}
	if raceEnabled {
		t.Skip("the race detector changes what goroutines and allocations retain")
	}
}

// keepWriting writes messages of size bytes to c on a new goroutine until a Write fails or
// stop is closed; the channel it returns is closed when the goroutine has returned.
func keepWriting(c net.Conn, size int, stop <-chan struct{}) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		msg := make([]byte, size)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := c.Write(msg); err != nil {
				return
			}
		}
	}()
	return done
}

// readN reads exactly n bytes from c.
func readN(c io.Reader, n int) ([]byte, error) {
	buf := make([]byte, n)
	_, err := io.ReadFull(c, buf)
	return buf, err
}

func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}

// Tests make ML-KEM encapsulation deterministic (its randomness read from
// the listener's Config.Rand), so that the vectors are reproducible.
func init() {
	encapsulate768 = func(ek *mlkem.EncapsulationKey768, r io.Reader) ([]byte, []byte, error) {
		var m [32]byte
		if _, err := io.ReadFull(r, m[:]); err != nil {
			return nil, nil, err
		}
		return mlkemtest.Encapsulate768(ek, m[:])
	}
}
