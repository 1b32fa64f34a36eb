package tendril

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/hash/blake3"
	"github.com/tendril-p2p/tendril/internal/testutil"
	"github.com/tendril-p2p/tendril/mux"
	"github.com/tendril-p2p/tendril/secio"
)

// Load and soak. TestLoad runs 100 connections by default (50 with -short); TENDRIL_LOAD=1
// runs 1,000 (TENDRIL_LOAD=N runs N). TestSoak churns connections for three rounds by
// default; TENDRIL_SOAK=5m churns for five minutes.

const loadStreams = 4

func loadProtocols(h Handler) []Protocol {
	ps := make([]Protocol, loadStreams)
	for i := range ps {
		ps[i] = Protocol{Name: fmt.Sprintf("/load%d", i), Versions: []string{"1"}, Handler: h}
	}
	return ps
}

// echoHandler sends every message back after checking it.
type echoHandler struct{ bad atomic.Int64 }

func (h *echoHandler) Connected(*Context, string) {}
func (h *echoHandler) Disconnected(*Context)      {}
func (h *echoHandler) Received(c *Context, msg []byte) {
	if !checkDigest(msg) {
		h.bad.Add(1)
		return
	}
	if err := c.SendContext(context.Background(), msg); err != nil {
		h.bad.Add(1)
	}
}

// pinger sends timestamped digest messages one at a time on each stream and records the
// round-trip times of the echoes.
type pinger struct {
	rounds int
	mu     sync.Mutex
	rtts   []time.Duration
	bad    int
	done   sync.WaitGroup // one per stream
	got    map[*Context]int
}

func pingMsg(seq int) []byte {
	m := digestMsg(seq, 128)
	binary.BigEndian.PutUint64(m[40:], uint64(time.Now().UnixNano()))
	sum := blake3.Sum256(m[32:])
	copy(m, sum[:])
	return m
}

func (p *pinger) Connected(*Context, string) {}
func (p *pinger) Disconnected(*Context)      {}
func (p *pinger) Received(c *Context, msg []byte) {
	now := time.Now()
	p.mu.Lock()
	n := p.got[c]
	ok := checkDigest(msg) && string(msg[32:40]) == fmt.Sprintf("%08d", n)
	if !ok {
		p.bad++
	} else {
		p.rtts = append(p.rtts, now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(msg[40:])))))
	}
	n++
	p.got[c] = n
	p.mu.Unlock()
	if n < p.rounds {
		if err := c.Send(pingMsg(n)); err != nil {
			p.mu.Lock()
			p.bad++
			p.mu.Unlock()
		}
	} else if n == p.rounds {
		p.done.Done()
	}
}

func envInt(t *testing.T, name string, def, on int) int {
	v := os.Getenv(name)
	switch v {
	case "":
		return def
	case "1":
		return on
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want 1 or a count", name, v)
	}
	return n
}

func TestLoad(t *testing.T) {
	conns := 100
	if testing.Short() {
		conns = 50
	}
	conns = envInt(t, "TENDRIL_LOAD", conns, 1000)
	const rounds = 10
	checkNoLeaks(t)

	echo := &echoHandler{}
	srv := newService(t, Config{Protocols: loadProtocols(echo), Admission: Admission{MaxInbound: conns + 16}})
	addr := listen(t, srv)
	g0 := runtime.NumGoroutine()
	heap0 := liveHeap()

	p := &pinger{rounds: rounds, got: make(map[*Context]int)}
	clients := make([]*Service, conns)
	sessions := make([]*Session, conns)
	start := time.Now()
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := range conns {
		c, err := New(testConfig(Config{Protocols: loadProtocols(p), EventBuffer: 4}))
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = c
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			sess, err := c.Dial(ctx, addr)
			if err != nil {
				failed.Add(1)
				t.Errorf("dial %d: %v", i, err)
				return
			}
			for s := range loadStreams {
				if err := sess.OpenProtocol(ctx, fmt.Sprintf("/load%d", s)); err != nil {
					failed.Add(1)
					t.Errorf("open %d/%d: %v", i, s, err)
					return
				}
			}
			sessions[i] = sess
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		var cw sync.WaitGroup
		for _, c := range clients {
			cw.Add(1)
			go func() { defer cw.Done(); c.Close() }()
		}
		cw.Wait()
	})
	if failed.Load() > 0 {
		t.FailNow()
	}
	setup := time.Since(start)
	heapConns := liveHeap()
	gConns := runtime.NumGoroutine()

	// Every stream of every connection: rounds of ping, echo, verify.
	p.done.Add(conns * loadStreams)
	start = time.Now()
	for _, sess := range sessions {
		for s := range loadStreams {
			if err := sess.Send(fmt.Sprintf("/load%d", s), pingMsg(0)); err != nil {
				t.Fatal(err)
			}
		}
	}
	finished := make(chan struct{})
	go func() { p.done.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(5 * time.Minute):
		t.Fatal("round trips did not complete")
	}
	exchange := time.Since(start)

	p.mu.Lock()
	rtts := slices.Clone(p.rtts)
	bad := p.bad
	p.mu.Unlock()
	if bad > 0 || echo.bad.Load() > 0 {
		t.Fatalf("%d bad echoes, %d bad messages at the server", bad, echo.bad.Load())
	}
	if want := conns * loadStreams * rounds; len(rtts) != want {
		t.Fatalf("%d round trips, want %d", len(rtts), want)
	}
	slices.Sort(rtts)
	q := func(f float64) time.Duration { return rtts[int(f*float64(len(rtts)-1))] }
	perConn := (int64(heapConns) - int64(heap0)) / int64(conns)
	t.Logf("load: %d connections x %d streams x %d round trips of 128 B: setup %v, exchange %v (%.0f round trips/s)",
		conns, loadStreams, rounds, setup.Round(time.Millisecond), exchange.Round(time.Millisecond), float64(len(rtts))/exchange.Seconds())
	t.Logf("load: round trip p50 %v, p99 %v, max %v", q(0.5), q(0.99), rtts[len(rtts)-1])
	t.Logf("load: heap per connection %d KiB (both ends, %d streams open), goroutines per connection %.1f",
		perConn>>10, loadStreams, float64(gConns-g0)/float64(conns))
}

