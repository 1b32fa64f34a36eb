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
	memConn // addresses and deadlines
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

func (c *latencyConn) Close() error { c.once.Do(func() { close(c.done) }); return nil }

// TestHandshakeFlights checks the handshake's latency: the dialer writes
// its ClientHello in flight 1, the listener its ServerHello and Auth in
// flight 2, the dialer its Auth in flight 3 and its first request right
// behind it (Client returns without waiting), and the listener's response
// comes in flight 4: on a link with one-way delay D the first response
// arrives after 4D, two round trips, whatever the key exchange. A retry
// (the listener refuses the dialer's first share) adds two flights.
func TestHandshakeFlights(t *testing.T) {
	cases := []struct {
		name             string
		ka, kb           []KeyExchange
		client, server   []int // flights of the handshake writes
		kex              KeyExchange
		clientDone, resp int // flights read when Client returns; of the response
	}{
		{"default", nil, nil, []int{1, 3}, []int{2}, P256MLKEM768, 2, 4},
		{"X25519 hybrid", []KeyExchange{X25519MLKEM768}, nil, []int{1, 3}, []int{2}, X25519MLKEM768, 2, 4},
		{"classical", []KeyExchange{X25519}, []KeyExchange{X25519}, []int{1, 3}, []int{2}, X25519, 2, 4},
		{"P-256", []KeyExchange{P256}, nil, []int{1, 3}, []int{2}, P256, 2, 4},
		{"retry", []KeyExchange{X25519, X25519MLKEM768}, []KeyExchange{X25519MLKEM768}, []int{1, 3, 5}, []int{2, 4}, X25519MLKEM768, 4, 6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ca, cb := testConfig("a"), testConfig("b")
			ca.KeyExchanges, cb.KeyExchanges = tc.ka, tc.kb
			checkFlights(t, ca, cb, tc.client, tc.server, tc.kex, tc.clientDone, tc.resp)
		})
	}
}

// checkFlights runs a handshake between ca (client) and cb (server) on a
// link with a fixed delay, checks the flights of each side's handshake
// writes and the key exchange, then sends a request as soon as Client
// returns and checks that it travels in the dialer's last flight and its
// response in flight resp.
func checkFlights(t *testing.T, ca, cb *Config, client, server []int, kex KeyExchange, clientDone, resp int) {
	const d = 20 * time.Millisecond
	x, y := newLatencyPair(d)
	defer x.Close()
	start := time.Now()
	var sb *Conn
	var errB error
	served := make(chan struct{})
	go func() {
		defer close(served)
		sb, errB = Server(context.Background(), y, cb)
		if errB != nil {
			return
		}
		// Echo the request.
		buf := make([]byte, 4)
		if _, errB = io.ReadFull(sb, buf); errB != nil {
			return
		}
		_, errB = sb.Write(buf)
	}()
	sa, err := Client(context.Background(), x, ca)
	if err != nil {
		t.Fatal(err)
	}
	done := time.Since(start)
	if _, err := sa.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, err := readN(sa, 4); err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	<-served
	if errB != nil {
		t.Fatal(errB)
	}
	if sa.KeyExchange() != kex || sb.KeyExchange() != kex {
		t.Fatalf("key exchange %s / %s, want %s", sa.KeyExchange(), sb.KeyExchange(), kex)
	}
	last := client[len(client)-1]
	if f := x.flights(); !slices.Equal(f, append(slices.Clone(client), last)) {
		t.Fatalf("client writes in flights %v, want %v then the request in flight %d", f, client, last)
	}
	if f := y.flights(); !slices.Equal(f, append(slices.Clone(server), resp)) {
		t.Fatalf("server writes in flights %v, want %v then the response in flight %d", f, server, resp)
	}
	// Not before the listener's flight, and well before another one (it
	// does not wait for anything after its last flight).
	if done < time.Duration(clientDone)*d || done >= time.Duration(clientDone+2)*d {
		t.Fatalf("Client returned after %v, want between %d and %d one-way delays", done, clientDone, clientDone+2)
	}
	if el < time.Duration(resp)*d {
		t.Fatalf("first response after %v, before %d flights", el, resp)
	}
	sa.Close()
	sb.Close()
}
