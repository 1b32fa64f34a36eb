package secio

import (
	"bytes"
	"context"
	"fmt"
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

// TestHandshakeFlights checks the handshake's latency for each mix of key
// shares and preferences: each side writes one message per flight, in
// flights 1 and 2 (Proposes with key shares, then Confirms) when both
// Proposes share a key for the negotiated key exchange, and in flights 1
// to 3 (an Exchange flight in between) otherwise. The first request and
// its response follow at once, in the next two flights. On the link's
// one-way delay D, the handshake cannot end before n*D nor the response
// arrive before (n+2)*D.
func TestHandshakeFlights(t *testing.T) {
	mismatch := func(ca, cb *Config) {
		ca.KeyExchanges = []KeyExchange{P256, X25519}
		cb.KeyExchanges = []KeyExchange{X25519, P256}
	}
	cases := []struct {
		name    string
		setup   func(t *testing.T, ca, cb *Config)
		flights int
		kex     KeyExchange
	}{
		{"default", func(t *testing.T, ca, cb *Config) {}, 2, P256},
		{"client without share", func(t *testing.T, ca, cb *Config) { noShare(ca) }, 3, P256},
		{"server without share", func(t *testing.T, ca, cb *Config) { noShare(cb) }, 3, P256},
		{"neither shares", func(t *testing.T, ca, cb *Config) { noShare(ca); noShare(cb) }, 3, P256},
		// The first side's preference decides; the second side's share is
		// for the other exchange, so an Exchange flight follows.
		{"mismatch, client first", func(t *testing.T, ca, cb *Config) {
			mismatch(ca, cb)
			orderedRand(t, ca, cb, true)
		}, 3, P256},
		{"mismatch, server first", func(t *testing.T, ca, cb *Config) {
			mismatch(ca, cb)
			orderedRand(t, ca, cb, false)
		}, 3, X25519},
		{"P-256 only", func(t *testing.T, ca, cb *Config) {
			ca.KeyExchanges, cb.KeyExchanges = []KeyExchange{P256}, []KeyExchange{P256}
		}, 2, P256},
		{"both prefer X25519", func(t *testing.T, ca, cb *Config) {
			ca.KeyExchanges, cb.KeyExchanges = []KeyExchange{X25519, P256}, []KeyExchange{X25519, P256}
		}, 2, X25519},
		// The server's P-256 share is unusable: the client knows only X25519.
		{"server share not offered by client", func(t *testing.T, ca, cb *Config) {
			ca.KeyExchanges, cb.KeyExchanges = []KeyExchange{X25519}, []KeyExchange{P256, X25519}
		}, 3, X25519},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ca, cb := testConfig("a"), testConfig("b")
			tc.setup(t, ca, cb)
			checkFlights(t, ca, cb, tc.flights, tc.kex)
		})
	}
}

// orderedRand gives ca and cb deterministic random sources whose nonces
// make the client the first side (clientFirst) or the second.
func orderedRand(t *testing.T, ca, cb *Config, clientFirst bool) {
	t.Helper()
	for i := range 64 {
		la, lb := fmt.Sprintf("order a %d", i), fmt.Sprintf("order b %d", i)
		var na, nb [NonceSize]byte
		newDetRand(la).Read(na[:])
		newDetRand(lb).Read(nb[:])
		h1 := orderHash(cb.PrivateKey.pub.key, na[:])
		h2 := orderHash(ca.PrivateKey.pub.key, nb[:])
		if (bytes.Compare(h1[:], h2[:]) > 0) == clientFirst {
			ca.Rand, cb.Rand = newDetRand(la), newDetRand(lb)
			return
		}
	}
	t.Fatal("no label gives the wanted order")
}

// checkFlights runs a handshake between ca (client) and cb (server) on a
// link with a fixed delay and checks that each side wrote its handshake
// messages in flights 1 to n, that the key exchange is kex, and that a
// request and its response take flights n+1 and n+2.
func checkFlights(t *testing.T, ca, cb *Config, n int, kex KeyExchange) {
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
		sa, errA = Client(context.Background(), x, ca)
		done[0] = time.Since(start)
	}()
	go func() {
		defer wg.Done()
		sb, errB = Server(context.Background(), y, cb)
		done[1] = time.Since(start)
	}()
	wg.Wait()
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	if sa.KeyExchange() != kex || sb.KeyExchange() != kex {
		t.Fatalf("key exchange %s / %s, want %s", sa.KeyExchange(), sb.KeyExchange(), kex)
	}
	want := make([]int, n)
	for i := range want {
		want[i] = i + 1
	}
	for _, c := range []*latencyConn{x, y} {
		if f := c.flights(); !slices.Equal(f, want) {
			t.Fatalf("handshake writes in flights %v, want %v", f, want)
		}
	}
	for i, el := range done {
		if el < time.Duration(n)*d {
			t.Fatalf("side %d completed after %v, before %d flights", i, el, n)
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
	if f := x.flights(); !slices.Equal(f, append(want, n+1)) {
		t.Fatalf("client writes in flights %v, want the request in flight %d", f, n+1)
	}
	if f := y.flights(); !slices.Equal(f, append(want, n+2)) {
		t.Fatalf("server writes in flights %v, want the response in flight %d", f, n+2)
	}
	if el := time.Since(start); el < time.Duration(n+2)*d {
		t.Fatalf("first response after %v, before %d flights", el, n+2)
	}
}
