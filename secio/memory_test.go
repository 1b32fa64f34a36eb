package secio

import (
	"net"
	"runtime"
	"sync"
	"testing"
	"unsafe"

	"github.com/tendril-p2p/tendril/cipher/aead"
	"github.com/tendril-p2p/tendril/internal/testutil"
)

// idlePairs measures the heap retained by n idle connection pairs made by
// mk, each end with a goroutine blocked in Read as a multiplexer's would be.
// It returns bytes per pair.
func idlePairs(t *testing.T, n int, mk func() (net.Conn, net.Conn)) float64 {
	t.Helper()
	m0 := testutil.SettledMemStats()
	conns := make([]net.Conn, 0, 2*n)
	var wg sync.WaitGroup
	for range n {
		a, b := mk()
		conns = append(conns, a, b)
		for _, c := range []net.Conn{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var p [1]byte
				c.Read(p[:])
			}()
		}
	}
	// Let every reader block, then collect twice so that sync.Pool's victim
	// cache is emptied too: what remains is what the connections hold.
	for range 10 {
		runtime.Gosched()
	}
	m1 := testutil.SettledMemStats()
	for _, c := range conns {
		c.Close()
	}
	wg.Wait()
	runtime.KeepAlive(conns)
	return float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / float64(n)
}

// TestIdleMemory bounds the heap an idle secure connection pair retains
// beyond the transport's own: both Conns after a handshake and traffic
// (small and large frames), each with a reader blocked in Read.
func TestIdleMemory(t *testing.T) {
	skipMemoryTest(t, "makes 200 connection pairs")
	const pairs = 200
	ca, cb := testConfig("a"), testConfig("b")
	ca.Ciphers = []aead.Suite{aead.AES128GCM}
	mkSecure := func() (net.Conn, net.Conn) {
		x, y := net.Pipe()
		sa, sb, errA, errB := handshakePair(x, y, ca, cb)
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		exchangeData(t, sa, sb, []int{100, 100 << 10, 3000})
		return sa, sb
	}
	// A first round creates the goroutines (whose descriptors the runtime
	// keeps for reuse), so that the measured rounds count only what the
	// connections hold.
	idlePairs(t, pairs, mkSecure)
	// A heap reading on a busy machine can only be too high (garbage a collection did not
	// reach yet, other goroutines' allocations): the least of three rounds is the figure.
	var secure, base, own float64
	for i := range 3 {
		b := idlePairs(t, pairs, net.Pipe)
		s := idlePairs(t, pairs, mkSecure)
		if i == 0 || s-b < own {
			secure, base, own = s, b, s-b
		}
	}
	// Per pair: two Conns (the struct with its small read array), two
	// AES-128-GCM states per Conn (crypto/aes round keys and the GCM
	// table, about 1.2 KB each as measured by newAEADSize), one remote
	// PublicKey per Conn, and 1 KiB of slack for allocator rounding. No
	// frame buffer: the old policy kept an 8 KiB read and a 4 KiB write
	// buffer per Conn, which this bound does not allow.
	connSize := float64(unsafe.Sizeof(Conn{}))
	bound := 2*connSize + 4*newAEADSize(t) + 2*128 + 1024
	t.Logf("heap per idle pair: %.0f bytes with secio, %.0f for net.Pipe alone, %.0f for secio (bound %.0f; Conn struct %.0f, AEAD %.0f)",
		secure, base, own, bound, connSize, newAEADSize(t))
	if own > bound {
		t.Fatalf("an idle pair retains %.0f bytes, bound %.0f", own, bound)
	}
}

// newAEADSize returns the heap retained by one AES-128-GCM cipher.AEAD.
func newAEADSize(t *testing.T) float64 {
	t.Helper()
	const n = 1000
	keep := make([]any, n)
	key := make([]byte, 16)
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	for i := range keep {
		a, err := aead.New(aead.AES128GCM, key)
		if err != nil {
			t.Fatal(err)
		}
		keep[i] = a
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	runtime.KeepAlive(keep)
	return float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / n
}
