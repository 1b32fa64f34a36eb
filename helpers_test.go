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

var loopback = MustParseAddr("/ip4/127.0.0.1/tcp/0")

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
	deadline := time.After(20 * time.Second)
	for {
		b.mu.Lock()
		ok := cond()
		b.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-b.changed:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
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
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e := <-s.Events():
			if e.Type == typ {
				return true
			}
		case <-timeout:
			return false
		}
	}
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

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// holdProto is a raw-mode protocol whose handlers wait on ctx.Done(), as the StreamHandler
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

// This file holds the helpers of the reliability tests (reliability_*_test.go): an event
// recorder, a handler that verifies every message it is given, and leak checks for
// goroutines and file descriptors.

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
	deadline := time.After(20 * time.Second)
	for {
		if e, ok := l.find(match); ok {
			return e
		}
		select {
		case <-l.changed:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			l.mu.Lock()
			defer l.mu.Unlock()
			t.Fatalf("timed out waiting for %s; events: %v", what, l.evs)
		}
	}
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
	deadline := time.Now().Add(30 * time.Second)
	for {
		c := l.count(match)
		if c >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d events, want %d", what, c, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
