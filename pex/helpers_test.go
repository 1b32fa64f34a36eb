package pex

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"
	"go.uber.org/goleak"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/peerrecord"
	"github.com/tendril-p2p/tendril/secio"
	"github.com/tendril-p2p/tendril/transport"
	"github.com/tendril-p2p/tendril/transport/memory"
)

// TestMain fails the package's tests if any goroutine outlives them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// node is a Service on the in-memory network with a book and a PEX.
type node struct {
	svc  *tendril.Service
	key  *secio.PrivateKey
	addr tendril.Addr
	book *addrbook.Book
	pex  *PEX
}

func newService(t testing.TB, net *memory.Network, protos ...tendril.Protocol) (*tendril.Service, *secio.PrivateKey, tendril.Addr) {
	t.Helper()
	key, err := secio.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	svc, err := tendril.New(tendril.Config{
		PrivateKey: key, Transports: []transport.Transport{net.NewTransport()}, Protocols: protos,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	a, err := svc.Listen(context.Background(), tendril.MustParseAddr("/memory/0"))
	if err != nil {
		t.Fatal(err)
	}
	return svc, key, a
}

func newBook(t testing.TB) *addrbook.Book {
	var k [32]byte
	rand.Read(k[:])
	b, err := addrbook.New(nil, k)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newNode(t testing.TB, net *memory.Network, cfg Config) *node {
	t.Helper()
	svc, key, a := newService(t, net)
	n := &node{svc: svc, key: key, addr: a, book: newBook(t)}
	p, err := New(svc, n.book, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	n.pex = p
	return n
}

// record signs n's record of its listen address.
func (n *node) record(t testing.TB) *peerrecord.Record {
	r, err := peerrecord.New(n.key, 1, []ma.Multiaddr{n.addr.Transport})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func dial(t testing.TB, from *tendril.Service, to tendril.Addr) *tendril.Session {
	t.Helper()
	s, err := from.Dial(context.Background(), to)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// hostile is a Service that answers peer exchange with whatever answer returns, and
// counts the requests it got.
type hostile struct {
	svc      *tendril.Service
	addr     tendril.Addr
	requests atomic.Int64
}

func newHostile(t testing.TB, net *memory.Network, answer func(n int) []byte) *hostile {
	h := &hostile{}
	h.svc, _, h.addr = newService(t, net, tendril.Protocol{
		Name: Protocol, Versions: []string{Version},
		RequestHandler: tendril.RequestHandlerFunc(func(_ *tendril.Context, _ []byte) ([]byte, error) {
			return answer(int(h.requests.Add(1))), nil
		}),
	})
	return h
}

// frame encodes records as an answer, whatever their number and contents.
func frame(recs ...[]byte) []byte {
	b := binary.AppendUvarint(nil, uint64(len(recs)))
	for _, r := range recs {
		b = binary.AppendUvarint(b, uint64(len(r)))
		b = append(b, r...)
	}
	return b
}

// signed makes count records of fresh keys, the i-th listing addr(i).
func signed(t testing.TB, count int, addr func(i int) string) [][]byte {
	out := make([][]byte, count)
	for i := range out {
		out[i] = newRecord(t, nil, addr(i)).Bytes()
	}
	return out
}

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var manual = Config{NoAutoAsk: true}