// TestSoak churns connections (connect, open four streams, exchange, disconnect) and checks
// that goroutines, descriptors and heap return to their baseline after every round.
func TestSoak(t *testing.T) {
	d := time.Duration(0)
	if v := os.Getenv("TENDRIL_SOAK"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatalf("TENDRIL_SOAK=%q: want a duration such as 5m", v)
		}
	}
	const perRound = 20
	checkNoLeaks(t)
	echo := &echoHandler{}
	srv := newService(t, Config{Protocols: loadProtocols(echo), EventBuffer: 16})
	addr := listen(t, srv)

	round := func() {
		p := &pinger{rounds: 5, got: make(map[*Context]int)}
		p.done.Add(perRound * loadStreams)
		var wg sync.WaitGroup
		for range perRound {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := New(testConfig(Config{Protocols: loadProtocols(p), EventBuffer: 4}))
				if err != nil {
					t.Error(err)
					return
				}
				defer c.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				sess, err := c.Dial(ctx, addr)
				if err != nil {
					t.Error(err)
					p.done.Add(-loadStreams)
					return
				}
				for s := range loadStreams {
					name := fmt.Sprintf("/load%d", s)
					if err := sess.OpenProtocol(ctx, name); err != nil {
						t.Error(err)
						p.done.Done()
						continue
					}
					if err := sess.Send(name, pingMsg(0)); err != nil {
						t.Error(err)
						p.done.Done()
					}
				}
				// Wait for this round's exchanges before disconnecting.
				waitCtx(ctx, &p.done)
			}()
		}
		wg.Wait()
		if p.bad > 0 || echo.bad.Load() > 0 {
			t.Fatalf("bad messages: %d echoes, %d at the server", p.bad, echo.bad.Load())
		}
	}
	settle := func() (int, uint64) {
		deadline := time.Now().Add(20 * time.Second)
		for len(srv.Sessions()) > 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
		return runtime.NumGoroutine(), liveHeap()
	}
	round() // warm up pools and caches
	g0, h0 := settle()
	fd0 := openFDs()
	n := 0
	for end := time.Now().Add(d); n < 3 || time.Now().Before(end); n++ {
		round()
		g, h := settle()
		fd := openFDs()
		if n%10 == 0 || time.Now().After(end) {
			t.Logf("soak round %d: goroutines %d (baseline %d), heap %d KiB (baseline %d KiB), fds %d (baseline %d)",
				n, g, g0, h>>10, h0>>10, fd, fd0)
		}
		if g > g0 {
			t.Fatalf("round %d: %d goroutines, baseline %d", n, g, g0)
		}
		if int64(h)-int64(h0) > 4<<20 {
			t.Fatalf("round %d: heap %d KiB, baseline %d KiB", n, h>>10, h0>>10)
		}
		if fd > fd0 {
			t.Fatalf("round %d: %d descriptors, baseline %d", n, fd, fd0)
		}
	}
	t.Logf("soak: %d rounds of %d connections", n, perRound)
}

