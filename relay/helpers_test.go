package relay

import (
	"context"
	"net"
	"sort"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/secio"
	"github.com/tendril-p2p/tendril/transport"
	"github.com/tendril-p2p/tendril/transport/memory"
)

// echoProto answers each request with "echo:" and the request.
const echoProto = "/test/echo"

// sinkProto reads and discards a raw stream until it ends.
const sinkProto = "/test/sink"

func testProtocols() []tendril.Protocol {
	return []tendril.Protocol{
		{Name: echoProto, Versions: []string{"1"}, RequestHandler: tendril.RequestHandlerFunc(
			func(_ *tendril.Context, req []byte) ([]byte, error) {
				return append([]byte("echo:"), req...), nil
			})},
		{Name: sinkProto, Versions: []string{"1"}, StreamHandler: tendril.StreamHandlerFunc(
			func(c *tendril.Context, _ string, st net.Conn) {
				buf := make([]byte, 32<<10)
				for {
					if _, err := st.Read(buf); err != nil {
						return
					}
				}
			})},
	}
}

// node is a Service on the in-memory network, listening on /memory/N.
type node struct {
	svc  *tendril.Service
	addr tendril.Addr
}

func newNode(t testing.TB, network *memory.Network, cfg tendril.Config) *node {
	t.Helper()
	key, err := secio.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	cfg.PrivateKey = key
	cfg.Protocols = append(cfg.Protocols, testProtocols()...)
	cfg.Transports = []transport.Transport{network.NewTransport()}
	svc, err := tendril.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	a, err := svc.Listen(context.Background(), tendril.MustParseAddr("/memory/0"))
	if err != nil {
		t.Fatal(err)
	}
	return &node{svc: svc, addr: a}
}

func newRelay(t testing.TB, n *node, cfg RelayConfig) *Relay {
	t.Helper()
	r, err := NewRelay(n.svc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func newClient(t testing.TB, n *node, cfg ClientConfig) *Client {
	t.Helper()
	c, err := NewClient(n.svc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// echo makes one request on sess and checks the answer; it returns the round trip.
func echo(t testing.TB, sess *tendril.Session, msg string) time.Duration {
	t.Helper()
	start := time.Now()
	reply, err := sess.Request(ctxT(t, 10*time.Second), echoProto, []byte(msg))
	if err != nil {
		t.Fatalf("echo over %s: %v", sess.RemoteAddr(), err)
	}
	if string(reply) != "echo:"+msg {
		t.Fatalf("echo: got %q", reply)
	}
	return time.Since(start)
}

// rtts measures n echo round trips on sess, pausing gap between them, and returns them
// sorted.
func rtts(t testing.TB, sess *tendril.Session, n int, gap time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = echo(t, sess, "ping")
		time.Sleep(gap)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func median(d []time.Duration) time.Duration { return d[len(d)/2] }

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// trio is a relay A, a target B holding a reservation on it, and a dialer C that knows
// only A's address.
type trio struct {
	network *memory.Network
	a, b, c *node
	relay   *Relay
	client  *Client
	res     *Reservation
}

func newTrio(t testing.TB, rcfg RelayConfig, ccfg ClientConfig) *trio {
	t.Helper()
	network := memory.NewNetwork(memory.NetworkConfig{})
	tr := &trio{network: network}
	tr.a = newNode(t, network, tendril.Config{})
	tr.b = newNode(t, network, tendril.Config{})
	tr.c = newNode(t, network, tendril.Config{})
	tr.relay = newRelay(t, tr.a, rcfg)
	tr.client = newClient(t, tr.b, ccfg)
	res, err := tr.client.Reserve(ctxT(t, 10*time.Second), tr.a.addr)
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	tr.res = res
	return tr
}

// circuitToB is the circuit address of B through A.
func (tr *trio) circuitToB() Circuit { return tr.res.Addr() }
