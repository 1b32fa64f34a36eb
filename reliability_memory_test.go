package tendril

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/mux"
)

// The memory tests play a peer that writes yamux frames by hand over a real secio
// connection, pushing data into every stream it may open and never reading anything, in
// the four ways a node can be made to buffer: a raw handler that does not read yet, a
// message handler that blocks, streams refused (unknown protocol) with data behind the
// request, and resets ignored (data keeps coming on streams the node reset). Whatever the
// way, the session holds at most its budget, other peers are served, and everything is
// released within 2 s of the session's end.

const (
	memRawProto   = "/mem/raw"
	memBlockProto = "/mem/block"
	testSessionMB = 8
	testServiceMB = 20
)

// gate is where the memory tests' handlers wait; open lets the waiting ones go.
type gate struct {
	mu sync.Mutex
	ch chan struct{}
}

func newGate() *gate { return &gate{ch: make(chan struct{})} }

func (g *gate) wait() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ch
}

// open lets every handler go until the next close.
func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.ch:
	default:
		close(g.ch)
	}
}

// close makes handlers wait again.
func (g *gate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.ch:
		g.ch = make(chan struct{})
	default:
	}
}

// memoryConfig is hostileConfig with a raw protocol whose handler does not read, a message
// protocol whose handler blocks, and small budgets. The handlers wait for the gate (or
// their context).
func memoryConfig(box *checker, release *gate) Config {
	cfg := hostileConfig(box)
	cfg.Protocols = append(cfg.Protocols,
		Protocol{Name: memRawProto, Versions: []string{"1"}, StreamHandler: StreamHandlerFunc(
			func(c *Context, _ string, _ net.Conn) {
				select { // not reading
				case <-c.Done():
				case <-release.wait():
				}
			})},
		Protocol{Name: memBlockProto, Versions: []string{"1"}, Handler: HandlerFuncs{
			OnReceived: func(c *Context, _ []byte) {
				select { // blocked in the first message
				case <-c.Done():
				case <-release.wait():
				}
			}}},
	)
	cfg.MaxSessionMemory = testSessionMB << 20
	cfg.MaxMemory = testServiceMB << 20
	cfg.NegotiationTimeout = 30 * time.Second // the flood must not be cut short by it
	return cfg
}

// negotiationRequest encodes the opener's request for one version (docs/protocol.md).
func negotiationRequest(name, version string) []byte {
	body := append([]byte{byte(len(name))}, name...)
	body = append(body, 1, byte(len(version)))
	body = append(body, version...)
	h := []byte{0x54, 0x4e, 0x01, 0x01}
	h = binary.BigEndian.AppendUint16(h, uint16(len(body)))
	return append(h, body...)
}

// yamuxFrame encodes a yamux frame.
func yamuxFrame(typ byte, flags uint16, id uint32, body []byte) []byte {
	f := []byte{0, typ}
	f = binary.BigEndian.AppendUint16(f, flags)
	f = binary.BigEndian.AppendUint32(f, id)
	f = binary.BigEndian.AppendUint32(f, uint32(len(body)))
	return append(f, body...)
}

// floodStreams opens n streams on the raw peer's secure connection, each carrying req and
// then data up to the initial window (256 KiB), in 64 KiB frames; with again, it sends as
// much once more on every stream, as a peer that ignores the resets it got would.
func floodStreams(t *testing.T, c net.Conn, firstID uint32, n int, req []byte, again bool) {
	t.Helper()
	const frame = 64 << 10
	body := make([]byte, mux.InitialStreamWindow)
	copy(body, req)
	rounds := 1
	if again {
		rounds = 2
	}
	for r := range rounds {
		for i := range n {
			id := firstID + 2*uint32(i)
			for off := 0; off < len(body); off += frame {
				var flags uint16
				if r == 0 && off == 0 {
					flags = 1 // SYN
				}
				if _, err := c.Write(yamuxFrame(0, flags, id, body[off:off+frame])); err != nil {
					return // the node closed the session: also a bound
				}
			}
		}
	}
}

func TestMemoryBudgetHostile(t *testing.T) {
	checkNoLeaks(t)
	release := newGate()
	defer release.open()
	box := newChecker()
	srv := newService(t, memoryConfig(box, release))
	addr := listen(t, srv)
	g := newGoodPeer(t, srv, box, addr)
	budget := int64(testSessionMB << 20)
	// What the session may hold beyond its windows: stream and handler state for a few
	// hundred streams, buffer chunks on their way back to the pool.
	const slack = 4 << 20

	cases := []struct {
		name  string
		req   []byte
		again bool
	}{
		{"raw handler not reading", negotiationRequest(memRawProto, "1"), false},
		{"message handler blocked", append(negotiationRequest(memBlockProto, "1"), 0, 0, 0, 8), false},
		{"refused with data behind the request", negotiationRequest("/mem/unknown", "1"), false},
		{"resets ignored", negotiationRequest("/mem/unknown", "1"), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			release.close()
			heap0 := liveHeap()
			p := handshakeRaw(t, addr)
			go io.Copy(io.Discard, p.sc) // take the node's answers and resets, ignore them
			var sess *Session
			waitUntil(t, "the session", func() bool { sess = srv.Session(p.sc.LocalPeer()); return sess != nil })
			// 200 streams would be 50 MiB at their initial windows alone.
			floodStreams(t, p.sc, 1, 200, tc.req, tc.again)
			g.chat(t, 20) // the good peer is served meanwhile
			held := int64(liveHeap()) - int64(heap0)
			t.Logf("%s: session reserved %d KiB, heap +%d KiB (budget %d KiB)", tc.name, sess.MemoryUsed()>>10, held>>10, budget>>10)
			if used := sess.MemoryUsed(); used > budget {
				t.Errorf("session reserved %d bytes, budget %d", used, budget)
			}
			if held > budget+slack {
				t.Errorf("heap grew by %d KiB, budget %d KiB", held>>10, budget>>10)
			}
			p.close()
			release.open() // handlers that wait for more than their context
			select {
			case <-sess.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("the session did not end")
			}
			var after int64
			deadline := time.Now().Add(2 * time.Second)
			for {
				after = int64(liveHeap()) - int64(heap0)
				if after < 2<<20 || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if after >= 2<<20 {
				t.Errorf("2 s after the session closed the heap is still %d KiB above where it started", after>>10)
			}
		})
	}

	t.Run("several sessions share the Service budget", func(t *testing.T) {
		release.close()
		heap0 := liveHeap()
		var peers []*rawPeer
		for range 4 { // 4 x 8 MiB of session budgets against 20 MiB for the Service
			p := handshakeRaw(t, addr)
			go io.Copy(io.Discard, p.sc)
			peers = append(peers, p)
		}
		for _, p := range peers {
			floodStreams(t, p.sc, 1, 60, negotiationRequest(memRawProto, "1"), false)
		}
		g.chat(t, 20)
		held := int64(liveHeap()) - int64(heap0)
		t.Logf("service reserved %d KiB, heap +%d KiB", srv.MemoryUsed()>>10, held>>10)
		if used := srv.MemoryUsed(); used > testServiceMB<<20 {
			t.Errorf("service reserved %d bytes, budget %d", used, testServiceMB<<20)
		}
		if held > testServiceMB<<20+slack {
			t.Errorf("heap grew by %d KiB, Service budget %d KiB", held>>10, testServiceMB<<10)
		}
		for _, p := range peers {
			p.close()
		}
		release.open()
	})
}
