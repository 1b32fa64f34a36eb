package secio

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/internal/testutil"
	"golang.org/x/net/nettest"
)

// TestNettest runs the net.Conn conformance tests of golang.org/x/net/nettest (I/O,
// ping-pong, deadlines in the past, present and future, Close during I/O, concurrent
// methods) over loopback TCP: secure Conns each way round, since Client and Server hold
// different keys and sequence numbers, and the legacy TEA framing, which shares the record
// layer but not its close record. Over TCP rather than net.Pipe so that a Write fills a
// socket buffer and blocks part-way through a frame, as it does in use: the deadline tests
// then time a Write out in the middle of a record, and the Conn must stay usable after it.
func TestNettest(t *testing.T) {
	for _, mode := range []string{"client-first", "server-first", "legacy"} {
		t.Run(mode, func(t *testing.T) {
			nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
				a, b, err := testutil.DialTCPPair()
				if err != nil {
					return nil, nil, nil, err
				}
				var sa, sb *Conn
				if mode == "legacy" {
					sa, err = LegacyTEA(a, legacyKey, nil)
					if err == nil {
						sb, err = LegacyTEA(b, legacyKey, nil)
					}
				} else {
					var errB error
					sa, sb, err, errB = handshakePair(a, b, testConfig("client"), testConfig("server"))
					if err == nil {
						err = errB
					}
				}
				if err != nil {
					a.Close()
					b.Close()
					return nil, nil, nil, err
				}
				if mode == "server-first" {
					sa, sb = sb, sa
				}
				return sa, sb, func() { sa.Close(); sb.Close() }, nil
			})
		})
	}
}

// TestDeadlinePassedBuffered: a Read or NextRecord made after the read deadline passed
// fails at once with a timeout even with plaintext already buffered, as a net.Conn's Read
// does with data waiting in the socket (nettest's Reads after a passed deadline find nothing
// buffered, so it does not see this); the data is still there once the deadline is cleared.
func TestDeadlinePassedBuffered(t *testing.T) {
	sa, sb := securePair(t, transports[1], testConfig("a"), testConfig("b"))
	if _, err := sa.Write([]byte("hello, world")); err != nil {
		t.Fatal(err)
	}
	if got, err := readN(sb, 5); err != nil || string(got) != "hello" {
		t.Fatalf("first Read: %q, %v", got, err)
	}
	sb.SetReadDeadline(time.Now().Add(-time.Second))
	if n, err := sb.Read(make([]byte, 10)); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read after the deadline: %d, %v; want 0, os.ErrDeadlineExceeded", n, err)
	}
	if n, err := sb.NextRecord(); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("NextRecord after the deadline: %d, %v; want 0, os.ErrDeadlineExceeded", n, err)
	}
	sb.SetReadDeadline(time.Time{})
	if got, err := readN(sb, 7); err != nil || string(got) != ", world" {
		t.Fatalf("Read once the deadline is cleared: %q, %v", got, err)
	}
}
