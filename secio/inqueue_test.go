package secio

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/internal/testutil"
)

// socketTransports are the transports whose connections reach a socket
// through SyscallConn.
var socketTransports = []transport{
	{"tcp", testutil.TCPPair},
	{"unix", unixPair},
}

// unixPair returns the two ends of a Unix stream socket connection.
func unixPair(t testing.TB) (net.Conn, net.Conn) {
	t.Helper()
	dir, err := os.MkdirTemp("", "secio") // short: a socket path has a limit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ln, err := net.Listen("unix", filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	a, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := <-accepted
	if b == nil {
		t.Fatal("accept failed")
	}
	return a, b
}

// roomySockets sets large socket buffers under a and b, so that a record of
// a few hundred KiB fits in the receiver's queue before it reads.
func roomySockets(t *testing.T, a, b *Conn) {
	t.Helper()
	type buffers interface {
		SetReadBuffer(int) error
		SetWriteBuffer(int) error
	}
	for _, c := range []*Conn{a, b} {
		s := c.NetConn().(buffers)
		if err := s.SetReadBuffer(4 << 20); err != nil {
			t.Fatal(err)
		}
		if err := s.SetWriteBuffer(4 << 20); err != nil {
			t.Fatal(err)
		}
	}
}

// waitQueued waits up to 5 s until exactly want bytes wait in c's socket.
func waitQueued(t *testing.T, c net.Conn, want int) {
	t.Helper()
	q := newSocketQueue(c)
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, ok := q.waiting()
		if !ok {
			t.Fatal("the socket cannot tell how many bytes wait in it")
		}
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes wait in the socket, want %d", n, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// hideSyscallConn is a net.Conn wrapper that does not forward SyscallConn.
type hideSyscallConn struct{ net.Conn }

// TestArrivedRecordTakenWhole: a long record that has arrived in the socket
// by the time its length prefix is read is read straight into one buffer for
// the whole record, over TCP and a Unix socket: nothing is copied out of
// chunks, and the memory budget is charged for that buffer alone. Without
// the socket's count the record was received in 64 KiB chunks, then copied
// (all but the buffer's last 64 KiB), as it still is under a wrapper that
// hides SyscallConn.
func TestArrivedRecordTakenWhole(t *testing.T) {
	if !canAskQueue {
		t.Skip("secio cannot ask a socket how many bytes wait in it on this platform")
	}
	for _, tr := range socketTransports {
		for _, size := range []int{100 << 10, 256<<10 + 48, DefaultMaxFrameSize} {
			for _, hide := range []bool{false, true} {
				name := fmt.Sprintf("%s/%dKiB", tr.name, size>>10)
				if hide {
					name += "/without-SyscallConn"
				}
				t.Run(name, func(t *testing.T) {
					pair := tr.pair
					if hide {
						pair = func(t testing.TB) (net.Conn, net.Conn) {
							a, b := tr.pair(t)
							return a, hideSyscallConn{b}
						}
					}
					sa, sb := securePair(t, transport{tr.name, pair}, testConfig("a"), testConfig("b"))
					if !hide {
						roomySockets(t, sa, sb)
					}
					budget := &testBudget{}
					sb.in.mem = budget
					msg := make([]byte, size)
					for i := range msg {
						msg[i] = byte(i * 11)
					}
					sa.out.mu.Lock()
					frame := sealForTest(t, sa, msg)
					sa.out.mu.Unlock()
					wrote := make(chan error, 1)
					go func() {
						_, err := sa.NetConn().Write(frame)
						wrote <- err
					}()
					if !hide {
						waitQueued(t, sb.NetConn(), len(frame))
					}
					got, err := readN(sb, size)
					if err != nil || !bytes.Equal(got, msg) {
						t.Fatalf("%v, data equal %v", err, bytes.Equal(got, msg))
					}
					if err := <-wrote; err != nil {
						t.Fatal(err)
					}
					whole := int64(classSize(bufferClass(len(frame))))
					if hide {
						if sb.in.copied == 0 {
							t.Fatal("without SyscallConn, a long record was not received in chunks")
						}
						return
					}
					if sb.in.copied != 0 || budget.peak != whole {
						t.Fatalf("%d bytes copied out of chunks, %d bytes charged at most; want 0 and %d (one buffer for the record)",
							sb.in.copied, budget.peak, whole)
					}
				})
			}
		}
	}
}

// TestSocketArrivalBound: over TCP and a Unix socket, a peer that sends part
// of a long record (its length prefix alone, or all but the buffer's last
// readAhead bytes less one, or exactly that much) makes the reader hold at
// most readAhead beyond what has arrived; the record's own buffer is taken
// at once only in the last case, and then nothing is copied out of chunks.
func TestSocketArrivalBound(t *testing.T) {
	if !canAskQueue {
		t.Skip("secio cannot ask a socket how many bytes wait in it on this platform")
	}
	const size = DefaultMaxFrameSize
	frameLen := frameHeaderSize + size + recordTypeSize + 16
	full := classSize(bufferClass(frameLen))
	edge := full - readAhead // arrived bytes from which the record's buffer may be taken
	for _, tr := range socketTransports {
		for _, arrived := range []int{frameHeaderSize, edge - 1, edge} {
			t.Run(fmt.Sprintf("%s/arrived=%d", tr.name, arrived), func(t *testing.T) {
				sa, sb := securePair(t, tr, testConfig("a"), testConfig("b"))
				roomySockets(t, sa, sb)
				budget := &testBudget{}
				sb.in.mem = budget
				msg := make([]byte, size)
				for i := range msg {
					msg[i] = byte(i * 5)
				}
				sa.out.mu.Lock()
				frame := sealForTest(t, sa, msg)
				sa.out.mu.Unlock()
				if _, err := sa.NetConn().Write(frame[:arrived]); err != nil {
					t.Fatal(err)
				}
				waitQueued(t, sb.NetConn(), arrived)
				type result struct {
					b   []byte
					err error
				}
				done := make(chan result, 1)
				go func() {
					b, err := readN(sb, size)
					done <- result{b, err}
				}()
				// The reader has taken what arrived and waits for more.
				waitQueued(t, sb.NetConn(), 0)
				time.Sleep(20 * time.Millisecond)
				budget.mu.Lock()
				held, peak := budget.used, budget.peak
				budget.mu.Unlock()
				if peak > int64(arrived)+readAhead {
					t.Fatalf("%d of %d bytes arrived: %d bytes charged at most, more than %d beyond", arrived, frameLen, peak, readAhead)
				}
				if wantWhole := arrived >= edge; (held == int64(full)) != wantWhole {
					t.Fatalf("%d of %d bytes arrived: %d bytes held, whole record's buffer (%d) %v, want %v", arrived, frameLen, held, full, held == int64(full), wantWhole)
				}
				if _, err := sa.NetConn().Write(frame[arrived:]); err != nil {
					t.Fatal(err)
				}
				r := <-done
				if r.err != nil || !bytes.Equal(r.b, msg) {
					t.Fatalf("%v, data equal %v", r.err, bytes.Equal(r.b, msg))
				}
				if copied := sb.in.copied; (copied == 0) != (arrived >= edge) {
					t.Fatalf("%d of %d bytes arrived: %d bytes copied out of chunks", arrived, frameLen, copied)
				}
				if budget.Used() != 0 {
					t.Fatalf("%d bytes still charged", budget.Used())
				}
			})
		}
	}
}
