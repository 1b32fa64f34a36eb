package memory

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Link shapes the bytes that go one way between two hosts: each write leaves when the
// link is free, occupies it for its length divided by Rate, and arrives Delay after it
// has left. Reads see bytes only once they have arrived. The zero Link is unshaped: bytes
// arrive as they are written.
type Link struct {
	// Delay is the one-way propagation delay. A round trip costs the Delay of both
	// directions, and so does a Dial (the SYN and its answer).
	Delay time.Duration

	// Rate is the link's capacity in bytes per second, 0 for unlimited. The connections
	// between the same two hosts share it in each direction, first written first sent,
	// as flows share a bottleneck: a bulk transfer delays a small message queued behind
	// it.
	Rate int64

	// Buffer bounds what one direction of a connection holds: bytes written and not yet
	// read by the peer, whether in flight or arrived, like a socket's send and receive
	// buffers together. Write blocks while it is full, so that a fast writer over a slow
	// link is flow-controlled as by TCP's window and a connection's memory is bounded.
	// Throughput is at most Buffer/Delay. 0 means the larger of DefaultBuffer and twice
	// the link's bandwidth-delay product (Rate·Delay), capped at 16 MiB, as TCP
	// autotuning grows buffers to the path, so that Rate rather than Buffer limits a
	// transfer. A connection keeps the Buffer of the link when it was dialled.
	Buffer int
}

// DefaultBuffer is the Buffer of a Link that sets none and has no bandwidth-delay product
// to cover (no Rate, or a short Delay). It is of the order of what a Linux TCP socket
// holds before autotuning (128 KiB to receive, plus what waits to be sent), and it is
// yamux's initial stream window, so that over an unshaped link the connection does not
// throttle a stream that the window would not.
const DefaultBuffer = 256 << 10

// maxAutoBuffer caps the Buffer chosen for a link that sets none: a fast, long link would
// otherwise let each connection hold hundreds of megabytes.
const maxAutoBuffer = 16 << 20

// check reports an invalid link (a negative field).
func (l Link) check() error {
	if l.Delay < 0 || l.Rate < 0 || l.Buffer < 0 {
		return fmt.Errorf("memory: invalid Link %+v: negative field", l)
	}
	return nil
}

// buffer returns the bytes a direction of a connection dialled over l holds at most.
func (l Link) buffer() int {
	if l.Buffer > 0 {
		return l.Buffer
	}
	b := int64(DefaultBuffer)
	if l.Rate > 0 {
		// 2·Rate·Delay, in float64 so that it cannot overflow; the cap comes first.
		bdp := 2 * float64(l.Rate) * l.Delay.Seconds()
		if bdp > maxAutoBuffer {
			bdp = maxAutoBuffer
		}
		b = max(b, int64(bdp))
	}
	return int(b)
}

// segment returns the size of the pieces a write on a link of the given rate is cut
// into: about a millisecond of the link's time (1 KiB to 64 KiB), so that a reader sees a
// long write arrive progressively, as its packets would, not all at once when its last
// byte has. Unlimited links need no cutting.
func segment(rate int64) int {
	return int(min(max(rate/1000, 1<<10), 64<<10))
}

// path is the link in one direction between two hosts, shared by their connections.
type path struct {
	link atomic.Pointer[Link] // replaced whole by SetLink; read at every write

	mu   sync.Mutex
	free int64 // when the link has sent all it was given (see clock)
}

func newPath(l Link) *path {
	p := new(path)
	p.link.Store(&l)
	return p
}

// arrival returns when n bytes given to the link at now arrive at the other end, and
// books the link's time they take.
func (p *path) arrival(now int64, n int, l *Link) int64 {
	at := now
	if l.Rate > 0 {
		// n·10⁹/Rate rounded up, without adding Rate (which may be near MaxInt64) to the
		// product: n is at most a segment, so the product fits.
		bits := int64(n) * int64(time.Second)
		d := bits / l.Rate
		if bits%l.Rate != 0 {
			d++
		}
		p.mu.Lock()
		at = max(now, p.free) + d
		p.free = at
		p.mu.Unlock()
	}
	return at + int64(l.Delay)
}

// epoch is the origin of clock.
var epoch = time.Now()

// clock returns the time in nanoseconds since epoch, on the monotonic clock: arrival times
// are plain integers that compare whatever the wall clock does.
func clock() int64 { return int64(time.Since(epoch)) }
