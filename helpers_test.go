package tendril

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tendril-p2p/tendril/hash/blake3"
	"github.com/tendril-p2p/tendril/internal/loopback"
	"github.com/tendril-p2p/tendril/internal/testutil"
	"github.com/tendril-p2p/tendril/secio"
	"github.com/tendril-p2p/tendril/transport"
	"github.com/tendril-p2p/tendril/transport/memory"
	"github.com/tendril-p2p/tendril/transport/tcp"
	"github.com/tendril-p2p/tendril/transport/ws"
)

// The helpers of the package's tests: services on loopback, an inbox handler, the event
// recorder, and one way to wait (eventually), on which every wait helper is built; then the
// reliability tests' checker handler and leak checks.

var loopbackAddr = MustParseAddr("/ip4/127.0.0.1/tcp/0")

// The transport the package's tests listen on (listen, newService):
// TENDRIL_TEST_TRANSPORT=tcp (the default), ws or memory, so that one suite runs over each
// (.ci/run runs it over all three). Tests about TCP itself (raw sockets, per-IP admission
// from loopback aliases, resets) skip under ws and memory (needTCP).
var (
	testTransport = cmp.Or(os.Getenv("TENDRIL_TEST_TRANSPORT"), "tcp")
	testListen    = map[string]Addr{
		"tcp":    loopbackAddr,
		"ws":     MustParseAddr("/ip4/127.0.0.1/tcp/0/ws"),
		"memory": MustParseAddr("/memory/0"),
	}[testTransport]
	// testNetwork is the in-memory network every Service of the tests joins (unshaped).
	testNetwork = memory.NewNetwork(memory.NetworkConfig{})
)

// needTCP skips a test that only makes sense over TCP when the suite runs over another
// transport.
func needTCP(t testing.TB) {
	t.Helper()
	if testTransport != "tcp" {
		t.Skipf("a TCP test; the suite runs over %s", testTransport)
	}
}

// eventually reports whether cond becomes true within timeout. It checks cond at once, then
// each time changed has a value (nil: never) and every poll in between.
func eventually(timeout, poll time.Duration, changed <-chan struct{}, cond func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for !cond() {
		select {
		case <-changed:
		case <-tick.C:
		case <-deadline.C:
			return false
		}
	}
	return true
}

// waitUntil fails the test unless cond becomes true within 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !eventually(10*time.Second, time.Millisecond, nil, cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// inbox records the messages a handler receives, with the stream events.
type inbox struct {
	mu        sync.Mutex
	msgs      [][]byte
	versions  []string
	connected int
	gone      int
	changed   chan struct{}
}

func newInbox() *inbox { return &inbox{changed: make(chan struct{}, 1)} }

func (b *inbox) poke() {
	select {
	case b.changed <- struct{}{}:
	default:
	}
}

func (b *inbox) Connected(_ *Context, v string) {
	b.mu.Lock()
	b.connected++
	b.versions = append(b.versions, v)
	b.mu.Unlock()
	b.poke()
}

func (b *inbox) Received(_ *Context, msg []byte) {
	b.mu.Lock()
	b.msgs = append(b.msgs, msg)
	b.mu.Unlock()
	b.poke()
}

func (b *inbox) Disconnected(*Context) {
	b.mu.Lock()
	b.gone++
	b.mu.Unlock()
	b.poke()
}

// waitFor polls cond whenever the inbox changes, up to a generous deadline.
func (b *inbox) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	locked := func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return cond()
	}
	if !eventually(20*time.Second, 50*time.Millisecond, b.changed, locked) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// testConfig gives cfg, if it names no transports, TCP and WebSocket as by default and a
// host on the tests' in-memory network.
func testConfig(cfg Config) Config {
	if cfg.Transports == nil {
		cfg.Transports = []transport.Transport{tcp.New(nil), ws.New(nil), testNetwork.NewTransport()}
	}
	return cfg
}