// waitCtx waits for wg or ctx.
func waitCtx(ctx context.Context, wg *sync.WaitGroup) {
	ch := make(chan struct{})
	go func() { wg.Wait(); close(ch) }()
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

// TestIdleSessionsAndStreams holds 9,000 sessions (TENDRIL_IDLE to change it; fewer under
// the race detector), both ends in this process, with the node's default memory budgets,
// and then one idle stream on each, opened and round-tripped: every stream opens (before,
// each reserved a whole initial window, 272 KiB, and the 1 GiB shared budget refused
// stream 3,856), and the heap and stacks per idle session and per idle stream are
// reported (both ends together; the peers are raw secio + mux clients).
func TestIdleSessionsAndStreams(t *testing.T) {
	needTCP(t)
	n := 9000
	if raceEnabled || testing.Short() {
		n = 300
	}
	n = envInt(t, "TENDRIL_IDLE", n, 9500)
	checkNoLeaks(t)
	srv := newService(t, Config{
		Protocols: []Protocol{echoRawProto},
		// The default memory budgets; only the session count is raised.
		MaxConnections: n + 64,
		Admission:      Admission{MaxInbound: n + 16},
	})
	addr := listen(t, srv)
	m0 := testutil.SettledMemStats()
	g0 := runtime.NumGoroutine()

	peers := make([]*rawPeer, n)
	parallel(t, n, func(i int) error {
		key, err := secio.GenerateKey()
		if err != nil {
			return err
		}
		_, hp, _ := addr.hostPort()
		c, err := net.DialTimeout("tcp", hp, 30*time.Second)
		for try := 0; err != nil && try < 3; try++ {
			// Thousands of connects in a few seconds, after the package's other tests
			// left their own in TIME_WAIT: the kernel turns the odd one away.
			time.Sleep(100 * time.Millisecond)
			c, err = net.DialTimeout("tcp", hp, 30*time.Second)
		}
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		sc, err := secio.Client(ctx, c, &secio.Config{PrivateKey: key, ExpectedPeer: addr.Peer, MaxFrameSize: mux.MaxFrameSize(nil)})
		if err != nil {
			return err
		}
		ms, err := mux.Client(sc, &mux.Config{KeepAliveInterval: -1})
		if err != nil {
			sc.Close()
			return err
		}
		peers[i] = &rawPeer{sc: sc, ms: ms}
		return nil
	})
	t.Cleanup(func() {
		for _, p := range peers {
			if p != nil {
				p.ms.Close()
			}
		}
	})
	waitUntil(t, "every session registered", func() bool { return len(srv.Sessions()) == n })
	m1 := testutil.SettledMemStats()
	g1 := runtime.NumGoroutine()

	streams := make([]*mux.Stream, n)
	parallel(t, n, func(i int) error {
		st, err := peers[i].ms.OpenStream(context.Background())
		if err != nil {
			return err
		}
		_ = st.SetDeadline(time.Now().Add(60 * time.Second))
		msg := make([]byte, 64)
		msg[0] = byte(i)
		if _, err := st.Write(append(negRequest(echoRawProto.Name, "1"), msg...)); err != nil {
			return err
		}
		got := make([]byte, 8+64) // the answer (accept, version "1"), then the echo
		if _, err := io.ReadFull(st, got); err != nil {
			return fmt.Errorf("stream %d: %w", i, err)
		}
		if got[3] != 2 || got[8] != byte(i) {
			return fmt.Errorf("stream %d: answer %x", i, got[:9])
		}
		_ = st.SetDeadline(time.Time{})
		streams[i] = st
		return nil
	})
	m2 := testutil.SettledMemStats()
	g2 := runtime.NumGoroutine()
	held := func(m runtime.MemStats) int64 { return int64(m.HeapInuse + m.StackInuse) }
	perSession := (held(m1) - held(m0)) / int64(n)
	perStream := (held(m2) - held(m1)) / int64(n)
	t.Logf("%d idle sessions: %.1f KB heap + stacks each, %.1f goroutines each; one idle stream on each: %.1f KB, %.1f goroutines each (both ends); shared budget %d KiB reserved",
		n, float64(perSession)/1000, float64(g1-g0)/float64(n), float64(perStream)/1000, float64(g2-g1)/float64(n), srv.MemoryUsed()>>10)
	for _, st := range streams {
		st.Close()
	}
}

// parallel runs f(0) to f(n-1), 32 at a time, and fails the test with the first error.
func parallel(t *testing.T, n int, f func(i int) error) {
	t.Helper()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	sem := make(chan struct{}, 32)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := f(i); err != nil {
				once.Do(func() { first = err })
			}
		})
	}
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
}
