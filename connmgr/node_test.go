package connmgr

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	tendril "github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/secio"
	"github.com/tendril-p2p/tendril/transport"
	"github.com/tendril-p2p/tendril/transport/memory"
)

// dialLog is a transport that records every dial it makes, per address: start time and
// whether the connect succeeded.
type dialLog struct {
	transport.Transport
	mu    sync.Mutex
	dials map[string][]dialRec // guarded by mu
}

type dialRec struct {
	at time.Time
	ok bool
}

func (d *dialLog) Dial(ctx context.Context, addr ma.Multiaddr) (net.Conn, error) {
	start := time.Now()
	c, err := d.Transport.Dial(ctx, addr)
	d.mu.Lock()
	d.dials[addr.String()] = append(d.dials[addr.String()], dialRec{at: start, ok: err == nil})
	d.mu.Unlock()
	return c, err
}

func (d *dialLog) count(addr ma.Multiaddr) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.dials[addr.String()])
}

// checkBackoff fails t if some address was dialled sooner after a run of failed dials
// than the backoff allows: after k failures in a row, (1-Jitter) * Backoff(k). The
// Manager counts more failures than the transport sees (handshakes, short sessions), so
// this is a lower bound of what it must wait.
func (d *dialLog) checkBackoff(t *testing.T, c BackoffConfig) (dials int) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	for addr, recs := range d.dials {
		k := 0
		for i, r := range recs {
			dials++
			if i > 0 && k > 0 {
				// Computed here, not with Backoff, so that a wrong Backoff fails too.
				d := c.Base
				for range k - 1 {
					d = min(time.Duration(float64(d)*c.Factor), c.Max)
				}
				want := time.Duration(float64(d) * (1 - c.Jitter))
				if gap := r.at.Sub(recs[i-1].at); gap < want {
					t.Errorf("%s dialled %v after its failure #%d, backoff allows %v", addr, gap, k, want)
				}
			}
			if r.ok {
				k = 0
			} else {
				k++
			}
		}
	}
	return dials
}

// node is one Service with its book and Manager, restartable on the same address with
// the same key.
type node struct {
	t      *testing.T
	net    *memory.Network
	key    *secio.PrivateKey
	id     secio.PeerID
	listen ma.Multiaddr
	cfg    Config
	prot   bool // wire Admission.Protect

	svc  *tendril.Service
	book *addrbook.Book
	mgr  *Manager
	log  *dialLog
}

func newNode(t *testing.T, n *memory.Network, num int, cfg Config) *node {
	t.Helper()
	key, err := secio.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	nd := &node{t: t, net: n, key: key, id: secio.PeerIDFromPublicKey(key.Public()),
		listen: ma.StringCast(fmt.Sprintf("/memory/%d", num)), cfg: cfg}
	nd.book = newBook(t, &addrbook.Config{MaxFailuresNew: 1000, MaxFailuresTried: 1000})
	t.Cleanup(nd.stop)
	return nd
}

// start runs the node: a new Service on a new host of the network, on its address, and
// a Manager over its book.
func (nd *node) start() {
	t := nd.t
	t.Helper()
	nd.log = &dialLog{Transport: nd.net.NewTransport(), dials: make(map[string][]dialRec)}
	var mgr *Manager
	cfg := tendril.Config{PrivateKey: nd.key, Transports: []transport.Transport{nd.log}}
	if nd.prot {
		cfg.Admission.Protect = func(s *tendril.Session) bool { return mgr.Protect(s) }
	}
	svc, err := tendril.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Listen(context.Background(), tendril.Addr{Transport: nd.listen}); err != nil {
		t.Fatal(err)
	}
	// Set before the Manager starts: its first dials may run a Config.Dial hook that uses it.
	nd.svc = svc
	mgr, err = New(svc, nd.book, nd.cfg)
	if err != nil {
		t.Fatal(err)
	}
	nd.mgr = mgr
}

// stop closes the Manager and the Service; the book stays, saved and loaded back as a
// restarted node would read its file.
func (nd *node) stop() {
	if nd.svc == nil {
		return
	}
	if nd.mgr != nil {
		nd.mgr.Close()
	}
	nd.svc.Close()
	var buf bytes.Buffer
	if err := nd.book.Save(&buf, time.Now()); err != nil {
		nd.t.Fatal(err)
	}
	nd.book = newBook(nd.t, &addrbook.Config{MaxFailuresNew: 1000, MaxFailuresTried: 1000})
	if _, err := nd.book.Load(&buf, time.Now()); err != nil {
		nd.t.Fatal(err)
	}
	nd.svc, nd.mgr = nil, nil
}

func (nd *node) sessions() int {
	if nd.svc == nil {
		return 0
	}
	return len(nd.svc.Sessions())
}

// tell adds the others' addresses to nd's book.
func (nd *node) tell(others ...*node) {
	for _, o := range others {
		if o != nd {
			nd.book.Add(time.Now(), o.id, []ma.Multiaddr{o.listen}, addrbook.Source{Kind: addrbook.SourceBootstrap})
		}
	}
}

// waitFor polls cond every 20 ms until it holds or limit passes, and returns how long
// it took.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}
