package tendril

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/mux"
	"github.com/tendril-p2p/tendril/secio"
)

// The attacks of issue 26 as a stranger would run them against a node with the default
// limits (docs/RELIABILITY.md, "Strangers with identities"): every attacker completes a
// handshake with an identity of its own, then sends what costs it nothing. Attackers come
// from 127.0.1.0/24 and 127.0.2.0/24, subject to the per-address caps and handshake rates;
// good peers from 127.0.0.1.

// echoRawProto is a raw protocol that echoes what it reads, with a small buffer (io.Copy's
// 32 KiB would be most of what an idle stream costs).
var echoRawProto = Protocol{Name: "/echo-raw", Versions: []string{"1"}, StreamHandler: StreamHandlerFunc(
	func(_ *Context, _ string, st net.Conn) {
		buf := make([]byte, 512)
		for {
			n, err := st.Read(buf)
			if err != nil {
				return
			}
			if _, err := st.Write(buf[:n]); err != nil {
				return
			}
		}
	})}

// victimConfig is the defaults, with echoRawProto and the per-address caps and handshake
// rates on loopback, except for the good peers' address (127.0.0.1), which stands for the
// many networks good peers come from: they dial dozens of times a second here, above the
// rate one /24 gets (Admission.HandshakeRate).
func victimConfig() Config {
	return Config{Protocols: []Protocol{echoRawProto}, Admission: Admission{Unlimited: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}}
}

// attackerAddr is the loopback address of attacker i: eight to an address, 32 to a /24.
func attackerAddr(i int) string {
	return fmt.Sprintf("127.0.%d.%d", 1+i/32, 1+(i%32)/8)
}

// echoRoundTrip opens echoRawProto on sess and echoes 64 bytes.
func echoRoundTrip(ctx context.Context, sess *Session) error {
	st, _, err := sess.OpenStream(ctx, echoRawProto.Name)
	if err != nil {
		return err
	}
	defer st.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = st.SetDeadline(dl)
	}
	msg := make([]byte, 64)
	if _, err := st.Write(msg); err != nil {
		return err
	}
	_, err = io.ReadFull(st, msg)
	return err
}

// goodDial dials addr from a new Service and echoes once, all within d.
func goodDial(t testing.TB, addr Addr, d time.Duration) error {
	// Not newService: its cleanup would keep every good peer's closed Service reachable
	// until the test ends, and tests that count the heap would count thousands of them.
	svc, err := New(testConfig(Config{Protocols: []Protocol{echoRawProto}}))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	sess, err := svc.Dial(ctx, addr)
	if err != nil {
		return err
	}
	return echoRoundTrip(ctx, sess)
}

// rawAttacker is a peer that completed the handshake and writes yamux frames by hand.
type rawAttacker struct {
	sc   *secio.Conn
	pong chan struct{} // closed when the answer to its ping arrives
}

// dialAttacker handshakes with addr from src; read says whether it reads what the node
// sends (a peer that does not leaves the node's writer blocked).
func dialAttacker(addr Addr, src string, read bool) (*rawAttacker, error) {
	key, err := secio.GenerateKey()
	if err != nil {
		return nil, err
	}
	_, hp, err := addr.hostPort()
	if err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", hp)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sc, err := secio.Client(ctx, c, &secio.Config{PrivateKey: key, ExpectedPeer: addr.Peer, MaxFrameSize: mux.MaxFrameSize(nil)})
	if err != nil {
		return nil, err
	}
	a := &rawAttacker{sc: sc, pong: make(chan struct{})}
	if read {
		go a.readFrames()
	}
	return a, nil
}

// readFrames reads the node's frames, noting the answer to ping 77.
func (a *rawAttacker) readFrames() {
	var h [12]byte
	for {
		if _, err := io.ReadFull(a.sc, h[:]); err != nil {
			return
		}
		n := uint32(h[8])<<24 | uint32(h[9])<<16 | uint32(h[10])<<8 | uint32(h[11])
		switch h[1] {
		case 0: // data
			if _, err := io.CopyN(io.Discard, a.sc, int64(n)); err != nil {
				return
			}
		case 2: // ping
			if h[3]&2 != 0 && n == 77 {
				close(a.pong)
			}
		}
	}
}

