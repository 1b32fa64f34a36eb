package identify

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/secio"
	"github.com/tendril-p2p/tendril/transport"
	"github.com/tendril-p2p/tendril/transport/memory"
	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// node is a Service on an in-memory network, listening on /memory/N.
type node struct {
	svc  *tendril.Service
	key  *secio.PrivateKey
	addr tendril.Addr
}

func newNode(t testing.TB, network *memory.Network, protos ...tendril.Protocol) *node {
	t.Helper()
	key, err := secio.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	svc, err := tendril.New(tendril.Config{
		PrivateKey: key,
		Protocols:  protos,
		Transports: []transport.Transport{network.NewTransport()},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	addr, err := svc.Listen(context.Background(), tendril.MustParseAddr("/memory/0"))
	if err != nil {
		t.Fatal(err)
	}
	return &node{svc: svc, key: key, addr: addr}
}

// identified is a node running identify, which records what the callbacks report.
type identified struct {
	*node
	id *Identify

	mu     sync.Mutex
	errs   []error // OnError's, guarded by mu
	called int     // OnIdentify calls, guarded by mu
}

func newIdentified(t testing.TB, network *memory.Network, cfg Config, protos ...tendril.Protocol) *identified {
	t.Helper()
	n := &identified{node: newNode(t, network, protos...)}
	cfg.PrivateKey = n.key
	cfg.OnIdentify = func(Info) {
		n.mu.Lock()
		n.called++
		n.mu.Unlock()
	}
	cfg.OnError = func(_ secio.PeerID, err error) {
		n.mu.Lock()
		n.errs = append(n.errs, err)
		n.mu.Unlock()
	}
	id, err := New(n.svc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { id.Close() })
	n.id = id
	return n
}

func (n *identified) errors() []error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]error(nil), n.errs...)
}

func dial(t testing.TB, from *node, to *node) *tendril.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sess, err := from.svc.Dial(ctx, to.addr)
	if err != nil {
		t.Fatal(err)
	}
	return sess
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func chatProto() tendril.Protocol {
	return tendril.Protocol{Name: "/chat", Versions: []string{"1.0", "1.1"}, Handler: tendril.HandlerFuncs{}}
}
