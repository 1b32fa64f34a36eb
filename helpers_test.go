package tendril

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/hash/blake3"
)

// The helpers of the package's tests: services on loopback, an inbox handler, the event
// recorder, and one way to wait (eventually), on which every wait helper is built.

var loopback = MustParseAddr("/ip4/127.0.0.1/tcp/0")

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

func newService(t testing.TB, cfg Config) *Service {
	t.Helper()
	svc, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	return svc
}

func listen(t testing.TB, svc *Service) Addr {
	t.Helper()
	a, err := svc.Listen(context.Background(), loopback)
	if err != nil {
		t.Fatal(err)
	}
	return a
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
	sess, err := a.Dial(context.Background(), listen(t, b))
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.OpenProtocol(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	return sess, bb, a, b
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
	addr, err := b.ListenLegacy(context.Background(), loopback)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := a.DialLegacy(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	return sess, addr
}
