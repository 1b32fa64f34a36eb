package protocol

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/internal/testutil"
	"golang.org/x/net/nettest"
)

// TestNettest runs the net.Conn conformance tests of golang.org/x/net/nettest (I/O,
// ping-pong, deadlines in the past, present and future, Close during I/O, concurrent
// methods) over a LazyConn, the stream a Session's OpenStream returns for a lazily
// negotiated protocol, each way round. The LazyConn is used as OpenStream hands it over:
// the request not sent, the answer not read, so that each test's first calls on it, with
// whatever deadline they set, are the ones that negotiate. Its peer is the acceptor's end
// once Accept has answered (acceptedConn). When that end is the one the tests use first,
// and set deadlines on, the request goes out beforehand, since a handler gets its stream
// only once it has answered; the LazyConn's answer is still left unread. Over loopback
// TCP: the request and the answer cross, which an unbuffered net.Pipe cannot carry.
func TestNettest(t *testing.T) {
	reg := lazyRegistry(t)
	for _, lazyFirst := range []bool{true, false} {
		name := "lazy-first"
		if !lazyFirst {
			name = "acceptor-first"
		}
		t.Run(name, func(t *testing.T) {
			nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
				a, b, err := testutil.DialTCPPair()
				if err != nil {
					return nil, nil, nil, err
				}
				lc, err := NegotiateLazy(a, "/echo", "1", 10*time.Second)
				if err != nil {
					a.Close()
					b.Close()
					return nil, nil, nil, err
				}
				acc := newAcceptedConn(b, reg)
				stop = func() { lc.Close(); acc.Close() }
				if lazyFirst {
					return lc, acc, stop, nil
				}
				// The acceptor's end is used first, with deadlines: as a handler's, it
				// must have answered by then. The LazyConn's answer is left unread.
				if _, err := lc.Write(nil); err != nil {
					stop()
					return nil, nil, nil, err
				}
				if <-acc.done; acc.err != nil {
					stop()
					return nil, nil, nil, acc.err
				}
				return acc, lc, stop, nil
			})
		})
	}
}

// acceptedConn is the acceptor's end of a lazily negotiated stream: Accept runs on it from
// the start, as a Service's handler does, and its Reads and Writes wait until Accept has
// answered (the opener's request comes with its first Write or Read, whenever the test
// makes it). A failed Accept is the error of every call.
type acceptedConn struct {
	net.Conn
	done chan struct{}
	err  error
}

func newAcceptedConn(conn net.Conn, reg *Registry) *acceptedConn {
	c := &acceptedConn{Conn: conn, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		_, _, c.err = Accept(context.Background(), conn, reg)
	}()
	return c
}

func (c *acceptedConn) Read(p []byte) (int, error) {
	<-c.done
	if c.err != nil {
		return 0, c.err
	}
	return c.Conn.Read(p)
}

func (c *acceptedConn) Write(p []byte) (int, error) {
	<-c.done
	if c.err != nil {
		return 0, c.err
	}
	return c.Conn.Write(p)
}

// TestLazyDeadlineWhileAwaiting: a deadline of the caller's that passes while a LazyConn
// awaits the answer (nettest's acceptor answers at once, so its deadlines never meet a
// wait) fails that call with a plain timeout, a net.Error, and leaves the negotiation to
// the next call: a Read woken by a read deadline set while it waits, a Read whose deadline
// cuts the answer in the middle, and a Write beyond MaxUnanswered woken by a write
// deadline. Only the negotiation's own timeout ends the stream (TestNegotiateLazyTimeout).
func TestLazyDeadlineWhileAwaiting(t *testing.T) {
	a, b, err := testutil.DialTCPPair()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer b.Close()
	held := make(chan error, 1)
	go func() {
		_, _, _, err := AcceptHold(context.Background(), b, lazyRegistry(t), func(Info, string) (bool, error) { return true, nil })
		held <- err
	}()
	lc, err := NegotiateLazy(a, "/echo", "1", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wantTimeout := func(what string, n int, err error) {
		t.Helper()
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, ErrNegotiationTimeout) {
			t.Fatalf("%s: %d, %v; want the connection's timeout", what, n, err)
		}
		if _, ok := err.(net.Error); !ok {
			t.Fatalf("%s: %T, want a net.Error itself", what, err)
		}
	}

	time.AfterFunc(50*time.Millisecond, func() { lc.SetReadDeadline(time.Now()) })
	n, err := lc.Read(make([]byte, 4))
	wantTimeout("Read woken by a deadline set while it awaits the answer", n, err)
	if err := <-held; err != nil {
		t.Fatal(err)
	}

	answer := AppendAccept(nil, "1")
	if _, err := b.Write(answer[:3]); err != nil {
		t.Fatal(err)
	}
	lc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	n, err = lc.Read(make([]byte, 4))
	wantTimeout("Read with half the answer", n, err)

	lc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	n, err = lc.Write(make([]byte, MaxUnanswered))
	wantTimeout("Write beyond MaxUnanswered", n, err)

	lc.SetDeadline(time.Time{})
	go func() {
		b.Write(append(answer[3:], "data"...))
		io.Copy(io.Discard, b)
	}()
	buf := make([]byte, 4)
	if _, err := io.ReadFull(lc, buf); err != nil || string(buf) != "data" {
		t.Fatalf("Read once the answer is whole: %q, %v", buf, err)
	}
	if _, err := lc.Write(make([]byte, MaxUnanswered)); err != nil {
		t.Fatalf("Write once answered: %v", err)
	}
}
