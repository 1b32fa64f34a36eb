package secio

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// latencyConn is one end of an in-memory connection whose every Write
// reaches the other end a fixed delay later (one-way latency, unlimited
// bandwidth), for counting the flights of a protocol on a clock.
type latencyConn struct {
	in, out chan delayed
	delay   time.Duration
	rest    []byte
	done    chan struct{}
	once    *sync.Once
	mu      sync.Mutex
	writes  int
}

type delayed struct {
	at   time.Time
	data []byte
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
	c.writes++
	c.mu.Unlock()
	select {
	case c.out <- delayed{at: time.Now().Add(c.delay), data: append([]byte(nil), p...)}:
		return len(p), nil
	case <-c.done:
		return 0, net.ErrClosed
	}
}

func (c *latencyConn) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes
}

func (c *latencyConn) Close() error                       { c.once.Do(func() { close(c.done) }); return nil }
func (c *latencyConn) LocalAddr() net.Addr                { return &net.UnixAddr{Name: "latency", Net: "mem"} }
func (c *latencyConn) RemoteAddr() net.Addr               { return &net.UnixAddr{Name: "latency", Net: "mem"} }
func (c *latencyConn) SetDeadline(t time.Time) error      { return nil }
func (c *latencyConn) SetReadDeadline(t time.Time) error  { return nil }
func (c *latencyConn) SetWriteDeadline(t time.Time) error { return nil }

// TestHandshakeFlights checks the handshake's latency on a link with a
// one-way delay D: both sides complete after three flights (3D: Proposes,
// Exchanges, Confirms, each pair in flight at once), each side writes three
// messages, and the first request and its response take one flight each
// (the response arrives at 5D), with no extra round trip.
func TestHandshakeFlights(t *testing.T) {
	if testing.Short() {
		t.Skip("takes a few hundred milliseconds")
	}
	const d = 60 * time.Millisecond
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
	if x.count() != 3 || y.count() != 3 {
		t.Fatalf("handshake writes: client %d, server %d, want 3 each", x.count(), y.count())
	}
	for i, el := range done {
		if el < 3*d || el >= 4*d {
			t.Fatalf("side %d completed after %v, want 3 flights (%v to %v)", i, el, 3*d, 4*d)
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
	if el := time.Since(start); el < 5*d || el >= 6*d {
		t.Fatalf("first response after %v, want 5 flights (%v to %v)", el, 5*d, 6*d)
	}
}