// sync sends a ping and waits for its answer: the node has read everything sent before.
func (a *rawAttacker) sync(t *testing.T) {
	t.Helper()
	if _, err := a.sc.Write(yamuxFrame(2, 1, 0, nil)[:8]); err != nil {
		t.Fatal(err)
	}
	if _, err := a.sc.Write([]byte{0, 0, 0, 77}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.pong:
	case <-time.After(10 * time.Second):
		t.Fatal("no answer to the attacker's ping")
	}
}

// TestAttackBareSYNs: sessions that open streams with bare SYNs (and streams with one byte
// of request) and leave them: a new good peer still dials, opens a protocol and round-trips
// within 3 s, and the node opens a protocol to a third peer. Before, every SYN reserved a
// whole initial window (272 KiB) for 15 s: 17 sessions locked the 1 GiB shared budget.
func TestAttackBareSYNs(t *testing.T) {
	needTCP(t)
	for _, n := range []int{17, 64} {
		t.Run(fmt.Sprintf("%d sessions", n), func(t *testing.T) {
			if raceEnabled && n > 17 {
				t.Skip("64 handshakes and 19,200 streams: too slow under the race detector")
			}
			checkNoLeaks(t)
			victim := newService(t, victimConfig())
			addr := listen(t, victim)
			third := newService(t, Config{Protocols: []Protocol{echoRawProto}})
			thirdAddr := listen(t, third)
			var attackers []*rawAttacker
			for i := range n {
				a, err := dialAttacker(addr, attackerAddr(i), true)
				if err != nil {
					t.Fatalf("attacker %d: %v", i, err)
				}
				defer a.sc.Close()
				attackers = append(attackers, a)
			}
			for _, a := range attackers {
				var frames []byte
				for id := uint32(1); id < 2*300; id += 2 {
					if id%4 == 1 {
						frames = append(frames, yamuxFrame(1, 1, id, nil)...) // a bare SYN
					} else {
						frames = append(frames, yamuxFrame(0, 1, id, []byte{'T'})...) // one byte of request
					}
				}
				if _, err := a.sc.Write(frames); err != nil {
					t.Fatal(err)
				}
			}
			for _, a := range attackers {
				a.sync(t)
			}
			t.Logf("%d attacking sessions, %d streams sent: shared budget %d KiB used", n, n*300, victim.MemoryUsed()>>10)
			start := time.Now()
			if err := goodDial(t, addr, 3*time.Second); err != nil {
				t.Fatalf("a good peer after %v: %v", time.Since(start), err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			sess, err := victim.Dial(ctx, thirdAddr)
			if err != nil {
				t.Fatalf("the node dialling a third peer: %v", err)
			}
			if err := echoRoundTrip(ctx, sess); err != nil {
				t.Fatalf("the node's own protocol to a third peer: %v", err)
			}
		})
	}
}

// TestAttackRapidReset: four attackers open streams and reset them at once (one frame
// SYN|RST, or a SYN with a byte of request then an RST), reconnecting whenever the node
// closes them, for 5 s, reading what the node sends or not (its writer then blocks). At
// least 90% of good peers' dials and round trips meanwhile succeed within 2 s, the
// goroutines stay below 4 x MaxStreams + 200 and the heap grows by less than 64 MiB per
// attacker. Before: 20-24 us of the node's CPU per 12-byte frame, 8k-18k goroutines, 0 of 4
// good peers served, and +411 MiB of heap in 5 s with the writer blocked.
func TestAttackRapidReset(t *testing.T) {
	for _, read := range []bool{true, false} {
		t.Run(map[bool]string{true: "attackers reading", false: "writer blocked"}[read], func(t *testing.T) {
			checkNoLeaks(t)
			victim := newService(t, victimConfig())
			addr := listen(t, victim)
			g0 := runtime.NumGoroutine()
			heap0 := liveHeap()
			stop := make(chan struct{})
			var (
				wg       sync.WaitGroup
				sessions atomic.Int64
				frames   atomic.Int64
			)
			for i := range 4 {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						a, err := dialAttacker(addr, attackerAddr(8*i), read)
						if err != nil {
							time.Sleep(10 * time.Millisecond) // refused: try again
							continue
						}
						sessions.Add(1)
						flood(a, i%2 == 1, stop, &frames)
						a.sc.Close()
					}
				})
			}
			var most atomic.Int64
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					case <-time.After(20 * time.Millisecond):
					}
					if g := int64(runtime.NumGoroutine() - g0); g > most.Load() {
						most.Store(g)
					}
				}
			})
			var ok, tried int
			deadline := time.Now().Add(5 * time.Second)
			for time.Now().Before(deadline) {
				tried++
				if err := goodDial(t, addr, 2*time.Second); err == nil {
					ok++
				} else {
					t.Logf("good peer %d: %v", tried, err)
				}
			}
			grown := int64(liveHeap()) - int64(heap0)
			close(stop)
			wg.Wait()
			maxStreams := mux.DefaultConfig().MaxStreams
			t.Logf("%d of %d good peers served; %d attacking sessions sent %d frames; goroutines +%d at most; heap +%d MiB",
				ok, tried, sessions.Load(), frames.Load(), most.Load(), grown>>20)
			if ok*10 < tried*9 {
				t.Errorf("%d of %d good peers served within 2 s, want 90%%", ok, tried)
			}
			if m := most.Load(); m >= int64(4*maxStreams+200) {
				t.Errorf("%d goroutines above the start, want fewer than %d", m, 4*maxStreams+200)
			}
			if grown > 4*64<<20 {
				t.Errorf("the heap grew by %d MiB under 4 attackers", grown>>20)
			}
		})
	}
}

