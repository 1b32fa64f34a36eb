package tendril

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The helpers of the reliability tests (reliability_*_test.go): a handler that verifies
// every message it is given, and leak checks for goroutines and file descriptors.

// checker is a Handler that verifies every message: its BLAKE3 digest (see digestMsg) and
// its sequence number, which must be exactly one more than the previous one on the same
// session and protocol. Anything else (a corrupt, replayed, reordered or skipped message)
// is recorded as a violation.
type checker struct {
	mu      sync.Mutex
	next    map[*Session]int
	bad     []string
	total   int
	changed chan struct{}
}

func newChecker() *checker {
	return &checker{next: make(map[*Session]int), changed: make(chan struct{}, 1)}
}

func (c *checker) Connected(*Context, string) {}

func (c *checker) Disconnected(*Context) {}

func (c *checker) Received(hc *Context, msg []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total++
	sess := hc.Session()
	want := c.next[sess]
	switch {
	case !checkDigest(msg):
		c.bad = append(c.bad, fmt.Sprintf("session %d: corrupt message of %d bytes", sess.ID(), len(msg)))
	default:
		seq, err := strconv.Atoi(string(msg[32:40]))
		if err != nil || seq != want {
			c.bad = append(c.bad, fmt.Sprintf("session %d: sequence %q, want %d", sess.ID(), msg[32:40], want))
		}
	}
	c.next[sess] = want + 1
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// count returns how many messages arrived on sess.
func (c *checker) count(sess *Session) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.next[sess]
}

func (c *checker) violations() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.bad...)
}

// waitCount waits until sess has delivered n messages.
func (c *checker) waitCount(t *testing.T, sess *Session, n int) {
	t.Helper()
	if !eventually(30*time.Second, 50*time.Millisecond, c.changed, func() bool { return c.count(sess) >= n }) {
		t.Fatalf("timed out: %d of %d messages on session %d", c.count(sess), n, sess.ID())
	}
}

func (c *checker) assertClean(t *testing.T) {
	t.Helper()
	if v := c.violations(); len(v) > 0 {
		t.Fatalf("%d bad messages reached a handler: %v", len(v), v)
	}
}

// openFDs counts this process's open file descriptors (Linux); -1 elsewhere.
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// warmNetwork makes the runtime create its network poller descriptors before a baseline
// of open descriptors is taken.
func warmNetwork(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
}

// checkNoLeaks registers, as the test's last cleanup, a check that every goroutine started
// since now has ended and that the number of open descriptors is back to what it is now.
// Call it before creating the test's services, so that their Close runs first.
func checkNoLeaks(t *testing.T) {
	t.Helper()
	warmNetwork(t)
	ignore := goleak.IgnoreCurrent()
	fds := openFDs()
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		if err := goleak.Find(ignore); err != nil {
			t.Errorf("goroutines left behind: %v", err)
		}
		if fds < 0 {
			return
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			n := openFDs()
			if n <= fds {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("file descriptors: %d open, %d before the test", n, fds)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// liveHeap returns the live heap after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// sendSeq sends messages first..last-1 (digestMsg, size bytes) on a session's protocol,
// waiting for queue space; it stops at the first error and returns it.
func sendSeq(sess *Session, name string, first, last, size int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := first; i < last; i++ {
		if err := sess.SendContext(ctx, name, digestMsg(i, size)); err != nil {
			return err
		}
	}
	return nil
}
