package node

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/connmgr"
	"github.com/tendril-p2p/tendril/secio"
	"github.com/tendril-p2p/tendril/transport"
	"github.com/tendril-p2p/tendril/transport/memory"
)

// dialLog records every dial a node's transport makes: the address, when, and whether it
// connected.
type dialLog struct {
	mu    sync.Mutex
	dials map[string][]dialRecord
}

type dialRecord struct {
	at time.Time
	ok bool
}

type countingTransport struct {
	transport.Transport
	log *dialLog
}

func (c countingTransport) Dial(ctx context.Context, addr ma.Multiaddr) (net.Conn, error) {
	conn, err := c.Transport.Dial(ctx, addr)
	c.log.mu.Lock()
	c.log.dials[addr.String()] = append(c.log.dials[addr.String()], dialRecord{time.Now(), err == nil})
	c.log.mu.Unlock()
	return conn, err
}

// swarm is n nodes on one in-memory network, each with its key, address and book file
// kept so that a node can be restarted as itself.
type swarm struct {
	t       *testing.T
	network *memory.Network
	keys    []*secio.PrivateKey
	addrs   []tendril.Addr
	books   []string
	logs    []*dialLog
	nodes   []*Node
	boot    tendril.Addr
}

func newSwarm(t *testing.T, n int, delay time.Duration) *swarm {
	s := &swarm{
		t:       t,
		network: memory.NewNetwork(memory.NetworkConfig{Link: memory.Link{Delay: delay}}),
		keys:    make([]*secio.PrivateKey, n),
		addrs:   make([]tendril.Addr, n),
		books:   make([]string, n),
		logs:    make([]*dialLog, n),
		nodes:   make([]*Node, n),
	}
	dir := t.TempDir()
	for i := range n {
		k, err := secio.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		s.keys[i] = k
		s.books[i] = filepath.Join(dir, fmt.Sprintf("book%d.json", i))
		s.logs[i] = &dialLog{dials: map[string][]dialRecord{}}
		s.addrs[i] = tendril.MustParseAddr(fmt.Sprintf("/memory/%d", 1000+i)).WithPeer(k.PeerID())
	}
	s.boot = s.addrs[0]
	t.Cleanup(func() {
		for _, nd := range s.nodes {
			if nd != nil {
				nd.Close()
			}
		}
	})
	return s
}

// start starts node i with its key, address and book.
func (s *swarm) start(i int) {
	s.t.Helper()
	listen := tendril.Addr{Transport: s.addrs[i].Transport}
	cfg := Config{
		Service: tendril.Config{
			PrivateKey: s.keys[i],
			Transports: []transport.Transport{countingTransport{s.network.NewTransport(), s.logs[i]}},
		},
		Listen:   []tendril.Addr{listen},
		BookFile: s.books[i],
	}
	if i != 0 {
		cfg.Bootstrap = []tendril.Addr{s.boot}
	}
	if i == 5 && os.Getenv("TENDRIL_NODE_DEBUG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	nd, err := New(cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	if err := nd.Start(context.Background()); err != nil {
		s.t.Fatal(err)
	}
	s.nodes[i] = nd
}

func (s *swarm) stop(i int) {
	s.nodes[i].Close()
	s.nodes[i] = nil
}

// peers counts node i's sessions.
func (s *swarm) peers(i int) int { return len(s.nodes[i].Service().Sessions()) }

// connected reports whether the sessions join every running node into one overlay.
func (s *swarm) connected() bool {
	index := map[secio.PeerID]int{}
	for i, nd := range s.nodes {
		if nd != nil {
			index[nd.ID()] = i
		}
	}
	seen := map[int]bool{0: true}
	queue := []int{0}
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		for _, sess := range s.nodes[i].Service().Sessions() {
			if j, ok := index[sess.Peer()]; ok && !seen[j] {
				seen[j] = true
				queue = append(queue, j)
			}
		}
	}
	return len(seen) == len(index)
}

// waitAll waits until every running node has at least min peers and the overlay is
// connected, and returns how long that took, or fails after within.
func (s *swarm) waitAll(min int, within time.Duration) time.Duration {
	s.t.Helper()
	start := time.Now()
	for {
		worst := -1
		for i, nd := range s.nodes {
			if nd != nil && (worst < 0 || s.peers(i) < s.peers(worst)) {
				worst = i
			}
		}
		if s.peers(worst) >= min && s.connected() {
			return time.Since(start)
		}
		if time.Since(start) > within {
			s.t.Fatalf("after %v node %d has %d peers (want %d); overlay connected: %v; its book: %v; its pex: %+v; the bootstrap's pex: %+v; its book: %v",
				within, worst, s.peers(worst), min, s.connected(), s.nodes[worst].Book(), s.nodes[worst].Exchange().Stats(), s.nodes[0].Exchange().Stats(), s.nodes[0].Book())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFiftyNodes: 50 nodes on 25 ms links, given one bootstrap address, all reach 8 peers
// in one connected overlay; 10 of them killed and restarted with their books are all back
// at 8; and no node dialled an address sooner than its backoff allowed after a failure.
// Issue 28 asks for 5 s and 10 s: the test logs how long each took (1.6-2.0 s and
// 0.4-0.5 s on a quiet machine, docs/PERFORMANCE.md) and fails only at three times that,
// so that it catches an overlay that does not form, not a machine busy with other tests
// (the handshakes of 50 nodes are CPU work), and under the race detector at twelve times.
func TestFiftyNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("50 nodes")
	}
	const n, want = 50, 8
	slow := time.Duration(3)
	if raceEnabled {
		slow = 12
	}
	s := newSwarm(t, n, 25*time.Millisecond)
	for i := range n {
		s.start(i)
	}
	took := s.waitAll(want, slow*5*time.Second)
	t.Logf("50 nodes at %d peers, overlay connected, in %v (issue 28: 5 s)", want, took.Round(time.Millisecond))

	victims := rand.Perm(n - 1)[:10]
	for k := range victims {
		victims[k]++ // the bootstrap node stays up
	}
	slices.Sort(victims)
	for _, i := range victims {
		s.stop(i)
	}
	time.Sleep(500 * time.Millisecond)
	for _, i := range victims {
		s.start(i)
	}
	took = s.waitAll(want, slow*10*time.Second)
	t.Logf("killed and restarted %v: all back at %d peers in %v (issue 28: 10 s)", victims, want, took.Round(time.Millisecond))

	checkBackoff(t, s.logs, connmgr.DefaultConfig().Backoff)
}

// checkBackoff fails if any node dialled an address again sooner after a run of failed
// dials than the backoff's shortest wait for that many failures.
func checkBackoff(t *testing.T, logs []*dialLog, bc connmgr.BackoffConfig) {
	t.Helper()
	worst := 0
	for i, l := range logs {
		l.mu.Lock()
		for addr, ds := range l.dials {
			failures := 0
			for k := 1; k < len(ds); k++ {
				if ds[k-1].ok {
					failures = 0
					continue
				}
				failures++
				min := connmgr.Backoff(failures, bc, 0)
				if gap := ds[k].at.Sub(ds[k-1].at); gap < min {
					t.Errorf("node %d dialled %s again %v after failure %d (backoff at least %v)", i, addr, gap, failures, min)
				}
			}
			worst = max(worst, len(ds))
		}
		l.mu.Unlock()
	}
	t.Logf("most dials of one address by one node: %d", worst)
}