// flood writes streams opened and reset at once on a's connection until it fails or stop
// closes; split sends each as a SYN with one byte of request and an RST, else as one
// SYN|RST frame.
func flood(a *rawAttacker, split bool, stop <-chan struct{}, sent *atomic.Int64) {
	var batch []byte
	id := uint32(1)
	for {
		select {
		case <-stop:
			return
		default:
		}
		batch = batch[:0]
		for range 256 {
			if split {
				batch = append(batch, yamuxFrame(0, 1, id, []byte{'T'})...)
				batch = append(batch, yamuxFrame(1, 8, id, nil)...)
			} else {
				batch = append(batch, yamuxFrame(1, 1|8, id, nil)...)
			}
			id += 2
		}
		_ = a.sc.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := a.sc.Write(batch); err != nil {
			return
		}
		sent.Add(256)
	}
}

// TestAttackRawResets: a peer negotiates raw streams and resets them. Every handler's
// Context ends within a second of the reset, and a session never runs more than MaxStreams
// handlers, even handlers that ignore their Context. Before: a handler's Context ended only
// with its session (3,008 handlers left running with MaxStreams 64).
func TestAttackRawResets(t *testing.T) {
	const maxStreams = 64
	var (
		running, most atomic.Int64
		ended         = make(chan time.Time, 1000)
		release       = make(chan struct{})
	)
	defer close(release)
	cfg := hostileConfig(newChecker())
	cfg.Mux = &mux.Config{MaxStreams: maxStreams}
	cfg.Protocols = append(cfg.Protocols,
		Protocol{Name: "/honest", Versions: []string{"1"}, StreamHandler: StreamHandlerFunc(func(c *Context, _ string, _ net.Conn) {
			<-c.Done()
			ended <- time.Now()
		})},
		Protocol{Name: "/stubborn", Versions: []string{"1"}, StreamHandler: StreamHandlerFunc(func(*Context, string, net.Conn) {
			if n := running.Add(1); n > most.Load() {
				most.Store(n)
			}
			defer running.Add(-1)
			<-release // ignores its Context
		})})
	checkNoLeaks(t)
	addr := listen(t, newService(t, cfg))

	t.Run("contexts end with the reset", func(t *testing.T) {
		p := handshakeRaw(t, addr)
		p.startMux(t)
		for i := range 50 {
			st := p.negotiate(t, "/honest")
			st.Reset()
			select {
			case at := <-ended:
				if d := time.Since(at); d > time.Second {
					t.Fatalf("stream %d: the handler's Context ended %v after the reset", i, d)
				}
			case <-time.After(time.Second):
				t.Fatalf("stream %d: the handler's Context had not ended a second after the reset", i)
			}
		}
	})
	t.Run("handlers ignoring their Context", func(t *testing.T) {
		p := handshakeRaw(t, addr)
		p.startMux(t)
		refused := 0
		for range 4 * maxStreams {
			st, err := p.ms.OpenStream(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Write(negRequest("/stubborn", "1")); err != nil {
				t.Fatal(err)
			}
			var ans [4]byte
			if _, err := io.ReadFull(st, ans[:]); err != nil || ans[3] == 3 {
				refused++
			}
			st.Reset()
		}
		waitUntil(t, "the handlers to start", func() bool { return running.Load() >= maxStreams-1 })
		if m := most.Load(); m > maxStreams {
			t.Fatalf("%d handlers ran at once in one session, MaxStreams is %d", m, maxStreams)
		}
		if refused == 0 {
			t.Fatal("no stream beyond MaxStreams handlers was refused")
		}
	})
}

// negotiate opens a stream and negotiates the raw protocol name, version "1", by hand.
func (p *rawPeer) negotiate(t *testing.T, name string) *mux.Stream {
	t.Helper()
	st, err := p.ms.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Write(negRequest(name, "1")); err != nil {
		t.Fatal(err)
	}
	var ans [4]byte // magic, version, type, and the start of the answer
	if _, err := io.ReadFull(st, ans[:]); err != nil {
		t.Fatalf("negotiating %s: %v", name, err)
	}
	if ans[3] != 2 {
		t.Fatalf("negotiating %s: answer %x", name, ans)
	}
	return st
}

// TestAttackLengthPrefixes: 32 authenticated connections each send only the length prefix
// of the largest record the node accepts, at the default frame size and at the largest one
// (16 MiB). Each holds at most 64 KiB of record buffer, charged to MaxMemory, and the node
// serves a good peer meanwhile. Before: the whole record's buffer at once, outside any
// budget (1.5 MiB per connection by default, 24 MiB at 16 MiB frames).
func TestAttackLengthPrefixes(t *testing.T) {
	needTCP(t)
	for _, frame := range []int{0, secio.MaxFrameSizeLimit} {
		t.Run(fmt.Sprintf("MaxFrameSize %d", frame), func(t *testing.T) {
			checkNoLeaks(t)
			cfg := victimConfig()
			cfg.MaxFrameSize = frame
			victim := newService(t, cfg)
			addr := listen(t, victim)
			frame = victim.cfg.MaxFrameSize
			heap0 := liveHeap()
			used0 := victim.MemoryUsed()
			const n = 32
			for i := range n {
				a, err := dialAttacker(addr, attackerAddr(i), false)
				if err != nil {
					t.Fatal(err)
				}
				defer a.sc.Close()
				body := frame + 1 + 16 // the largest plaintext, its record type, the tag
				prefix := []byte{byte(body >> 24), byte(body >> 16), byte(body >> 8), byte(body)}
				if _, err := a.sc.NetConn().Write(prefix); err != nil {
					t.Fatal(err)
				}
			}
			waitUntil(t, "the prefixes read", func() bool { return victim.MemoryUsed()-used0 >= n*(64<<10)*3/4 })
			if err := goodDial(t, addr, 3*time.Second); err != nil {
				t.Fatalf("a good peer: %v", err)
			}
			charged := victim.MemoryUsed() - used0
			grown := int64(liveHeap()) - int64(heap0)
			t.Logf("%d connections sent a prefix of %d bytes: %d KiB charged, heap +%d KiB", n, frame+17, charged>>10, grown>>10)
			if charged > n*(64<<10)+n*(4<<10) {
				t.Errorf("%d KiB charged for %d prefixes, want at most 64 KiB each", charged>>10, n)
			}
			if grown > n*(64<<10)+16<<20 {
				t.Errorf("the heap grew by %d KiB for %d prefixes", grown>>10, n)
			}
		})
	}
}
