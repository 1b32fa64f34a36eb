package secio

import (
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/internal/testutil"
)

// TestCloseLeavesNoTimeWait: however a TCP connection's two Conns close (the dialer
// first, the listener first, or both at once), each peer reads the other's data and close
// record, both Closes return without waiting out closeLinger, and no socket of the
// connection is left in TIME_WAIT: the listener resets the connection once the dialer's FIN
// has arrived, rather than sending a FIN of its own. A tuple in TIME_WAIT (a listen port
// and a peer's address) makes a new connection between the same two ports fail, as a hole
// punch between two listen ports does, with EADDRNOTAVAIL where the old connection had no
// TCP timestamps.
func TestCloseLeavesNoTimeWait(t *testing.T) {
	defer func(d time.Duration) { closeLinger = d }(closeLinger)
	closeLinger = 2 * time.Second
	for _, first := range []string{"dialer", "listener", "both"} {
		t.Run(first+"-closes-first", func(t *testing.T) {
			a, b := testutil.TCPPair(t)
			ports := [2]int{a.LocalAddr().(*net.TCPAddr).Port, b.LocalAddr().(*net.TCPAddr).Port}
			sa, sb, errA, errB := handshakePair(a, b, testConfig("a"), testConfig("b"))
			if errA != nil || errB != nil {
				t.Fatal(errA, errB)
			}
			// Each end writes, then closes: the first closer at once, the other once it has
			// read everything up to the first's close record (io.EOF); both at once read nothing.
			closeAfterRead := func(c *Conn, want string) error {
				got, err := io.ReadAll(c)
				if err != nil || string(got) != want {
					return fmt.Errorf("read %q, %v; want %q, then io.EOF", got, err, want)
				}
				return c.Close()
			}
			for _, c := range []*Conn{sa, sb} {
				if _, err := c.Write([]byte("last words")); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			errs := make(chan error, 2)
			switch first {
			case "dialer":
				go func() { errs <- sa.Close() }()
				go func() { errs <- closeAfterRead(sb, "last words") }()
			case "listener":
				go func() { errs <- sb.Close() }()
				go func() { errs <- closeAfterRead(sa, "last words") }()
			case "both":
				go func() { errs <- sa.Close() }()
				go func() { errs <- sb.Close() }()
			}
			for range 2 {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			if took := time.Since(start); took > closeLinger/2 {
				t.Errorf("the two Closes took %s, with closeLinger %s: one waited it out", took, closeLinger)
			}
			if n := testutil.TimeWait(t, ports[0], ports[1]); n != 0 {
				t.Fatalf("%d sockets of the connection in TIME_WAIT after both Closes", n)
			}
		})
	}
}
