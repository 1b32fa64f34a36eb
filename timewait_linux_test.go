package tendril

import (
	"errors"
	"strconv"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/internal/testutil"
)

// TestCloseLeavesNoTimeWait: a session over TCP closed by either end leaves no socket in
// TIME_WAIT (the listener resets the connection once the dialer's FIN has come, see
// secio.Conn.Close), so that the two ports can be connected again at once: a hole punch
// between two nodes' listen ports fails while the tuple lingers, where the old connection
// had no TCP timestamps.
func TestCloseLeavesNoTimeWait(t *testing.T) {
	needTCP(t)
	for _, closer := range []string{"dialer", "listener"} {
		t.Run(closer, func(t *testing.T) {
			a := newService(t, Config{})
			b := newService(t, Config{})
			sess := dial(t, a, listen(t, b))
			var remote *Session
			waitUntil(t, "b's session", func() bool { remote = b.Session(a.ID()); return remote != nil })
			ports := [2]int{tcpPort(t, sess.LocalAddr().Transport), tcpPort(t, sess.RemoteAddr().Transport)}
			closing, peer := sess, remote
			if closer == "listener" {
				closing, peer = remote, sess
			}
			closing.Close()
			for _, s := range []*Session{sess, remote} {
				select {
				case <-s.Done():
				case <-time.After(10 * time.Second):
					t.Fatal("a session did not close")
				}
			}
			if err := peer.Err(); !errors.Is(err, ErrPeerClosed) {
				t.Errorf("the other end's session ended with %v, want %v", err, ErrPeerClosed)
			}
			time.Sleep(50 * time.Millisecond) // the last segments in flight
			if n := testutil.TimeWait(t, ports[0], ports[1]); n != 0 {
				t.Fatalf("%d sockets of the session's connection in TIME_WAIT", n)
			}
		})
	}
}

func tcpPort(t *testing.T, a ma.Multiaddr) int {
	t.Helper()
	v, err := a.ValueForProtocol(ma.P_TCP)
	if err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	p, err := strconv.Atoi(v)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
