package secio

import (
	"context"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"
)

// latencyConn is one end of an in-memory connection whose every Write
// reaches the other end a fixed delay later (one-way latency, unlimited
// bandwidth). It counts flights: each Write is tagged with its depth, one
// more than the deepest message this end had read when it wrote (a Read
// returns bytes of one Write at a time), so a message sent in reply to
// the n-th flight is flight n+1 whatever the scheduling.
type latencyConn struct {
	in, out chan delayed
	delay   time.Duration
	rest    []byte
	done    chan struct{}
	once    *sync.Once

	mu     sync.Mutex
	depth  int   // deepest flight read so far
	writes []int // flight of each Write
}

type delayed struct {
	at    time.Time
	depth int
	data  []byte
}

func newLatencyPair(delay time.Duration) (*latencyConn, *latencyConn) {
	x, y := make(chan delayed, 64), make(chan delayed, 64)
	done := make(chan struct{})
	once := new(sync.Once)
	return &latencyConn{in: x, out: y, delay: delay, done: done, once: once},
		&latencyConn{in: y, out: x, delay: delay, done: done, once: once}
}

func (c *latencyConn) Read(p []byte) (int, error) {
	if len(c.rest) == 0 {
		select {
		case d := <-c.in:
			time.Sleep(time.Until(d.at))
			c.rest = d.data
			c.mu.Lock()
			c.depth = max(c.depth, d.depth)
			c.mu.Unlock()
		case <-c.done:
			return 0, io.EOF
		}
	}
	n := copy(p, c.rest)
	c.rest = c.rest[n:]
	return n, nil
}

func (c *latencyConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	depth := c.depth + 1
	c.writes = append(c.writes, depth)
	c.mu.Unlock()
	select {
	case c.out <- delayed{at: time.Now().Add(c.delay), depth: depth, data: append([]byte(nil), p...)}:
		return len(p), nil
	case <-c.done:
		return 0, net.ErrClosed
	}
}

// flights returns the flight of each Write so far.
func (c *latencyConn) flights() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.writes)
}

func (c *latencyConn) Close() error                       { c.once.Do(func() { close(c.done) }); return nil }
func (c *latencyConn) LocalAddr() net.Addr                { return &net.UnixAddr{Name: "latency", Net: "mem"} }
func (c *latencyConn) RemoteAddr() net.Addr               { return &net.UnixAddr{Name: "latency", Net: "mem"} }
func (c *latencyConn) SetDeadline(t time.Time) error      { return nil }
func (c *latencyConn) SetReadDeadline(t time.Time) error  { return nil }
func (c *latencyConn) SetWriteDeadline(t time.Time) error { return nil }

// TestHandshakeFlights checks the handshake's latency: each side writes
// three messages, in flights 1, 2 and 3 (Proposes, Exchanges, Confirms,
// each pair in flight at once), and the first request and its response
// are flights 4 and 5, with no extra round trip. On the link's one-way
// delay D, the handshake cannot end before 3D nor the response arrive
// before 5D.
func TestHandshakeFlights(t *testing.T) {
	const d = 20 * time.Millisecond
	x, y := newLatencyPair(d)
	defer x.Close()
	start := time.Now()
	var done [2]time.Duration
	var sa, sb *Conn
	var errA, errB error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		sa, errA = Client(context.Background(), x, testConfig("a"))
		done[0] = time.Since(start)
	}()
	go func() {
		defer wg.Done()
		sb, errB = Server(context.Background(), y, testConfig("b"))
		done[1] = time.Since(start)
	}()
	wg.Wait()
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	for _, c := range []*latencyConn{x, y} {
		if f := c.flights(); !slices.Equal(f, []int{1, 2, 3}) {
			t.Fatalf("handshake writes in flights %v, want [1 2 3]", f)
		}
	}
	for i, el := range done {
		if el < 3*d {
			t.Fatalf("side %d completed after %v, before 3 flights", i, el)
		}
	}
	// The client's request goes out as soon as Client returns; the server
	// answers as soon as it reads it.
	echo := make(chan error, 1)
	go func() {
		buf := make([]byte, 4)
		if _, err := io.ReadFull(sb, buf); err != nil {
			echo <- err
			return
		}
		_, err := sb.Write(buf)
		echo <- err
	}()
	if _, err := sa.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, err := readN(sa, 4); err != nil {
		t.Fatal(err)
	}
	if err := <-echo; err != nil {
		t.Fatal(err)
	}
	if f := x.flights(); !slices.Equal(f, []int{1, 2, 3, 4}) {
		t.Fatalf("client writes in flights %v, want the request in flight 4", f)
	}
	if f := y.flights(); !slices.Equal(f, []int{1, 2, 3, 5}) {
		t.Fatalf("server writes in flights %v, want the response in flight 5", f)
	}
	if el := time.Since(start); el < 5*d {
		t.Fatalf("first response after %v, before 5 flights", el)
	}
}
