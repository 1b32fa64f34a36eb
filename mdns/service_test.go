package mdns

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"
)

// collector gathers OnFound reports.
type collector struct {
	mu    sync.Mutex
	found []Found
	ch    chan Found
}

func newCollector() *collector { return &collector{ch: make(chan Found, 1024)} }

func (c *collector) on(f Found) {
	c.mu.Lock()
	c.found = append(c.found, f)
	c.mu.Unlock()
	select {
	case c.ch <- f:
	default:
	}
}

// wait returns the first report of instance within d.
func (c *collector) wait(t *testing.T, instance string, d time.Duration) Found {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case f := <-c.ch:
			if f.Instance == instance {
				return f
			}
		case <-deadline:
			t.Fatalf("%s not found within %v", instance, d)
			return Found{}
		}
	}
}

func start(t *testing.T, cfg Config) *Service {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestTwoServicesFindEachOther(t *testing.T) { inNetns(t, "TestInnerTwoServices") }

func TestInnerTwoServices(t *testing.T) {
	inner(t)
	ca, cb := newCollector(), newCollector()
	pa := bytes.Repeat([]byte{0xA5, 0}, MaxPayload/2)
	begin := time.Now()
	a := start(t, Config{Instance: "alice", Payload: pa, Port: 1111, OnFound: ca.on})
	b := start(t, Config{Instance: "bob", Payload: []byte("bob's record"), Port: 2222, OnFound: cb.on})
	fb := ca.wait(t, "bob", 3*time.Second)
	fa := cb.wait(t, "alice", 3*time.Second)
	t.Logf("found each other in %v", time.Since(begin))
	if !bytes.Equal(fa.Payload, pa) || fa.Port != 1111 || fa.Interface != "lo" || len(fa.Addrs) == 0 {
		t.Fatalf("bob saw %+v", fa)
	}
	if string(fb.Payload) != "bob's record" || fb.Port != 2222 {
		t.Fatalf("alice saw %+v", fb)
	}
	// A payload change reaches the other side.
	if err := a.SetPayload([]byte("new")); err != nil {
		t.Fatal(err)
	}
	for f := cb.wait(t, "alice", 3*time.Second); string(f.Payload) != "new"; f = cb.wait(t, "alice", 3*time.Second) {
	}
	if err := a.SetPayload(make([]byte, MaxPayload+1)); !errors.Is(err, ErrPayloadTooLarge) {
		t.Fatalf("SetPayload(1201) = %v", err)
	}
	// Close says goodbye: bob forgets alice at once.
	a.Close()
	time.Sleep(200 * time.Millisecond)
	if st := b.Stats(); st.Instances != 0 {
		t.Fatalf("bob still remembers %d instances after alice's goodbye", st.Instances)
	}
	if err := a.Start(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after Close = %v", err)
	}
}

// Two processes on one host share port 5353 (SO_REUSEPORT) and find each other.
func TestTwoProcessesShareThePort(t *testing.T) { inNetns(t, "TestInnerTwoProcesses") }

func TestInnerTwoProcesses(t *testing.T) {
	inner(t)
	peerProcess(t, "")
	c := newCollector()
	begin := time.Now()
	start(t, Config{Instance: "here", OnFound: c.on})
	f := c.wait(t, "there", 3*time.Second)
	t.Logf("found in %v: %+v", time.Since(begin), f)
}

func TestInnerPeerProcess(t *testing.T) {
	inner(t)
	if !envSet("TENDRIL_MDNS_PEER") {
		t.Skip("the peer process of TestInnerTwoProcesses")
	}
	start(t, Config{Instance: "there", Logger: testLogger(t)})
	time.Sleep(10 * time.Second)
}

// An interface that comes up after Start is joined at the next rescan and the peer behind
// it found. The peer runs in a second namespace at the other end of a veth pair (within
// one namespace the kernel would drop IPv4 packets whose source is one of its own
// addresses).
func TestLateInterface(t *testing.T) {
	inNetns(t, "TestInnerLateInterface", []string{"link", "add", "va", "type", "veth", "peer", "name", "vb"})
}

func TestInnerLateInterface(t *testing.T) {
	inner(t)
	peerNs := newNetns(t)
	ipCmd(t, "link", "set", "vb", "netns", peerNs)
	ipCmd(t, "-n", peerNs, "addr", "add", "10.9.0.2/24", "dev", "vb")
	ipCmd(t, "-n", peerNs, "link", "set", "vb", "up")
	peerProcess(t, peerNs)
	c := newCollector()
	start(t, Config{Instance: "here", Interfaces: []string{"va"}, RescanInterval: 200 * time.Millisecond, OnFound: c.on})
	time.Sleep(500 * time.Millisecond) // running, its only interface down
	ipCmd(t, "addr", "add", "10.9.0.1/24", "dev", "va")
	ipCmd(t, "link", "set", "va", "up")
	up := time.Now()
	f := c.wait(t, "there", 5*time.Second)
	t.Logf("found %v after the interface came up: %+v", time.Since(up), f)
	if f.Interface != "va" || !slices.Contains(f.Addrs, netip.MustParseAddr("10.9.0.2")) {
		t.Fatalf("found %+v", f)
	}
}