func newService(t testing.TB, cfg Config) *Service {
	t.Helper()
	svc, err := New(testConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	return svc
}

func listen(t testing.TB, svc *Service) Addr {
	t.Helper()
	if testListen.IsZero() {
		t.Fatalf("TENDRIL_TEST_TRANSPORT=%s: want tcp, ws or memory", testTransport)
	}
	a, err := svc.Listen(context.Background(), testListen)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// dialTest dials addr with the suite's transport, as a raw connection.
func dialTest(t testing.TB, addr Addr) net.Conn {
	t.Helper()
	var tr transport.Transport
	switch testTransport {
	case "memory":
		tr = testNetwork.NewTransport()
	case "ws":
		tr = ws.New(nil)
	default:
		tr = tcp.New(nil)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := tr.Dial(ctx, addr.Transport)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func echoProto(name string, box *inbox, versions ...string) Protocol {
	if len(versions) == 0 {
		versions = []string{"1.0"}
	}
	return Protocol{Name: name, Versions: versions, Handler: box}
}

func waitEvent(t *testing.T, s *Service, typ EventType) bool {
	t.Helper()
	return eventually(10*time.Second, time.Millisecond, nil, func() bool {
		for {
			select {
			case e, ok := <-s.Events():
				if !ok {
					return false
				}
				if e.Type == typ {
					return true
				}
			default:
				return false
			}
		}
	})
}

// digestMsg makes a message whose first 32 bytes are the BLAKE3 of the rest.
func digestMsg(seq, size int) []byte {
	if size < 40 {
		size = 40
	}
	m := make([]byte, size)
	copy(m[32:], fmt.Sprintf("%08d", seq))
	rand.Read(m[40:])
	sum := blake3.Sum256(m[32:])
	copy(m, sum[:])
	return m
}

func checkDigest(m []byte) bool {
	if len(m) < 40 {
		return false
	}
	sum := blake3.Sum256(m[32:])
	return bytes.Equal(sum[:], m[:32])
}

// echoPair dials from a Service to another, both serving protocol name with echoProto, and
// opens it; messages arriving at the listening side go to bb.
func echoPair(t *testing.T, name string) (sess *Session, bb *inbox, a, b *Service) {
	t.Helper()
	bb = newInbox()
	a = newService(t, Config{Protocols: []Protocol{echoProto(name, newInbox())}})
	b = newService(t, Config{Protocols: []Protocol{echoProto(name, bb)}})
	return dialOpen(t, a, listen(t, b), name), bb, a, b
}

// dial dials addr from svc, failing the test if that fails.
func dial(t testing.TB, svc *Service, addr Addr) *Session {
	t.Helper()
	sess, err := svc.Dial(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	return sess
}

// dialOpen dials addr from svc and opens proto on the new session.
func dialOpen(t testing.TB, svc *Service, addr Addr, proto string) *Session {
	t.Helper()
	sess := dial(t, svc, addr)
	if err := sess.OpenProtocol(context.Background(), proto); err != nil {
		t.Fatal(err)
	}
	return sess
}

// holdProto is a raw-mode protocol whose handlers wait on c.Done(), as the StreamHandler
// doc suggests; running counts handlers that have not returned.
func holdProto(running *atomic.Int64) Protocol {
	return Protocol{Name: "/hold", Versions: []string{"1"}, StreamHandler: StreamHandlerFunc(func(c *Context, _ string, st net.Conn) {
		running.Add(1)
		defer running.Add(-1)
		<-c.Done()
	})}
}

// negRequest encodes a negotiation request (docs/protocol.md), for peers driven by hand.
func negRequest(name string, versions ...string) []byte {
	body := append([]byte{byte(len(name))}, name...)
	body = append(body, byte(len(versions)))
	for _, v := range versions {
		body = append(body, byte(len(v)))
		body = append(body, v...)
	}
	return append([]byte{'T', 'N', 1, 1, byte(len(body) >> 8), byte(len(body))}, body...)
}

// openHold opens /hold from a raw peer, negotiating it by hand.
func openHold(t *testing.T, p *rawPeer) {
	t.Helper()
	st, err := p.ms.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Write(negRequest("/hold", "1")); err != nil {
		t.Fatal(err)
	}
}

// eventLog drains a Service's Events channel into a slice, so that no event is dropped and
// tests can wait for one. Its goroutine ends when the Service closes the channel.
type eventLog struct {
	mu      sync.Mutex
	evs     []Event
	changed chan struct{}
}

func collectEvents(svc *Service) *eventLog {
	l := &eventLog{changed: make(chan struct{}, 1)}
	go func() {
		for e := range svc.Events() {
			l.mu.Lock()
			l.evs = append(l.evs, e)
			l.mu.Unlock()
			select {
			case l.changed <- struct{}{}:
			default:
			}
		}
	}()
	return l
}

// find returns the first recorded event that match accepts.
func (l *eventLog) find(match func(Event) bool) (Event, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.evs {
		if match(e) {
			return e, true
		}
	}
	return Event{}, false
}

// waitFor waits (generously) for an event that match accepts.
func (l *eventLog) waitFor(t *testing.T, what string, match func(Event) bool) Event {
	t.Helper()
	var got Event
	found := func() (ok bool) { got, ok = l.find(match); return ok }
	if !eventually(20*time.Second, 50*time.Millisecond, l.changed, found) {
		l.mu.Lock()
		defer l.mu.Unlock()
		t.Fatalf("timed out waiting for %s; events: %v", what, l.evs)
	}
	return got
}

// countEvents counts recorded events that match.
func (l *eventLog) count(match func(Event) bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.evs {
		if match(e) {
			n += max(e.Count, 1) // coalesced repeats count for what they stand for
		}
	}
	return n
}

func (l *eventLog) waitCount(t *testing.T, what string, n int, match func(Event) bool) {
	t.Helper()
	if !eventually(30*time.Second, 20*time.Millisecond, nil, func() bool { return l.count(match) >= n }) {
		t.Fatalf("%s: %d events, want %d", what, l.count(match), n)
	}
}

// legacyPair dials a legacy TEA session with key from a Service serving pa to one serving pb,
// listening at the address it returns.
func legacyPair(t *testing.T, key []byte, pa, pb Protocol) (*Session, Addr) {
	t.Helper()
	a := newService(t, Config{Protocols: []Protocol{pa}, LegacyTEA: &LegacyTEAConfig{Key: key}})
	b := newService(t, Config{Protocols: []Protocol{pb}, LegacyTEA: &LegacyTEAConfig{Key: key}})
	addr, err := b.ListenLegacy(context.Background(), loopbackAddr)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := a.DialLegacy(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	return sess, addr
}

// trickleHello writes the start of a plausible first handshake message (its length, then
// its first bytes) to c, one byte every interval, over and over, until a write fails or stop
// is closed: a slowloris that keeps its handshake alive.
func trickleHello(c net.Conn, every time.Duration, stop <-chan struct{}) {
	b := []byte{0, 0, 0, 71, 1, 0, 1}
	for j := 0; ; j++ {
		if _, err := c.Write(b[j%len(b) : j%len(b)+1]); err != nil {
			return
		}
		select {
		case <-time.After(every):
		case <-stop:
			return
		}
	}
}

// sendUntilBlocked sends msg on proto until Send refuses it with ErrSessionBlocked, and
// returns how many were queued before; another error, or limit sends that all succeed, fails
// the test.
func sendUntilBlocked(t *testing.T, sess *Session, proto string, msg []byte, limit int) int {
	t.Helper()
	for sent := range limit {
		err := sess.Send(proto, msg)
		if errors.Is(err, ErrSessionBlocked) {
			return sent
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("%d sends of %d bytes to a peer that does not read never blocked", limit, len(msg))
	return limit
}

// The helpers of the reliability tests (reliability_*_test.go): a handler that verifies
// every message it is given, and leak checks for goroutines and file descriptors.

// checker is a Handler that verifies every message: its BLAKE3 digest (see digestMsg) and
// its sequence number, which must be exactly one more than the previous one on the same
// session and protocol. Anything else (a corrupt, replayed, reordered or skipped message)
// is recorded as a violation.
type checker struct {
	mu      sync.Mutex
	next    map[*Session]int
	bad     []string
	total   int
	changed chan struct{}
}

func newChecker() *checker {
	return &checker{next: make(map[*Session]int), changed: make(chan struct{}, 1)}
}

func (c *checker) Connected(*Context, string) {}

func (c *checker) Disconnected(*Context) {}

func (c *checker) Received(hc *Context, msg []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total++
	sess := hc.Session()
	want := c.next[sess]
	switch {
	case !checkDigest(msg):
		c.bad = append(c.bad, fmt.Sprintf("session %d: corrupt message of %d bytes", sess.ID(), len(msg)))
	default:
		seq, err := strconv.Atoi(string(msg[32:40]))
		if err != nil || seq != want {
			c.bad = append(c.bad, fmt.Sprintf("session %d: sequence %q, want %d", sess.ID(), msg[32:40], want))
		}
	}
	c.next[sess] = want + 1
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// count returns how many messages arrived on sess.
func (c *checker) count(sess *Session) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.next[sess]
}

func (c *checker) violations() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.bad...)
}

// waitCount waits until sess has delivered n messages.
func (c *checker) waitCount(t *testing.T, sess *Session, n int) {
	t.Helper()
	if !eventually(30*time.Second, 50*time.Millisecond, c.changed, func() bool { return c.count(sess) >= n }) {
		t.Fatalf("timed out: %d of %d messages on session %d", c.count(sess), n, sess.ID())
	}
}

func (c *checker) assertClean(t *testing.T) {
	t.Helper()
	if v := c.violations(); len(v) > 0 {
		t.Fatalf("%d bad messages reached a handler: %v", len(v), v)
	}
}

// openFDs counts this process's open file descriptors (Linux); -1 elsewhere.
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// warmNetwork makes the runtime create its network poller descriptors before a baseline
// of open descriptors is taken.
func warmNetwork(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
}

// checkNoLeaks registers, as the test's last cleanup, a check that every goroutine started
// since now has ended and that the number of open descriptors is back to what it is now.
// Call it before creating the test's services, so that their Close runs first.
func checkNoLeaks(t *testing.T) {
	t.Helper()
	warmNetwork(t)
	ignore := goleak.IgnoreCurrent()
	fds := openFDs()
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		if err := goleak.Find(ignore); err != nil {
			t.Errorf("goroutines left behind: %v", err)
		}
		if fds < 0 {
			return
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			n := openFDs()
			if n <= fds {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("file descriptors: %d open, %d before the test", n, fds)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// liveHeap returns the heap in use after full collections.
func liveHeap() uint64 { return testutil.SettledMemStats().HeapInuse }

// sendSeq sends messages first..last-1 (digestMsg, size bytes) on a session's protocol,
// waiting for queue space; it stops at the first error and returns it.
func sendSeq(sess *Session, name string, first, last, size int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := first; i < last; i++ {
		if err := sess.SendContext(ctx, name, digestMsg(i, size)); err != nil {
			return err
		}
	}
	return nil
}

// tapProxy relays TCP connections through a loopback port to a target, keeping every byte
// that passes each way (up: toward the target). Once frozen it forwards nothing more in
// either direction but keeps both sockets open: a peer that has silently gone away.
type tapProxy struct {
	srv    *loopback.Server
	frozen chan struct{}
	once   sync.Once

	mu       sync.Mutex // guards up and down while relays run; close ends them
	up, down bytes.Buffer
}

func newTapProxy(t *testing.T, target string) *tapProxy {
	srv, err := loopback.Listen()
	if err != nil {
		t.Fatal(err)
	}
	p := &tapProxy{srv: srv, frozen: make(chan struct{})}
	srv.Serve(func(in *net.TCPConn) {
		out, err := net.Dial("tcp", target)
		if err != nil {
			in.Close()
			return
		}
		if !srv.Track(in) || !srv.Track(out) {
			in.Close()
			out.Close()
			return
		}
		var wg sync.WaitGroup
		wg.Go(func() { p.relay(out, in, &p.up) })
		p.relay(in, out, &p.down)
		wg.Wait()
	})
	t.Cleanup(p.close)
	return p
}

// addr returns the proxy's address, without a peer ID.
func (p *tapProxy) addr() Addr {
	return MustParseAddr("/ip4/127.0.0.1/tcp/" + strconv.Itoa(p.srv.Addr().Port))
}

// relay copies src to dst and into rec until src ends (then it closes dst, passing the end
// on), a write fails, or the proxy is frozen.
func (p *tapProxy) relay(dst, src net.Conn, rec *bytes.Buffer) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-p.frozen:
			return // drop this and everything after
		default:
		}
		p.mu.Lock()
		rec.Write(buf[:n])
		p.mu.Unlock()
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			dst.Close()
			return
		}
	}
}

func (p *tapProxy) freeze() { p.once.Do(func() { close(p.frozen) }) }

// close stops the proxy, closes its connections and waits for its relays; up and down may
// be read without the lock afterwards.
func (p *tapProxy) close() { p.srv.Close() }

// hostPort returns the network and "host:port" of a TCP address, for tests that dial it
// with the net package.
func (a Addr) hostPort() (network, hostport string, err error) {
	network, hostport, rest, ok := transport.HostPort(a.Transport)
	if !ok || len(rest) != 0 {
		return "", "", fmt.Errorf("%w: %s is not a TCP address", ErrInvalidAddr, a.Transport)
	}
	return network, hostport, nil
}

// addrFromNet converts a TCP net.Addr into an Addr.
func addrFromNet(na net.Addr, peer secio.PeerID) Addr {
	return Addr{Transport: transport.FromNetAddr(na), Peer: peer}
}
